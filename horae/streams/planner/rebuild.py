"""Rebuild one partition's due index from Kafka: the definitions up to the committed offset (the
intent) and the compacted planner-state changelog (the progress), both read_committed.

A planner-state record is always committed in the same transaction as the definitions offset that
produced it, so the two agree, and it names the version that was accepted: a definition whose
version has a state record passed ingress (signature, validation) when it was first consumed and is
only decoded here; one without (it was quarantined) is skipped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from horae.contracts import events as ev
from horae.contracts.codec import DecodeError, decode
from horae.contracts.ingress import decode_definition
from horae.kafka.reader import read_partition
from horae.streams.planner.index import DueIndex

if TYPE_CHECKING:
    from horae.streams.planner.decide import Decider


def rebuild_partition(
    bootstrap: str,
    partition: int,
    *,
    definitions_topic: str,
    definitions_until: int,
    state_topic: str,
    decider: Decider,
    now: float,
) -> DueIndex:
    states: dict[str, ev.PlannerState] = {}
    for msg in read_partition(bootstrap, state_topic, partition):
        value = msg.value()
        if value is None:
            continue
        try:
            state = decode(value, ev.PlannerState)
        except DecodeError:
            continue  # written by us; unreadable means a newer planner wrote it: skip, recompute
        states[ev.trigger_key(state.tenant, state.trigger_id)] = state
    index = DueIndex(partition)
    if definitions_until <= 0:
        return index
    for msg in read_partition(bootstrap, definitions_topic, partition, definitions_until):
        key = (msg.key() or b"").decode(errors="replace")
        accepted = states.get(key)
        value = msg.value()
        if accepted is None or value is None:
            continue
        try:
            definition = decode_definition(value)
        except DecodeError:
            continue
        if definition.version != accepted.trigger_version:
            continue  # a version that was quarantined (the accepted one comes before it)
        index.put(key, decider.restore(definition, accepted, now))
    return index
