"""Rebuild one partition's due index from Kafka: the accepted definitions (the intent) and the
compacted planner-state changelog (the progress), both read_committed.

The planner writes both, in the transaction that commits the input offsets that produced them, so
they agree with each other and with the group's committed position: a definition is on
``definitions.accepted`` only if it passed ingress (signature, validation) when first consumed, and
the ingress topic is not read here at all (a forged or stale record there changes nothing).

A trigger whose latest planner-state record does not decode is not dropped: it is rebuilt from its
latest accepted definition as a new trigger would be (deciding from ``now``: no instant is decided
twice; instants between its last readable state and ``now`` are not decided, and a pause by
command is forgotten), and the index's :attr:`~horae.streams.planner.index.DueIndex.pending`
records carry the cause — a ``Quarantined`` record (cause ``state-undecodable``, the original
bytes, counted by the planner's quarantine metric) and a fresh, readable state for the trigger,
committed with the next batch. An undecodable state with no accepted definition, or a tenant's
(``<tenant>/*``), is quarantined the same way; there is nothing to rebuild it from.

With a snapshot of the partition's index (:mod:`~horae.streams.planner.snapshot`), only the
records after the offsets it covers are read, and applied to it by the same rules.

A trigger whose state was decided with another tzdata release than the planner's
(``PlannerState.tzdata_version``) and whose next instant moved under the current one owes
``pending`` its ``schedule.recomputed`` event and a state recording the current release
(:meth:`~horae.streams.planner.decide.Decider.tzdata_change`).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Protocol

from horae.contracts import events as ev
from horae.contracts.codec import DecodeError, decode
from horae.contracts.quarantine import quarantine
from horae.ports import InputRecord, PartitionReader
from horae.streams.planner.index import DueIndex, make_index
from horae.streams.planner.records import utc_datetime

UNDECODABLE_STATE = "state-undecodable"
SETTLE_EVERY = 1024  # restored entries handed back to the index's representation at a time

if TYPE_CHECKING:
    from horae.streams.planner.decide import Decider
    from horae.streams.planner.snapshot import Snapshot


class GcPolicy(Protocol):
    """What a planner does with the cyclic garbage collector around a rebuild of its due indexes
    (a large, long-lived structure). The planner process passes :class:`FreezeAfterRebuild`;
    the default, :class:`KeepGc`, leaves the collector alone (in-process tests, library use)."""

    def rebuilding(self) -> AbstractContextManager[None]:
        """Wraps one rebuild of the owned indexes (on assignment, after an abort)."""
        ...


class KeepGc:
    """Leaves the garbage collector as it is."""

    @contextmanager
    def rebuilding(self) -> Iterator[None]:
        yield


class FreezeAfterRebuild:
    """The cyclic collector is paused during a rebuild (each of its passes would scan everything
    built so far: quadratic in the size of the index), and afterwards every object alive is moved
    to the permanent generation (``gc.freeze``), so that later passes — every few thousand
    allocations at a peak — do not scan a million triggers again. Frozen objects are still freed
    when no longer referenced (an index is a tree: revoking a partition frees it).

    The first rebuild (the cold start) freezes once. A later one unfreezes first and, once the
    new indexes are built, collects once before freezing again: so what the freeze holds is the
    process as it is now, and cyclic garbage frozen earlier is reclaimed instead of kept for the
    life of the process. ``gc.get_freeze_count()`` is exported as a planner metric."""

    def __init__(self) -> None:
        self.frozen = False

    @contextmanager
    def rebuilding(self) -> Iterator[None]:
        later = self.frozen
        if later:
            gc.unfreeze()
        enabled = gc.isenabled()
        gc.disable()
        try:
            yield
        finally:
            if later:
                gc.collect()
            gc.freeze()
            self.frozen = True
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
    base: Snapshot | None = None,
) -> tuple[DueIndex, int]:
    """The partition's index and the number of changelog records read to build it: from the
    whole changelog, or from ``base`` (a snapshot, see :mod:`~horae.streams.planner.snapshot`)
    and the records after the offsets it covers, by the same rules."""
    states: dict[str, ev.PlannerState | None] = {}  # None: a tombstone, after a snapshot
    undecodable: dict[str, tuple[InputRecord, str]] = {}  # key -> its latest record, why
    state_start = 0 if base is None else base.state_end
    read = 0
    for msg in reader.read(state_topic, partition, start=state_start):
        read += 1
        value = msg.value()
        if value is None:
            if base is not None:  # the snapshot's entry is gone with it
                key = (msg.key() or b"").decode(errors="replace")
                states[key] = None
                undecodable.pop(key, None)
            continue
        try:
            state = decode(value, ev.PlannerState)
        except DecodeError as exc:
            key = (msg.key() or b"").decode(errors="replace")
            undecodable[key] = (msg, f"{exc.cause}: {exc.detail}")
            states.pop(key, None)  # an older state is not the latest: never decide twice
            continue
        key = ev.trigger_key(state.tenant, state.trigger_id)
        states[key] = state
        undecodable.pop(key, None)
    if base is None:
        index = make_index(partition, decider.shared)
        index.reserve(len(states))
    else:
        index = base.index
    for tenant_state in states.values():
        if tenant_state is not None and tenant_state.trigger_id == ev.TENANT_WIDE:
            index.tenants[tenant_state.tenant] = decider.restore_tenant(tenant_state, now)
    latest: dict[str, ev.TriggerDefinition] = {}  # of the triggers with an undecodable state
    restored: set[str] = set()  # after a snapshot: the keys whose state was restored
    count = 0

    def put(key: str, definition: ev.TriggerDefinition, planner_state: ev.PlannerState) -> None:
        nonlocal count
        if base is not None:
            _forget_flight(index, key)
            restored.add(key)
        entry = decider.restore(definition, planner_state, now)
        if planner_state.running_fire_key or planner_state.buffered_fire_key:  # overlap
            decider.restore_flight(index, key, entry, planner_state)
        index.put(key, entry)
        flight = index.flights.get(key) if index.flights else None
        index.pending += decider.tzdata_change(partition, entry, planner_state, now, flight)
        count += 1
        if count % SETTLE_EVERY == 0:
            index.settle()

    for msg in reader.read(
        accepted_topic, partition, start=0 if base is None else base.accepted_end
    ):
        read += 1
        key = (msg.key() or b"").decode(errors="replace")
        planner_state = states.get(key)
        value = msg.value()
        if value is None or (planner_state is None and key not in undecodable):
            continue
        try:
            definition = decode(value, ev.TriggerDefinition)
        except DecodeError:
            continue
        if planner_state is None:
            latest[key] = definition
        elif definition.version == planner_state.trigger_version:  # the latest accepted version
            put(key, definition, planner_state)
    if base is not None:  # the states after the snapshot whose definition is in it
        for key, planner_state in states.items():
            if key in restored or (planner_state and planner_state.trigger_id == ev.TENANT_WIDE):
                continue
            held = index.get(key)
            if (
                planner_state is not None
                and held is not None
                and held.definition.version == planner_state.trigger_version
            ):
                put(key, held.definition, planner_state)
            else:  # a tombstone, or (as a full rebuild) no accepted definition of its version
                _forget_flight(index, key)
                index.remove(key)
        for key in undecodable:
            if key not in latest and (held := index.get(key)) is not None:
                latest[key] = held.definition
            _forget_flight(index, key)
            index.remove(key)
        if base.stale:  # instants derived by this planner's code and tzdata, as restore does
            for key in index.trigger_keys():
                entry = index.get(key)
                if key in restored or entry is None:
                    continue
                flight = index.flights.get(key)
                index.pending += decider.recompute(partition, key, entry, flight, base.tzdata, now)
                index.put(key, entry)
                count += 1
                if count % SETTLE_EVERY == 0:
                    index.settle()
    for key, (msg, why) in undecodable.items():
        found = latest.get(key)
        at = utc_datetime(now)
        if found is None:
            detail = f"{why}; no accepted definition to rebuild {key} from"
            index.pending.append(
                decider.router.emit(quarantine(msg, UNDECODABLE_STATE, detail, at), partition)
            )
            continue
        entry = decider.restore(found, None, now)
        index.put(key, entry)
        detail = (
            f"{why}; rebuilt from accepted version {found.version}, deciding from {at.isoformat()}"
        )
        record = quarantine(msg, UNDECODABLE_STATE, detail, at, found)
        index.pending.append(decider.router.emit(record, partition))
        index.pending.append(decider.state_output(partition, entry, now))
    index.settle()
    return index, read


def _forget_flight(index: DueIndex, key: str) -> None:
    """Forget the fires in flight ``index`` holds for ``key`` (its state is being replaced)."""
    flight = index.flights.pop(key, None)
    if flight is not None and flight.running is not None:
        index.running.pop(flight.running.encode(), None)
