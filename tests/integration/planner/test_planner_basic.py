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


def test_forged_stale_or_tombstoned_ingress_records_change_nothing_after_a_restart(
    planner_env: PlannerEnv,
) -> None:
    """The ingress topic may end with a record that is not the accepted version (compaction would
    keep only that one): the planner rebuilds from definitions.accepted, so a restart changes
    nothing."""
    good = definition("tick")
    planner_env.put(good)
    planner_env.start_thread("a")
    time.sleep(3)
    planner_env.stop_threads()
    forged = replace(
        good, target=ev.Target(kind=ev.TargetKind.WEBHOOK, url="https://evil.example/")
    )
    planner_env.put(replace(good, author="replayed"))  # the same version again: stale
    planner_env.put(forged)  # same version, signature no longer matches: quarantined
    planner_env.produce(Topic.DEFINITIONS, b"acme/tick", None)  # a tombstone
    restarted = time.time()
    planner_env.start_thread("a")  # the same slot: it takes its partitions back at once
    time.sleep(5)
    planner_env.stop_threads()

    accepted = read_all(planner_env.bootstrap, planner_env.topic(Topic.ACCEPTED))
    assert [decode(v or b"", ev.TriggerDefinition) for _, v in accepted] == [good]
    orders = [
        decode(v or b"", ev.DispatchOrder)
        for _, v in read_all(planner_env.bootstrap, planner_env.topic(Topic.LANE_ON_TIME))
    ]
    after = [o for o in orders if o.fire.decided_at.timestamp() > restarted]
    assert after, "the trigger kept firing after the restart"
    assert {o.target.url for o in orders} == {"https://hooks.example/x"}
    assert not duplicates(ledger(planner_env))
