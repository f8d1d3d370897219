"""Admission: lane classes, tiers (on-time, over-quota, catch-up, backfill), quotas, the
catch-up cap, per-tenant in-flight limits, oldest-first fairness and a process's share of the
limits (pure, virtual clock)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from horae.settings import Settings
from horae.streams.dispatcher.admission import (
    Admission,
    LaneClass,
    Tier,
    TokenBucket,
    process_cap,
)
from horae.streams.dispatcher.config import DispatcherConfig, TenantLimits

ON, CU, BF = LaneClass.ON_TIME, LaneClass.CATCH_UP, LaneClass.BACKFILL


def admission(rate: float = 10, inflight: int = 100, slots: int = 1000) -> Admission[str]:
    return Admission(
        lambda _t: TenantLimits(rate=rate, inflight=inflight, catchup_share=0.1),
        max_inflight=slots,
    )


def drain(a: Admission[str], now: float) -> list[tuple[str, Tier]]:
    out = []
    while (got := a.pop(now)) is not None:
        out.append((got[0], got[2]))
    return out


def test_delayed_orders_wait_and_do_not_block_ready_ones() -> None:
    a = admission()
    a.add("later", "t", ON, not_before=100.0, now=0.0)
    a.add("now", "t", ON, not_before=0.0, now=0.0)
    assert drain(a, 1.0) == [("now", Tier.ON_TIME)]
    assert a.wake_in(1.0) == 99.0
    assert [x for x, _ in drain(a, 100.0)] == ["later"]


def test_oldest_first_across_triggers_and_tenants() -> None:
    a = admission()
    for name, tenant, due in [("c", "t1", 3.0), ("a", "t2", 1.0), ("b", "t1", 2.0)]:
        a.add(name, tenant, ON, due, 0.0)
    assert [x for x, _ in drain(a, 5.0)] == ["a", "b", "c"]


def test_tier_order_on_time_then_over_quota_then_catch_up_then_backfill() -> None:
    a = admission(rate=2)  # bucket of 2 tokens
    a.add("bf", "t", BF, 0.0, 0.0)
    a.add("cu", "t", CU, 0.0, 0.0)
    for i in range(3):
        a.add(f"on{i}", "t", ON, 0.0, 0.0)
    got = drain(a, 0.0)
    # two on-time in quota, one over quota; catch-up and backfill wait for tokens
    assert got == [("on0", Tier.ON_TIME), ("on1", Tier.ON_TIME), ("on2", Tier.OVER_QUOTA)]
    assert len(a) == 2
    assert drain(a, 0.5) == [("cu", Tier.CATCH_UP)]  # 1 tenant token, catch-up bucket full
    assert drain(a, 1.0) == [("bf", Tier.BACKFILL)]


def test_shedding_under_overload_keeps_on_time_and_holds_the_rest() -> None:
    a = admission(rate=1000, slots=2)
    for i in range(3):
        a.add(f"bf{i}", "t", BF, 0.0, 0.0)
        a.add(f"cu{i}", "t", CU, 0.0, 0.0)
        a.add(f"on{i}", "t", ON, 1.0, 0.0)  # on-time is younger, still goes first
    first = drain(a, 1.0)
    assert [x for x, _ in first] == ["on0", "on1"]
    a.release("t")
    a.release("t")
    assert [x for x, _ in drain(a, 1.0)] == ["on2", "cu0"]


def test_catch_up_is_capped_at_its_share_of_the_quota() -> None:
    a = admission(rate=100)  # catch-up: 10/s
    for i in range(1000):
        a.add(f"cu{i}", "t", CU, 0.0, 0.0)
    sent = 0
    for step in range(100):  # 10 virtual seconds in steps of 0.1 s
        got = drain(a, step * 0.1)
        sent += len(got)
        for _ in got:
            a.release("t")
    assert sent <= 10 + 10 * 10  # burst of 10 plus 10/s
    assert sent >= 90


def test_tenant_inflight_limit_is_hard_and_other_tenants_go() -> None:
    a = admission(inflight=2)
    for i in range(5):
        a.add(f"x{i}", "noisy", ON, 0.0, 0.0)
    a.add("y", "calm", ON, 1.0, 0.0)
    got = [x for x, _ in drain(a, 2.0)]
    assert got == ["x0", "x1", "y"]
    a.release("noisy")
    assert [x for x, _ in drain(a, 2.0)] == ["x2"]


def test_purge_drops_held_orders() -> None:
    a = admission()
    a.add("keep", "t", ON, 0.0, 0.0)
    a.add("drop", "t", CU, 50.0, 0.0)
    a.add("drop2", "t", ON, 0.0, 0.0)
    assert a.purge(lambda x: x == "keep") == 2
    assert len(a) == 1
    assert drain(a, 100.0) == [("keep", Tier.ON_TIME)]


@given(st.floats(0.1, 1000), st.lists(st.floats(0, 10), min_size=1, max_size=50))
def test_token_bucket_never_exceeds_rate_plus_burst(rate: float, gaps: list[float]) -> None:
    bucket = TokenBucket(rate, 0.0)
    now, taken = 0.0, 0
    for gap in gaps:
        now += gap
        while bucket.has(now):
            bucket.take()
            taken += 1
    assert taken <= bucket.burst + rate * now + 1e-6


def sent_in(a: Admission[str], tenant: str, seconds: int) -> int:
    """Orders sent in ``seconds`` virtual seconds (steps of 0.1 s), each released at once."""
    sent = 0
    for step in range(seconds * 10 + 1):
        got = drain(a, step * 0.1)
        sent += len(got)
        for _ in got:
            a.release(tenant)
    return sent


def test_backfill_rate_is_the_share_of_the_tenant_grant_a_process_owns() -> None:
    a = admission(rate=20)
    for i in range(1000):
        a.add(f"bf{i}", "t", BF, 0.0, 0.0)
    whole = sent_in(a, "t", 10)
    assert 200 <= whole <= 20 + 20 * 10  # alone (every partition): the whole grant

    half = admission(rate=20)
    half.set_share(0.5, 0.0)  # two processes, half the partitions each
    for i in range(1000):
        half.add(f"bf{i}", "t", BF, 0.0, 0.0)
    sent = sent_in(half, "t", 10)
    assert 100 <= sent <= 10 + 10 * 10  # burst of 10 plus 10/s


def test_a_new_share_applies_to_tenants_already_held_and_drops_surplus_tokens() -> None:
    a = admission(rate=20)
    a.add("first", "t", BF, 0.0, 0.0)
    assert len(drain(a, 0.0)) == 1
    a.release("t")
    a.set_share(0.25, 0.0)  # 5/s, burst 5: 19 banked tokens shrink to 5
    for i in range(100):
        a.add(f"bf{i}", "t", BF, 0.0, 0.0)
    assert len(drain(a, 0.0)) == 5


def test_catch_up_share_of_the_process_share() -> None:
    a = admission(rate=100)  # catch-up 10/s over the group
    a.set_share(0.5, 0.0)  # this process: 5/s
    for i in range(1000):
        a.add(f"cu{i}", "t", CU, 0.0, 0.0)
    assert 50 <= sent_in(a, "t", 10) <= 5 + 5 * 10


def test_inflight_cap_is_divided_and_at_least_one() -> None:
    assert [process_cap(5, s) for s in (1.0, 0.5, 1 / 3, 0.1, 0.0)] == [5, 2, 1, 1, 1]
    a = admission(inflight=4)
    a.set_share(0.5, 0.0)
    for i in range(5):
        a.add(f"x{i}", "t", ON, 0.0, 0.0)
    assert [x for x, _ in drain(a, 1.0)] == ["x0", "x1"]


def test_limits_come_from_the_tenant_grant_in_the_settings() -> None:
    settings = Settings(
        tenant_grants={"acme": {"dispatch_per_s": 20, "catchup_share": 0.5, "max_concurrency": 3}},
        dispatcher={"callback_secret": "x"},
    )
    config = DispatcherConfig.from_settings(settings, "127.0.0.1:1")
    assert config.limits("acme") == TenantLimits(rate=20, inflight=3, catchup_share=0.5)
    assert config.limits("other") == TenantLimits(rate=10.0, inflight=64, catchup_share=0.2)


def test_take_removes_the_held_orders_it_names_and_nothing_in_flight() -> None:
    a = admission()
    a.add("sent", "t", ON, not_before=0.0, now=0.0)
    assert drain(a, 0.0) == [("sent", Tier.ON_TIME)]  # in flight now
    a.add("ready", "t", ON, not_before=0.0, now=0.0)
    a.add("waiting", "t", CU, not_before=50.0, now=0.0)
    a.add("other", "u", ON, not_before=0.0, now=0.0)
    names = {"sent", "ready", "waiting", "other"}
    assert sorted(a.take(lambda x: x in names - {"other"}, "t")) == ["ready", "waiting"]
    assert len(a) == 1 and a.held[CU] == 0
    assert a.take(lambda x: x == "sent") == []
    assert [x for x, _ in drain(a, 100.0)] == ["other"]
