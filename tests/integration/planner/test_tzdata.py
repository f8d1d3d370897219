"""A tzdata change on the real broker and a virtual clock: a planner restarted on a release that
moved the trigger's zone emits ``schedule.recomputed`` once, records the release in its state,
and fires the recomputed instants (not the old ones), each carrying the new release."""

from __future__ import annotations

import time
from functools import partial

from horae.contracts import events as ev
from horae.contracts.codec import decode
from horae.contracts.topics import Topic
from horae.domain.tzdb import tzdata_version
from horae.testing import ShiftedZones
from tests.integration.planner.harness import (
    PlannerEnv,
    consumed,
    decided_since,
    definition,
    ledger,
    read_all,
)
from tests.waiting import wait_until

HOUR = 3600


def _events(env: PlannerEnv) -> list[ev.ScheduleEvent]:
    records = read_all(env.bootstrap, env.topic(Topic.SCHEDULE_EVENTS))
    return [decode(v, ev.ScheduleEvent) for _, v in records if v]


def _state(env: PlannerEnv) -> ev.PlannerState:
    records = read_all(env.bootstrap, env.topic(Topic.PLANNER_STATE))
    states = [decode(v, ev.PlannerState) for _, v in records if v]
    return [s for s in states if s.trigger_id == "tz"][-1]


def _recomputed(env: PlannerEnv) -> list[ev.ScheduleEvent]:
    return [e for e in _events(env) if e.type == ev.ScheduleEventType.RECOMPUTED]


def test_a_planner_restarted_on_another_tzdata_release_recomputes_and_the_new_instant_governs(
    planner_env: PlannerEnv,
) -> None:
    hour = int(time.time()) // HOUR * HOUR
    virtual = [float(hour + 600)]  # ten past an hour
    clock = {"clock": lambda: virtual[0], "max_skew_s": 1e9}
    planner_env.put(definition("tz", "0 * * * *"))
    planner_env.start_thread("a", **clock)  # type: ignore[arg-type]
    wait_until(lambda: consumed(planner_env, Topic.DEFINITIONS), 60, 0.2, "definition applied")
    before = _state(planner_env)
    assert before.tzdata_version == tzdata_version("UTC")
    assert before.next_instant is not None and before.next_instant.timestamp() == hour + HOUR
    planner_env.stop_threads()

    upgraded = ShiftedZones("2099z", 1800)  # every instant half an hour later
    planner_env.start_thread("a", zones=upgraded, **clock)  # type: ignore[arg-type]
    [event] = wait_until(lambda: _recomputed(planner_env), 60, 0.2, "schedule.recomputed")
    assert event.tzdata_version == "2099z"
    assert event.cause is not None and f"{before.tzdata_version} -> 2099z" in event.cause
    state = wait_until(
        lambda: (s := _state(planner_env)).tzdata_version == "2099z" and s, 60, 0.2, "new state"
    )
    assert state.next_instant is not None and state.next_instant.timestamp() == hour + 1800

    for instant in (hour + 1800, hour + HOUR + 1800):  # the recomputed instants, not hour + HOUR
        virtual[0] = instant + 5
        wait_until(partial(decided_since, planner_env, instant, ["tz"]), 60, 0.1, f"{instant}")
    planner_env.stop_threads()
    planner_env.start_thread("a", zones=upgraded, **clock)  # type: ignore[arg-type]
    last = hour + 2 * HOUR + 1800  # decided by the restarted planner, after its rebuild
    virtual[0] = last + 5
    wait_until(partial(decided_since, planner_env, last, ["tz"]), 60, 0.1, "after the restart")
    planner_env.stop_threads()
    fires = [f for f in ledger(planner_env) if f.trigger_id == "tz"]
    assert sorted(int(f.scheduled_at.timestamp()) for f in fires) == [
        hour + 1800,
        hour + HOUR + 1800,
        last,
    ]
    assert {(f.state, f.tzdata_version) for f in fires} == {(ev.FireState.FIRED, "2099z")}
    assert len(_recomputed(planner_env)) == 1, "the same release again recomputes nothing"
