"""Misfire evaluation: each instant of (last_decided, now] is decided exactly once, with a cause."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from horae.domain import (
    CAUSE_EXPIRED,
    CAUSE_PAUSED,
    CAUSE_SKIPPED,
    CronSpec,
    EverySpec,
    Fire,
    MisfireKind,
    MisfirePolicy,
    compile_schedule,
    evaluate_misfire,
    instants_between,
    parse_instant,
)
from horae.domain.jitter import jitter_offset


def cases(n: int) -> settings:
    return settings(max_examples=n, deadline=None, suppress_health_check=[HealthCheck.too_slow])


T0 = parse_instant("2026-03-01T00:00:00Z")
schedules = st.one_of(
    st.builds(EverySpec, st.integers(60, 7200), st.integers(T0 - 86400, T0)),
    st.sampled_from(["*/5 * * * *", "0 * * * *", "30 2 * * *", "*/20 1-3 * * *"]).map(CronSpec),
)
policies = st.builds(
    MisfirePolicy, st.sampled_from(list(MisfireKind)), st.integers(1, 50), st.integers(0, 600)
)


@cases(1000)
@given(
    recurrence=schedules,
    zone=st.sampled_from(["UTC", "America/New_York", "Australia/Lord_Howe"]),
    last=st.integers(T0, T0 + 30 * 86400),
    gap=st.integers(0, 3 * 86400),
    policy=policies,
    horizon=st.integers(0, 2 * 86400),
    pauses=st.lists(st.tuples(st.integers(0, 3 * 86400), st.integers(1, 86400)), max_size=2),
)
def test_every_instant_is_decided_exactly_once(
    recurrence: CronSpec | EverySpec,
    zone: str,
    last: int,
    gap: int,
    policy: MisfirePolicy,
    horizon: int,
    pauses: list[tuple[int, int]],
) -> None:
    schedule = compile_schedule(recurrence, zone)
    now = last + gap
    paused = [(last + a, last + a + b) for a, b in pauses]
    outcome = evaluate_misfire(schedule, last, now, policy, horizon, paused, max_records=10**6)
    due = list(instants_between(schedule, last + 1, now + 1, 10**5).instants)
    fired = [f.scheduled for f in outcome.fires]
    recorded = [r.scheduled for r in outcome.not_fired]
    assert not outcome.omitted
    assert sorted(fired + recorded) == due  # a partition: nothing lost, nothing twice
    assert fired == sorted(fired) and recorded == sorted(recorded)
    assert outcome.decided_through == max(now, last)
    catch_up = [f for f in outcome.fires if f.catch_up]
    if policy.kind is MisfireKind.SKIP:
        assert not catch_up
    elif policy.kind is MisfireKind.FIRE_ONCE:
        assert len(catch_up) <= 1
    else:
        assert len(catch_up) <= policy.max_fires
    for fire in outcome.fires:
        assert fire.late_s == now - fire.scheduled
        assert fire.catch_up or fire.late_s <= policy.grace_s
        assert not any(a <= fire.scheduled < b for a, b in paused)
        assert fire.late_s <= max(horizon, policy.grace_s)
    for record in outcome.not_fired:
        if record.cause == CAUSE_PAUSED:
            assert any(a <= record.scheduled < b for a, b in paused)
        elif record.cause == CAUSE_EXPIRED:
            assert record.scheduled < now - horizon
        else:
            assert record.cause == CAUSE_SKIPPED and record.detail


def test_fire_once_fires_the_latest_missed_instant_late() -> None:
    schedule = compile_schedule(CronSpec("0 * * * *"), "UTC")
    last = parse_instant("2026-03-08T00:00:00Z")
    now = parse_instant("2026-03-08T05:30:00Z")
    outcome = evaluate_misfire(schedule, last, now, MisfirePolicy(), horizon_s=86400)
    assert [(f.scheduled, f.late_s, f.catch_up) for f in outcome.fires] == [
        (parse_instant("2026-03-08T05:00:00Z"), 1800, True)
    ]
    assert [r.scheduled for r in outcome.not_fired] == [
        parse_instant(f"2026-03-08T0{h}:00:00Z") for h in range(1, 5)
    ]
    assert {r.cause for r in outcome.not_fired} == {CAUSE_SKIPPED}


def test_horizon_expires_old_instants_and_fire_all_is_bounded() -> None:
    schedule = compile_schedule(CronSpec("0 * * * *"), "UTC")
    last = parse_instant("2026-03-08T00:00:00Z")
    now = parse_instant("2026-03-08T10:00:30Z")
    policy = MisfirePolicy(MisfireKind.FIRE_ALL, max_fires=3)
    outcome = evaluate_misfire(schedule, last, now, policy, horizon_s=5 * 3600)
    assert [(f.scheduled - last) // 3600 for f in outcome.fires] == [7, 8, 9, 10]
    assert [f.catch_up for f in outcome.fires] == [True, True, True, False]  # 10:00 is on time
    causes = {(r.scheduled - last) // 3600: r.cause for r in outcome.not_fired}
    assert causes == {
        1: CAUSE_EXPIRED, 2: CAUSE_EXPIRED, 3: CAUSE_EXPIRED, 4: CAUSE_EXPIRED,
        5: CAUSE_EXPIRED,  # 5 h 0 min 30 s late: past the 5 h horizon
        6: CAUSE_SKIPPED,
    }  # fmt: skip


def test_long_outage_is_summarised_not_enumerated() -> None:
    schedule = compile_schedule(CronSpec("* * * * *"), "UTC")
    last = parse_instant("2025-03-08T00:00:00Z")
    now = parse_instant("2026-03-08T00:00:00Z")  # a year down: 525,600 instants
    outcome = evaluate_misfire(schedule, last, now, MisfirePolicy(), 3600, max_records=100)
    assert len(outcome.not_fired) == 100
    # within the 60 s grace: on time, so fire_once has nothing to catch up
    assert [(f.scheduled, f.catch_up) for f in outcome.fires] == [(now - 60, False), (now, False)]
    (expired,) = [o for o in outcome.omitted if o.cause == CAUSE_EXPIRED]
    assert expired.start == outcome.not_fired[-1].scheduled + 60
    assert expired.end == now - 3600
    (skipped,) = [o for o in outcome.omitted if o.cause == CAUSE_SKIPPED]
    assert skipped.count == 59  # [now - 1 h, now - 60 s): missed, superseded by on-time fires


def test_paused_instants_are_recorded_as_paused() -> None:
    schedule = compile_schedule(CronSpec("0 * * * *"), "UTC")
    last = parse_instant("2026-03-08T00:00:00Z")
    now = parse_instant("2026-03-08T04:00:00Z")
    paused = [(last + 1, last + 3 * 3600 + 1)]
    outcome = evaluate_misfire(schedule, last, now, MisfirePolicy(), 86400, paused)
    assert [r.cause for r in outcome.not_fired] == [CAUSE_PAUSED] * 3
    assert [f.scheduled for f in outcome.fires] == [now]


def test_clock_behind_cursor_decides_nothing() -> None:
    schedule = compile_schedule(CronSpec("0 * * * *"), "UTC")
    outcome = evaluate_misfire(schedule, T0, T0 - 10, MisfirePolicy(), 3600)
    assert outcome.fires == () and outcome.not_fired == () and outcome.decided_through == T0


@cases(300)
@given(
    jitter_s=st.integers(1, 3000),  # decided before the next instant
    wake_s=st.integers(0, 400),
    grace_s=st.integers(0, 120),
    span_h=st.integers(1, 4),
    paused=st.booleans(),
)
def test_lateness_counts_from_the_jittered_due_time(
    jitter_s: int, wake_s: int, grace_s: int, span_h: int, paused: bool
) -> None:
    """Each instant of an hourly schedule, decided ``wake_s`` after its jittered due time, is on
    time exactly when ``wake_s <= grace_s``, with its own deterministic offset; the fast path and
    the general one (``paused`` forces it) agree."""
    schedule = compile_schedule(CronSpec("0 * * * *"), "UTC")
    policy = MisfirePolicy(MisfireKind.SKIP, grace_s=grace_s)
    windows = ((0, 1),) if paused else ()
    last = T0
    for hour in range(1, span_h + 1):
        t = T0 + hour * 3600
        offset = jitter_offset("k", t, jitter_s * 1000, t + 3600)
        now = t + (offset + 999) // 1000 + wake_s
        outcome = evaluate_misfire(
            schedule, last, now, policy, 86400, windows, jitter_ms=jitter_s * 1000, jitter_key="k"
        )
        late_ms = (now - t) * 1000 - offset
        if late_ms <= grace_s * 1000:
            assert outcome.fires == (Fire(t, late_ms // 1000, False, offset),)
        else:
            assert outcome.fires == () and [r.cause for r in outcome.not_fired] == [CAUSE_SKIPPED]
        last = outcome.decided_through
