"""Rebuild one partition's due index from Kafka: the accepted definitions (the intent) and the
compacted planner-state changelog (the progress), both read_committed.

The planner writes both, in the transaction that commits the input offsets that produced them, so
they agree with each other and with the group's committed position: a definition is on
``definitions.accepted`` only if it passed ingress (signature, validation) when first consumed, and
the ingress topic is not read here at all (a forged or stale record there changes nothing).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from horae.contracts import events as ev
from horae.contracts.codec import DecodeError, decode
from horae.ports import PartitionReader
from horae.streams.planner.index import DueIndex

if TYPE_CHECKING:
    from horae.streams.planner.decide import Decider


@contextmanager
def long_lived() -> Iterator[None]:
    """Build a large, long-lived structure (due indexes): the cyclic garbage collector is paused
    meanwhile (each of its passes would scan everything built so far: quadratic in the size of
    the index), and afterwards every object alive is moved to the permanent generation
    (``gc.freeze``), so that later passes — every few thousand allocations at a peak — do not
    scan a million triggers again. Frozen objects are still freed when no longer referenced (an
    index is a tree: revoking a partition frees it)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


def rebuild_partition(
    reader: PartitionReader,
    partition: int,
    *,
    accepted_topic: str,
    state_topic: str,
    decider: Decider,
    now: float,
) -> DueIndex:
    states: dict[str, ev.PlannerState] = {}
    for msg in reader.read(state_topic, partition):
        value = msg.value()
        if value is None:
            continue
        try:
            state = decode(value, ev.PlannerState)
        except DecodeError:
            continue  # unreadable: ignored; a trigger left with no state drops out of the index
        states[ev.trigger_key(state.tenant, state.trigger_id)] = state
    index = DueIndex(partition)
    for msg in reader.read(accepted_topic, partition):
        key = (msg.key() or b"").decode(errors="replace")
        accepted = states.get(key)
        value = msg.value()
        if accepted is None or value is None:
            continue
        try:
            definition = decode(value, ev.TriggerDefinition)
        except DecodeError:
            continue
        if definition.version == accepted.trigger_version:  # the latest accepted version
            index.put(key, decider.restore(definition, accepted, now))
    return index
