"""A record whose handling raises stops no one, against the real broker: a definition whose
applying raises (a bug injected into the decider for one trigger) is retried seconds apart, then
quarantined ``handler-error`` with its coordinates, and its partition moves on — another tenant's
trigger defined right after it, on the same partition, is accepted and fires."""

from __future__ import annotations

from dataclasses import replace

import pytest

from horae.contracts import events as ev
from horae.contracts import signing
from horae.contracts.codec import decode, encode
from horae.contracts.topics import Topic, fire_partition
from horae.ports import Emit
from horae.streams.planner.decide import Decider
from horae.streams.planner.index import DueIndex, TriggerEntry
from horae.streams.planner.poison import CAUSE
from tests.integration.planner.harness import (
    PARTITIONS,
    TENANT,
    TENANT_KEYS,
    PlannerEnv,
    consumed,
    definition,
    ledger,
    read_all,
)
from tests.waiting import wait_until

OTHER, OTHER_KEY = "beta", ("beta-1", b"beta-secret")
PARTITION = 1


def on_partition(tenant: str, prefix: str) -> str:
    return next(
        f"{prefix}{n}"
        for n in range(1000)
        if fire_partition(tenant, f"{prefix}{n}", PARTITIONS) == PARTITION
    )


def test_a_definition_whose_handling_raises_is_quarantined_and_the_partition_moves_on(
    planner_env: PlannerEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    poison = on_partition(TENANT, "poison")
    original = Decider.apply_definition
    calls: list[float] = []

    def apply(
        self: Decider,
        index: DueIndex,
        key: str,
        entry: TriggerEntry | None,
        d: ev.TriggerDefinition,
        now: float,
    ) -> list[Emit]:
        out = original(self, index, key, entry, d, now)
        if d.trigger_id == poison:
            calls.append(now)
            raise RuntimeError(f"a bug deciding {poison}")
        return out

    monkeypatch.setattr(Decider, "apply_definition", apply)
    other_id = on_partition(OTHER, "b")
    other = signing.sign(replace(definition(other_id), tenant=OTHER), *OTHER_KEY)
    bad = definition(poison)
    planner_env.put(bad)
    planner_env.put(other)
    keys = {**TENANT_KEYS, OTHER: {OTHER_KEY[0]: OTHER_KEY[1]}}
    planner_env.start_thread("a", tenant_keys=keys, record_backoff_s=0.5)

    def quarantined() -> list[ev.Quarantined]:
        found = read_all(planner_env.bootstrap, planner_env.topic(Topic.QUARANTINE))
        return [decode(v, ev.Quarantined) for _, v in found if v]

    def others_fires() -> list[ev.FireRecord]:
        return [f for f in ledger(planner_env) if f.tenant == OTHER]

    wait_until(lambda: quarantined(), 60, 0.2, "the poison record quarantined")
    wait_until(lambda: len(others_fires()) >= 2, 60, 0.2, "the other tenant's trigger fires")
    wait_until(lambda: consumed(planner_env, Topic.DEFINITIONS), 60, 0.2, "definitions consumed")
    planner_env.stop_threads()

    (q,) = quarantined()
    assert (q.cause, q.source_topic, q.source_partition, q.source_offset) == (
        CAUSE,
        planner_env.topic(Topic.DEFINITIONS),
        PARTITION,
        0,
    )
    assert q.original == encode(bad) and q.original_key == f"{TENANT}/{poison}".encode()
    assert f"handling raised 3 times: RuntimeError: a bug deciding {poison}" in q.detail
    assert len(calls) == 3, "tried three times, never again"
    assert calls[1] - calls[0] >= 0.5 and calls[2] - calls[1] >= 1.0, "seconds apart"
    accepted = [
        decode(v, ev.TriggerDefinition)
        for _, v in read_all(planner_env.bootstrap, planner_env.topic(Topic.ACCEPTED))
        if v
    ]
    assert [(d.tenant, d.trigger_id) for d in accepted] == [(OTHER, other_id)]
    assert not [f for f in ledger(planner_env) if f.trigger_id == poison]
    assert all(f.state is ev.FireState.FIRED for f in others_fires())
