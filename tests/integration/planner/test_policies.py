"""Declared policies take effect on the real broker, on a virtual clock: jitter."""

from __future__ import annotations

import time
from functools import partial

from horae.contracts import events as ev
from horae.contracts.topics import Topic
from horae.domain.jitter import jitter_offset
from tests.integration.planner.harness import (
    TENANT,
    PlannerEnv,
    consumed,
    decided_since,
    definition,
    duplicates,
    ledger,
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
