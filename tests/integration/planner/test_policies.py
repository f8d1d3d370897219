"""Declared policies take effect on the real broker, on a virtual clock: jitter, start/end."""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import UTC, datetime
from functools import partial

from horae.contracts import events as ev
from horae.contracts import signing
from horae.contracts.codec import decode
from horae.contracts.topics import Topic
from horae.domain.jitter import jitter_offset
from tests.integration.planner.harness import (
    KEY_ID,
    SECRET,
    TENANT,
    PlannerEnv,
    consumed,
    decided_since,
    definition,
    duplicates,
    ledger,
    read_all,
)
from tests.waiting import wait_until

HOUR = 3600
JITTER_S = 300


def test_jitter_of_300_s_on_an_hourly_trigger_over_two_days_fires_every_instant_on_time(
    planner_env: PlannerEnv,
) -> None:
    """misfire=skip, grace 60 s: each instant is decided 20 s after its jittered due time (so
    up to 320 s after the instant), fires on time on the on_time lane, with the offset that
    :func:`jitter_offset` gives its key and instant — the same after a restart mid-way."""
    virtual = [float(int(time.time()) // HOUR * HOUR + 600)]  # 10 minutes past an hour
    policies = ev.Policies(jitter_s=JITTER_S, misfire=ev.Misfire.SKIP)
    planner_env.put(definition("jit", "0 * * * *", policies=policies))
    clock = {"clock": lambda: virtual[0], "max_skew_s": 1e9}
    planner_env.start_thread("a", **clock)  # type: ignore[arg-type]
    wait_until(lambda: consumed(planner_env, Topic.DEFINITIONS), 60, 0.2, "definition applied")
    key = ev.trigger_key(TENANT, "jit")
    instants = [int(virtual[0]) // HOUR * HOUR + h * HOUR for h in range(1, 49)]
    for n, t in enumerate(instants):
        if n == 24:  # a restart: the index is rebuilt from the planner state and definitions
            planner_env.stop_threads()
            planner_env.start_thread("a", **clock)  # type: ignore[arg-type]
        due = t + jitter_offset(key, t, JITTER_S * 1000, t + HOUR) / 1000
        virtual[0] = due + 20
        wait_until(partial(decided_since, planner_env, t, ["jit"]), 60, 0.1, f"{t} decided")
    planner_env.stop_threads()
    fires = [f for f in ledger(planner_env) if f.trigger_id == "jit"]
    assert not duplicates(fires)
    assert sorted(int(f.scheduled_at.timestamp()) for f in fires) == instants
    assert all(f.state is ev.FireState.FIRED and f.lane is ev.Lane.ON_TIME for f in fires), [
        (f.scheduled_at, f.state, f.cause) for f in fires if f.state is not ev.FireState.FIRED
    ]
    for f in fires:
        t = int(f.scheduled_at.timestamp())
        assert f.jitter_ms == jitter_offset(key, t, JITTER_S * 1000, t + HOUR)
        assert f.due_at.timestamp() == t + f.jitter_ms / 1000
    assert max(f.jitter_ms for f in fires) > 60_000, "offsets beyond the grace were exercised"


def _events(env: PlannerEnv) -> list[ev.ScheduleEvent]:
    records = read_all(env.bootstrap, env.topic(Topic.SCHEDULE_EVENTS))
    return [decode(v, ev.ScheduleEvent) for _, v in records if v]


def test_start_and_end_bound_a_trigger_and_it_completes_once(planner_env: PlannerEnv) -> None:
    """A minute trigger with start and end fires exactly the minutes in [start, end], then
    emits schedule.completed once — and a restart does not emit it again."""
    v0 = int(time.time()) // 60 * 60 + 30
    virtual = [float(v0)]
    d = definition("bounded", "* * * * *")
    recurrence = replace(
        d.recurrence,
        start=datetime.fromtimestamp(v0 + 150, UTC),
        end=datetime.fromtimestamp(v0 + 330, UTC),
    )
    planner_env.put(signing.sign(replace(d, recurrence=recurrence, signature=None), KEY_ID, SECRET))
    clock = {"clock": lambda: virtual[0], "max_skew_s": 1e9}
    planner_env.start_thread("a", **clock)  # type: ignore[arg-type]
    wait_until(lambda: consumed(planner_env, Topic.DEFINITIONS), 60, 0.2, "definition applied")
    expected = [v0 + 150, v0 + 210, v0 + 270, v0 + 330]  # both bounds included
    for t in expected:  # each minute of the window, 1 s after it (a minute before is early)
        virtual[0] = t + 1.0
        wait_until(partial(decided_since, planner_env, t, ["bounded"]), 60, 0.1, f"{t}")
    virtual[0] = v0 + 631.0  # five minutes past the end
    wait_until(
        lambda: any(e.type == ev.ScheduleEventType.COMPLETED.value for e in _events(planner_env)),
        60,
        0.1,
        "completed",
    )
    planner_env.stop_threads()
    planner_env.start_thread("a", **clock)  # type: ignore[arg-type]
    virtual[0] += 600
    planner_env.put(definition("other", "* * * * *"))  # consumed: the restarted one decided
    wait_until(lambda: consumed(planner_env, Topic.DEFINITIONS), 60, 0.2, "restarted")
    planner_env.stop_threads()
    fires = [f for f in ledger(planner_env) if f.trigger_id == "bounded"]
    assert sorted(int(f.scheduled_at.timestamp()) for f in fires) == expected
    completed = [e for e in _events(planner_env) if e.type == ev.ScheduleEventType.COMPLETED.value]
    assert [e.trigger_id for e in completed] == ["bounded"]


def test_an_undecodable_planner_state_is_rebuilt_from_the_definition(
    planner_env: PlannerEnv,
) -> None:
    planner_env.put(definition("tick"))
    planner_env.start_thread("a")
    wait_until(lambda: consumed(planner_env, Topic.DEFINITIONS), 60, 0.2, "definition applied")
    planner_env.stop_threads()
    planner_env.produce(Topic.PLANNER_STATE, b"acme/tick", b"\x00garbage")
    restarted = time.time()
    planner_env.start_thread("a")
    wait_until(
        partial(decided_since, planner_env, restarted + 2, ["tick"]), 60, 0.2, "tick decided"
    )
    planner_env.stop_threads()
    records = read_all(planner_env.bootstrap, planner_env.topic(Topic.QUARANTINE))
    (q,) = [decode(v, ev.Quarantined) for _, v in records if v]
    assert (q.cause, q.original_key, q.trigger_id, q.original) == (
        "state-undecodable",
        b"acme/tick",
        "tick",
        b"\x00garbage",
    )
    assert not duplicates([f for f in ledger(planner_env) if f.trigger_id == "tick"])


def test_a_remaining_fires_count_fires_n_times_then_completes(planner_env: PlannerEnv) -> None:
    v0 = int(time.time()) // 60 * 60 + 30
    virtual = [float(v0)]
    d = definition("twice", "* * * * *")
    counted = replace(d, recurrence=replace(d.recurrence, count=2), signature=None)
    planner_env.put(signing.sign(counted, KEY_ID, SECRET))
    clock = {"clock": lambda: virtual[0], "max_skew_s": 1e9}
    planner_env.start_thread("a", **clock)  # type: ignore[arg-type]
    wait_until(lambda: consumed(planner_env, Topic.DEFINITIONS), 60, 0.2, "definition applied")
    for t in (v0 + 30, v0 + 90):
        virtual[0] = t + 1.0
        wait_until(partial(decided_since, planner_env, t, ["twice"]), 60, 0.1, f"{t}")
    wait_until(
        lambda: any(e.type == ev.ScheduleEventType.COMPLETED.value for e in _events(planner_env)),
        60,
        0.1,
        "completed",
    )
    virtual[0] = v0 + 600.0  # later minutes: nothing more is decided
    planner_env.put(definition("other", "* * * * *"))
    wait_until(lambda: consumed(planner_env, Topic.DEFINITIONS), 60, 0.2, "later step taken")
    planner_env.stop_threads()
    fires = [f for f in ledger(planner_env) if f.trigger_id == "twice"]
    assert sorted(int(f.scheduled_at.timestamp()) for f in fires) == [v0 + 30, v0 + 90]
    (done,) = [e for e in _events(planner_env) if e.type == ev.ScheduleEventType.COMPLETED.value]
    assert done.cause == "completed: fired 2 times"
