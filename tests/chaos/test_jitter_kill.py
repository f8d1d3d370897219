"""Jitter is deterministic across a SIGKILL: a planner process deciding jittered triggers is killed
and a new one takes over. Every instant of the window is recorded exactly once, and every fired
instant carries the offset :func:`jitter_offset` gives its key and instant, so the replayed and
the restarted decisions dispatch at the same moment as the first process would have."""

from __future__ import annotations

import signal
import time

import pytest

from horae.contracts import events as ev
from horae.domain.jitter import jitter_offset
from tests.integration.planner.harness import (
    TENANT,
    PlannerEnv,
    decided_since,
    definition,
    duplicates,
    ledger,
)
from tests.waiting import wait_until

TRIGGERS = [f"jit-{i}" for i in range(4)]
EVERY_S = 5
JITTER_S = 4


@pytest.mark.timeout(300)
def test_jitter_offsets_survive_a_sigkill(planner_env: PlannerEnv) -> None:
    policies = ev.Policies(jitter_s=JITTER_S)
    for trigger in TRIGGERS:
        planner_env.put(definition(trigger, f"*/{EVERY_S} * * * * *", policies=policies))
    first = planner_env.spawn("jitter")
    wait_until(lambda: decided_since(planner_env, time.time() - EVERY_S, TRIGGERS), 120, 0.2,
               "the first planner never decided")  # fmt: skip
    deciding = time.time()  # from here on, the first planner decides each instant as it comes
    wait_until(lambda: decided_since(planner_env, deciding + 3 * EVERY_S, TRIGGERS), 120, 0.2,
               "the first planner never decided three more instants")  # fmt: skip
    first.send_signal(signal.SIGKILL)
    assert first.wait(30) == -signal.SIGKILL
    killed = time.time()

    second = planner_env.spawn("jitter")
    wait_until(lambda: decided_since(planner_env, killed + 2 * EVERY_S, TRIGGERS), 120, 0.2,
               "the restarted planner never decided two instants of each trigger")  # fmt: skip
    second.send_signal(signal.SIGTERM)
    assert second.wait(60) == 0

    fires = [f for f in ledger(planner_env) if f.trigger_id in TRIGGERS]
    assert not duplicates(fires)
    for trigger in TRIGGERS:
        mine = sorted((f for f in fires if f.trigger_id == trigger), key=lambda f: f.scheduled_at)
        instants = [int(f.scheduled_at.timestamp()) for f in mine]
        assert instants == list(range(instants[0], instants[-1] + 1, EVERY_S)), instants
        key = ev.trigger_key(TENANT, trigger)
        fired = [f for f in mine if f.state is ev.FireState.FIRED]
        assert any(int(f.scheduled_at.timestamp()) > killed for f in fired)
        for f in fired:
            t = int(f.scheduled_at.timestamp())
            assert f.jitter_ms == jitter_offset(key, t, JITTER_S * 1000, t + EVERY_S), f
            assert f.due_at.timestamp() == t + f.jitter_ms / 1000
        steady = [f for f in fired if deciding < f.due_at.timestamp() < deciding + 2 * EVERY_S]
        assert steady and all(f.lane is ev.Lane.ON_TIME for f in steady)
