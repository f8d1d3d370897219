"""The planner decides due instants into the ledger, once each, against the real broker."""

from __future__ import annotations

import time
from dataclasses import replace

from horae.contracts import events as ev
from horae.contracts.codec import decode, encode
from horae.contracts.topics import Topic
from tests.integration.planner.harness import (
    PlannerEnv,
    consumed,
    decided_since,
    definition,
    duplicates,
    ledger,
    read_all,
)
from tests.waiting import wait_until


def ticks(env: PlannerEnv) -> list[ev.FireRecord]:
    return [f for f in ledger(env) if f.trigger_id == "tick"]


def quarantined(env: PlannerEnv) -> list[ev.Quarantined]:
    records = read_all(env.bootstrap, env.topic(Topic.QUARANTINE))
    return [decode(v, ev.Quarantined) for _, v in records if v]


def test_every_second_trigger_fires_each_instant_once(planner_env: PlannerEnv) -> None:
    planner_env.put(definition("tick"))
    planner_env.start_thread("a")
    wait_until(lambda: len(ticks(planner_env)) >= 3, 60, 0.2, "three instants decided")
    planner_env.stop_threads()
    fires = ticks(planner_env)
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
    garbage = b"\x00\x00\x00\x00\x07garbage"
    planner_env.produce(Topic.DEFINITIONS, b"acme/broken", garbage)
    forged = replace(definition("forged"), tenant="other")
    planner_env.put(forged)
    planner_env.put(definition("tick"))
    planner_env.start_thread("a")
    wait_until(lambda: ticks(planner_env), 60, 0.2, "the rest keeps flowing")
    wait_until(lambda: consumed(planner_env, Topic.DEFINITIONS), 60, 0.2, "definitions consumed")
    planner_env.stop_threads()
    refused = {q.original: q for q in quarantined(planner_env)}
    assert len(refused) == 2
    # schema id 7 names another event type: refused as such before its body is read
    assert refused[garbage].cause == "type"
    assert "where a TriggerDefinition was expected" in refused[garbage].detail
    # signed with acme's key, claiming a tenant that has no keys
    assert (refused[encode(forged)].cause, refused[encode(forged)].tenant) == (
        "unknown-tenant",
        "other",
    )


def test_forged_stale_or_tombstoned_ingress_records_change_nothing_after_a_restart(
    planner_env: PlannerEnv,
) -> None:
    """The ingress topic may end with a record that is not the accepted version (compaction would
    keep only that one): the planner rebuilds from definitions.accepted, so a restart changes
    nothing."""
    good = definition("tick")
    planner_env.put(good)
    planner_env.start_thread("a")
    wait_until(lambda: ticks(planner_env), 60, 0.2, "the trigger fired")
    planner_env.stop_threads()
    forged = replace(
        good, target=ev.Target(kind=ev.TargetKind.WEBHOOK, url="https://evil.example/")
    )
    planner_env.put(definition("tick"))  # the same version again, validly signed: stale
    planner_env.put(forged)  # same version, signature no longer matches: quarantined
    planner_env.produce(Topic.DEFINITIONS, b"acme/tick", None)  # a tombstone
    restarted = time.time()
    planner_env.start_thread("a")  # the same slot: it takes its partitions back at once
    wait_until(lambda: consumed(planner_env, Topic.DEFINITIONS), 60, 0.2, "ingress consumed")
    wait_until(
        lambda: decided_since(planner_env, restarted + 1, ["tick"]), 60, 0.2, "fired after restart"
    )
    planner_env.stop_threads()

    accepted = read_all(planner_env.bootstrap, planner_env.topic(Topic.ACCEPTED))
    assert [decode(v or b"", ev.TriggerDefinition) for _, v in accepted] == [good]
    assert [q.cause for q in quarantined(planner_env)] == [
        "stale-version",
        "signature",
        "tombstone",
    ]
    orders = [
        decode(v or b"", ev.DispatchOrder)
        for _, v in read_all(planner_env.bootstrap, planner_env.topic(Topic.LANE_ON_TIME))
    ]
    assert {o.target.url for o in orders} == {"https://hooks.example/x"}
    assert not duplicates(ledger(planner_env))
