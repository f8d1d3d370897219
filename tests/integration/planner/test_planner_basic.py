"""The planner decides due instants into the ledger, once each, against the real broker."""

from __future__ import annotations

import time
from dataclasses import replace

from horae.contracts import events as ev
from horae.contracts.codec import decode
from horae.contracts.topics import Topic
from tests.integration.planner.harness import PlannerEnv, definition, duplicates, ledger, read_all


def test_every_second_trigger_fires_each_instant_once(planner_env: PlannerEnv) -> None:
    planner_env.put(definition("tick"))
    planner_env.start_thread("a")
    time.sleep(6)
    planner_env.stop_threads()
    fires = [f for f in ledger(planner_env) if f.trigger_id == "tick"]
    assert not duplicates(fires)
    instants = sorted(int(f.scheduled_at.timestamp()) for f in fires)
    assert len(instants) >= 3
    assert instants == list(range(instants[0], instants[-1] + 1)), "no instant missing"
    assert all(f.state is ev.FireState.FIRED and f.lane is ev.Lane.ON_TIME for f in fires)
    orders = read_all(planner_env.bootstrap, planner_env.topic(Topic.LANE_ON_TIME))
    assert sorted(k for k, _ in orders) == sorted(f.fire_key.encode() for f in fires)
    for _, value in orders:
        order = decode(value or b"", ev.DispatchOrder)
        assert order.deadline is not None, "retries are truncated at the next instant"
        assert (order.deadline - order.fire.scheduled_at).total_seconds() == 1


def test_quarantined_definition_does_not_stop_its_partition(planner_env: PlannerEnv) -> None:
    planner_env.produce(Topic.DEFINITIONS, b"acme/broken", b"\x00\x00\x00\x00\x07garbage")
    forged = definition("forged")
    planner_env.put(replace(forged, tenant="other"))
    planner_env.put(definition("tick"))
    planner_env.start_thread("a")
    time.sleep(4)
    planner_env.stop_threads()
    quarantined = [
        decode(v, ev.Quarantined)
        for _, v in read_all(planner_env.bootstrap, planner_env.topic(Topic.QUARANTINE))
        if v
    ]
    causes = {q.cause for q in quarantined}
    # schema id 7 names another event type: refused as such before its body is read
    assert "type" in causes
    assert any(q.tenant == "other" for q in quarantined)
    assert [f for f in ledger(planner_env) if f.trigger_id == "tick"], "the rest keeps flowing"
