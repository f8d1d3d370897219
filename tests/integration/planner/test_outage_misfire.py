"""A 10-minute outage, replayed on a shifted clock: each misfire policy yields exactly the
documented records and causes (horae.domain.misfire), and never a flood."""

from __future__ import annotations

import time

from horae.contracts import events as ev
from horae.contracts.topics import Topic
from tests.integration.planner.harness import (
    PlannerEnv,
    consumed,
    decided_since,
    definition,
    duplicates,
    ledger,
)
from tests.waiting import wait_until

OUTAGE_S = 600
POLICIES = {
    "once": ev.Policies(misfire=ev.Misfire.FIRE_ONCE),
    "all": ev.Policies(misfire=ev.Misfire.FIRE_ALL, max_catchup=3),
    "skip": ev.Policies(misfire=ev.Misfire.SKIP),
    "horizon": ev.Policies(misfire=ev.Misfire.FIRE_ONCE, horizon_s=300),
}


def test_outage_of_ten_minutes_per_misfire_policy(planner_env: PlannerEnv) -> None:
    for name, policies in POLICIES.items():
        planner_env.put(definition(name, "*/2 * * * *", policies=policies))  # every 2 minutes
    planner_env.start_thread("a")
    # the triggers are indexed and their state committed
    wait_until(lambda: consumed(planner_env, Topic.DEFINITIONS), 60, 0.2, "definitions decided")
    planner_env.stop_threads()
    down_at = time.time()
    # the planner comes back about 10 minutes later, on a frozen virtual clock (the gate is widened
    # for it), 90 s after an instant so that the latest one is missed too (grace is 60 s)
    back_at = int(down_at) + OUTAGE_S
    back_at += (90 - back_at % 120) % 120
    missed = list(range(int(down_at) // 120 * 120 + 120, back_at + 1, 120))
    assert 5 <= len(missed) <= 6
    planner_env.start_thread("a", clock=lambda: float(back_at), max_skew_s=1e9)
    # instants are decided in order: a record of the latest missed one means all are decided
    wait_until(
        lambda: decided_since(planner_env, missed[-1], POLICIES), 60, 0.2, "the outage decided"
    )
    planner_env.stop_threads()
    fires = ledger(planner_env)
    assert not duplicates(fires)
    # an instant may have come due while the planner first ran: it fired on time, before the outage
    before = [f for f in fires if f.scheduled_at.timestamp() <= down_at]
    assert all(f.state is ev.FireState.FIRED and f.lane is ev.Lane.ON_TIME for f in before)
    by = {
        name: sorted(
            (f for f in fires if f.trigger_id == name and f.scheduled_at.timestamp() > down_at),
            key=lambda f: f.scheduled_at,
        )
        for name in POLICIES
    }

    def states(name: str) -> list[tuple[int, ev.FireState, str | None]]:
        return [(int(f.scheduled_at.timestamp()), f.state, f.cause) for f in by[name]]

    once = states("once")
    assert [s for s in once if s[1] is ev.FireState.FIRED] == [
        (missed[-1], ev.FireState.FIRED, None)
    ], "fire_once: one late fire for the latest missed instant"
    assert [s[0] for s in once if s[1] is ev.FireState.SKIPPED] == missed[:-1]
    assert all(s[2] == "skipped: misfire policy" for s in once if s[1] is ev.FireState.SKIPPED)
    assert all(f.lane is ev.Lane.CATCH_UP for f in by["once"] if f.state is ev.FireState.FIRED)

    fired_all = [s[0] for s in states("all") if s[1] is ev.FireState.FIRED]
    assert fired_all == missed[-3:], "fire_all: the latest max_catchup instants, in order"
    assert [s[0] for s in states("all") if s[1] is ev.FireState.SKIPPED] == missed[:-3]

    skip = states("skip")
    assert [s[0] for s in skip] == missed and all(s[1] is ev.FireState.SKIPPED for s in skip)

    horizon = states("horizon")
    expired = [s[0] for s in horizon if s[1] is ev.FireState.EXPIRED]
    assert expired == [m for m in missed if m < back_at - 300]
    assert all(s[2] == "expired: past horizon" for s in horizon if s[1] is ev.FireState.EXPIRED)
    assert [s[0] for s in horizon if s[1] is ev.FireState.FIRED] == [missed[-1]]
