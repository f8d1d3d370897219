"""Rebuild one partition's due index from Kafka: the definitions up to the committed offset (the
intent) and the compacted planner-state changelog (the progress), both read_committed.

A planner-state record is always committed in the same transaction as the definitions offset that
produced it, so the two agree; a definition without state (cannot happen after a clean commit, but
costs nothing to handle) starts as new.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from horae.contracts import events as ev
from horae.contracts.codec import DecodeError, decode
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
    definitions: dict[str, ev.TriggerDefinition] = {}
    if definitions_until > 0:
        for msg in read_partition(bootstrap, definitions_topic, partition, definitions_until):
            definition = decider.accept_definition(msg, now, check_limits=False)
            if isinstance(definition, ev.TriggerDefinition):
                definitions[ev.trigger_key(definition.tenant, definition.trigger_id)] = definition
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
    for key, definition in definitions.items():
        entry = decider.restore(definition, states.get(key), now)
        if entry is not None:
            index.put(key, entry)
    return index
