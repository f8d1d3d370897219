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
from collections.abc import Iterable, Iterator
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
    run = _Rebuild(partition, decider, now, base)
    read = run.read_states(reader.read(state_topic, partition, start=run.state_start))
    run.start_index()
    read += run.read_definitions(reader.read(accepted_topic, partition, start=run.accepted_start))
    if base is not None:
        run.after_snapshot(base)
    run.rebuild_undecodable()
    run.index.settle()
    return run.index, read


class _Rebuild:
    """One rebuild of one partition's index (the module docstring), one rule per method: the
    latest state of each key (:meth:`new_state`, :meth:`tombstone`, :meth:`undecodable_state`),
    the definitions of the versions those states decided (:meth:`read_definitions`), a trigger
    restored with its fires in flight (:meth:`put`), what a snapshot base changes
    (:meth:`after_snapshot`) and the triggers whose state could not be read
    (:meth:`rebuild_undecodable`)."""

    index: DueIndex

    def __init__(self, partition: int, decider: Decider, now: float, base: Snapshot | None) -> None:
        self.partition = partition
        self.decider = decider
        self.now = now
        self.base = base
        self.state_start = 0 if base is None else base.state_end
        self.accepted_start = 0 if base is None else base.accepted_end
        self.states: dict[str, ev.PlannerState | None] = {}  # None: a tombstone, after a snapshot
        self.undecodable: dict[str, tuple[InputRecord, str]] = {}  # key -> its latest record, why
        self.latest: dict[str, ev.TriggerDefinition] = {}  # of the keys with an undecodable state
        self.restored: set[str] = set()  # after a snapshot: the keys whose state was restored
        self.count = 0  # entries restored, for settling the index now and then

    # --- the changelog: the latest state of each key --------------------------------------------
    def read_states(self, records: Iterable[InputRecord]) -> int:
        read = 0
        for msg in records:
            read += 1
            value = msg.value()
            if value is None:
                self.tombstone(msg)
                continue
            try:
                state = decode(value, ev.PlannerState)
            except DecodeError as exc:
                self.undecodable_state(msg, exc)
                continue
            self.new_state(state)
        return read

    def new_state(self, state: ev.PlannerState) -> None:
        """A later state replaces the key's earlier one, readable or not."""
        key = ev.trigger_key(state.tenant, state.trigger_id)
        self.states[key] = state
        self.undecodable.pop(key, None)

    def tombstone(self, msg: InputRecord) -> None:
        """After a snapshot, a tombstone removes the key's entry (the snapshot's goes with it); a
        full rebuild reads the compacted log and passes it by."""
        if self.base is not None:
            key = _key(msg)
            self.states[key] = None
            self.undecodable.pop(key, None)

    def undecodable_state(self, msg: InputRecord, exc: DecodeError) -> None:
        """The key's latest state does not decode: an older state is not the latest, so none is
        kept (never decide twice); :meth:`rebuild_undecodable` deals with the key."""
        key = _key(msg)
        self.undecodable[key] = (msg, f"{exc.cause}: {exc.detail}")
        self.states.pop(key, None)

    # --- the index and the definitions --------------------------------------------------------
    def start_index(self) -> None:
        """A new index (or the snapshot's), with the tenants' states restored."""
        if self.base is None:
            self.index = make_index(self.partition, self.decider.shared)
            self.index.reserve(len(self.states))
        else:
            self.index = self.base.index
        for state in self.states.values():
            if state is not None and state.trigger_id == ev.TENANT_WIDE:
                self.index.tenants[state.tenant] = self.decider.restore_tenant(state, self.now)

    def read_definitions(self, records: Iterable[InputRecord]) -> int:
        """Each key with a state is restored from the accepted definition of the version its
        state decided; of a key whose state did not decode, the latest definition is kept."""
        read = 0
        for msg in records:
            read += 1
            key = _key(msg)
            state = self.states.get(key)
            value = msg.value()
            if value is None or (state is None and key not in self.undecodable):
                continue
            try:
                definition = decode(value, ev.TriggerDefinition)
            except DecodeError:
                continue
            if state is None:
                self.latest[key] = definition
            elif definition.version == state.trigger_version:  # the latest accepted version
                self.put(key, definition, state)
        return read

    def put(self, key: str, definition: ev.TriggerDefinition, state: ev.PlannerState) -> None:
        """The trigger restored from its definition and state, with its fires in flight (an
        overlap policy's running or buffered fire), and what a tzdata change owes ``pending``."""
        index = self.index
        if self.base is not None:
            _forget_flight(index, key)
            self.restored.add(key)
        entry = self.decider.restore(definition, state, self.now)
        if state.running_fire_key or state.buffered_fire_key:
            self.decider.restore_flight(index, key, entry, state)
        index.put(key, entry)
        flight = index.flights.get(key) if index.flights else None
        index.pending += self.decider.tzdata_change(self.partition, entry, state, self.now, flight)
        self._counted()

    def _counted(self) -> None:
        self.count += 1
        if self.count % SETTLE_EVERY == 0:
            self.index.settle()

    # --- a snapshot base ----------------------------------------------------------------------
    def after_snapshot(self, base: Snapshot) -> None:
        """What the records after the snapshot change in it: states of definitions it holds,
        tombstones, undecodable states, and instants it derived with other code or tzdata."""
        self._states_of_held_definitions()
        self._drop_undecodable()
        if base.stale:
            self._recompute(base)

    def _states_of_held_definitions(self) -> None:
        """A state after the snapshot whose definition is in it: restored from the held
        definition when that is the state's version; else (a tombstone, or, as in a full
        rebuild, no accepted definition of its version) the entry goes."""
        index = self.index
        for key, state in self.states.items():
            if key in self.restored or (state and state.trigger_id == ev.TENANT_WIDE):
                continue
            held = index.get(key)
            if (
                state is not None
                and held is not None
                and held.definition.version == state.trigger_version
            ):
                self.put(key, held.definition, state)
            else:
                _forget_flight(index, key)
                index.remove(key)

    def _drop_undecodable(self) -> None:
        """A key whose latest state does not decode leaves the snapshot; its held definition is
        the one to rebuild it from when no later one was read."""
        index = self.index
        for key in self.undecodable:
            if key not in self.latest and (held := index.get(key)) is not None:
                self.latest[key] = held.definition
            _forget_flight(index, key)
            index.remove(key)

    def _recompute(self, base: Snapshot) -> None:
        """The snapshot's instants were derived by other code or tzdata: each entry not restored
        here is recomputed, as restore does."""
        index = self.index
        for key in index.trigger_keys():
            entry = index.get(key)
            if key in self.restored or entry is None:
                continue
            flight = index.flights.get(key)
            index.pending += self.decider.recompute(
                self.partition, key, entry, flight, base.tzdata, self.now
            )
            index.put(key, entry)
            self._counted()

    # --- undecodable states -------------------------------------------------------------------
    def rebuild_undecodable(self) -> None:
        """Each key whose latest state does not decode: quarantined, and rebuilt as a new trigger
        (deciding from ``now``) from its latest accepted definition when there is one."""
        at = utc_datetime(self.now)
        for key, (msg, why) in self.undecodable.items():
            found = self.latest.get(key)
            if found is None:
                detail = f"{why}; no accepted definition to rebuild {key} from"
                self._pend(quarantine(msg, UNDECODABLE_STATE, detail, at))
                continue
            entry = self.decider.restore(found, None, self.now)
            self.index.put(key, entry)
            detail = f"{why}; rebuilt from accepted version {found.version}, deciding from "
            self._pend(quarantine(msg, UNDECODABLE_STATE, detail + at.isoformat(), at, found))
            self.index.pending.append(self.decider.state_output(self.partition, entry, self.now))

    def _pend(self, record: ev.Quarantined) -> None:
        self.index.pending.append(self.decider.router.emit(record, self.partition))


def _key(msg: InputRecord) -> str:
    return (msg.key() or b"").decode(errors="replace")


def _forget_flight(index: DueIndex, key: str) -> None:
    """Forget the fires in flight ``index`` holds for ``key`` (its state is being replaced)."""
    flight = index.flights.pop(key, None)
    if flight is not None and flight.running is not None:
        index.running.pop(flight.running.encode(), None)
