"""In-memory twins of the ports (:mod:`horae.ports`), for unit tests and for trying Horae out.

Each keeps the contract of its port (the contract suites in ``tests/unit/ports`` run over these and
over the real adapters), in plain Python, with time moved by hand:

- :class:`InMemoryLog` — topics of partitions held as lists, one consumer-group member whose
  transactions append the records produced and commit the offsets together; a failed commit
  leaves nothing visible (its records keep their offsets, unread, as on Kafka), rewinds the
  member and raises :class:`~horae.ports.TransactionFailed`. Faults are injected with
  :meth:`InMemoryLog.fail_next_commit` (or by producing to a partition that does not exist, as
  on Kafka); :meth:`InMemoryLog.member` adds members to the group (a revocation) or fences one
  (the same transactional id);
- :class:`InMemoryReader` — reads a partition of an :class:`InMemoryLog`;
- :class:`InMemoryConsumer` — a consumer of an :class:`InMemoryLog` that never commits (the
  projector's);
- :class:`InMemoryStore` — read-model rows and offsets of the projector's batches;
- :class:`VirtualClock` and :class:`VirtualBrokerClock` — wall and monotonic time that move only
  when told (or when a poll waits), and a broker clock answering probes with a chosen skew;
- :class:`RecordingSender` and :class:`StaticResolver` — the HTTP edge without a network;
- :class:`ShiftedZones` — a time-zone database of another release that moved every zone.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from horae.domain.schedule import Schedule
from horae.domain.trigger import TriggerSpec
from horae.outbound.results import AttemptResult, SendResult
from horae.ports import (
    Emit,
    Fenced,
    Headers,
    Offsets,
    OnAssign,
    Record,
    TopicPartitionKey,
    TransactionFailed,
)
from horae.projections.rows import ApplyResult, Batch, Row, Stage, unapplied

Callback = Callable[[Sequence[TopicPartitionKey]], None]


def _no_callback(_: Sequence[TopicPartitionKey]) -> None:
    return None


class _Group:
    """What the members of one :class:`InMemoryLog` share: the group's members in join order
    and each transactional id's producer epoch."""

    def __init__(self) -> None:
        self.members: list[InMemoryLog] = []
        self.epochs: dict[str, int] = {}


class _Aborted(Record):
    """A record of an aborted transaction (or the marker closing one): it keeps its offset, as on
    Kafka, and no read_committed read returns it."""

    __slots__ = ()


def _visible(records: Sequence[Record]) -> list[Record]:
    return [r for r in records if not isinstance(r, _Aborted)]


class InMemoryLog:
    """Topics, and one group member's transactional view of them (a :class:`TransactionalLog`).

    :meth:`create_topic` and :meth:`produce` stand for the outside world (topics created by the
    operator, records produced by tenants); everything the member commits is appended at commit
    time, so every stored record is committed, except those of aborted transactions
    (:meth:`produce_aborted`, and what a failed commit had produced), which keep their offsets
    and are never read. :meth:`member` adds another member to the same group (one at a time
    otherwise): the partitions of each topic are split among the subscribed members in join
    order (range assignment), each member taking its share at its next :meth:`consume`, every
    owned partition read again from its committed offset. A member built with the
    ``transactional_id`` of an earlier one fences it (its commits raise
    :class:`~horae.ports.Fenced`) and takes its place in the group, as a restarted worker slot.
    """

    def __init__(
        self, on_rewind: Callable[[], None] = lambda: None, *, _shared: InMemoryLog | None = None
    ) -> None:
        """``on_rewind`` (settable later) is the owner's callback after a rewind."""
        self.partitions: dict[str, list[list[Record]]] = {}
        self.committed: dict[TopicPartitionKey, int] = {}
        self._group = _Group()
        if _shared is not None:  # another member of the same log and group
            self.partitions, self.committed = _shared.partitions, _shared.committed
            self._group = _shared._group
        self.commits = 0
        self.aborts = 0
        self.on_rewind = on_rewind
        self._topics: list[str] = []
        self._on_assign: Callback = _no_callback
        self._on_revoke: Callback = _no_callback
        self._assigned: list[TopicPartitionKey] = []
        self._positions: dict[TopicPartitionKey, int] = {}
        self._faults: list[str] = []
        self._transactional_id: str | None = None
        self._epoch = 0

    def member(
        self, on_rewind: Callable[[], None] = lambda: None, transactional_id: str | None = None
    ) -> InMemoryLog:
        """Another member of this log's group. One with the ``transactional_id`` of an earlier
        member fences that one and replaces it in the group."""
        other = InMemoryLog(on_rewind, _shared=self)
        if transactional_id is not None:
            other._transactional_id = transactional_id
            other._epoch = self._group.epochs.get(transactional_id, 0) + 1
            self._group.epochs[transactional_id] = other._epoch
            self._group.members = [
                m for m in self._group.members if m._transactional_id != transactional_id
            ]
        return other

    # --- the outside world ---------------------------------------------------------------
    def create_topic(self, name: str, partitions: int) -> None:
        """Create ``name`` with ``partitions`` empty partitions (no-op if it exists)."""
        self.partitions.setdefault(name, [[] for _ in range(partitions)])

    def produce(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        partition: int | None = None,
        headers: Headers | None = None,
        *,
        _kind: type[Record] = Record,
    ) -> Record:
        """Append one record outside any transaction (what a tenant's producer does)."""
        parts = self.partitions[topic]
        if partition is None:
            partition = zlib.crc32(key or b"") % len(parts)
        log = parts[partition]
        record = _kind(topic, partition, len(log), key, value, headers)
        log.append(record)
        return record

    def produce_aborted(
        self, topic: str, key: bytes | None, value: bytes | None, partition: int | None = None
    ) -> None:
        """Append one record of a transaction that is then aborted (another producer's): the
        record and the abort marker take an offset each, and nothing reads them."""
        record = self.produce(topic, key, value, partition, _kind=_Aborted)
        self.produce(topic, None, None, record.partition(), _kind=_Aborted)

    def records(self, topic: str) -> list[Record]:
        """Every committed record of ``topic``, partition by partition."""
        return [r for part in self.partitions.get(topic, []) for r in _visible(part)]

    def fail_next_commit(self, reason: str = "injected fault") -> None:
        """Make the next :meth:`commit` fail (as an abortable Kafka error would)."""
        self._faults.append(reason)

    # --- TransactionalLog ----------------------------------------------------------------
    def subscribe(
        self,
        topics: Sequence[str],
        on_assign: Callback,
        on_revoke: Callback,
        on_lost: Callback | None = None,  # never lost here
    ) -> None:
        self._topics = list(topics)
        self._on_assign, self._on_revoke = on_assign, on_revoke
        if self not in self._group.members:
            self._group.members.append(self)

    def unsubscribe(self) -> None:
        self._topics = []
        self._assigned = []
        self._positions.clear()
        if self in self._group.members:
            self._group.members.remove(self)

    def _share(self) -> list[TopicPartitionKey]:
        """This member's partitions under range assignment over the group's members."""
        wanted: list[TopicPartitionKey] = []
        for topic in self._topics:
            count = len(self.partitions.get(topic, []))
            members = [m for m in self._group.members if topic in m._topics]
            if self not in members:
                continue
            per, extra = divmod(count, len(members))
            i = members.index(self)
            first = i * per + min(i, extra)
            wanted += [(topic, p) for p in range(first, first + per + (i < extra))]
        return wanted

    def _rebalance(self) -> None:
        wanted = self._share()
        if wanted == self._assigned:
            return
        gone = [tp for tp in self._assigned if tp not in wanted]
        if gone:
            self._on_revoke(gone)
        self._assigned = wanted
        self._positions = {tp: self.committed.get(tp, 0) for tp in wanted}
        self._on_assign(wanted)

    def consume(self, max_records: int, timeout_s: float) -> list[Record]:
        self._rebalance()
        out: list[Record] = []
        for tp in self._assigned:
            log = self.partitions[tp[0]][tp[1]]
            end = self._positions[tp]
            while end < len(log) and len(out) < max_records:
                if not isinstance(log[end], _Aborted):
                    out.append(log[end])
                end += 1
            self._positions[tp] = end
            if len(out) >= max_records:
                break
        return out

    def assignment(self) -> list[TopicPartitionKey]:
        return list(self._assigned)

    def positions(self) -> dict[TopicPartitionKey, int]:
        return dict(self._positions)

    def commit(self, records: Sequence[Emit], next_offsets: Offsets) -> None:
        tid = self._transactional_id
        if tid is not None and self._group.epochs.get(tid) != self._epoch:
            self.aborts += 1
            raise Fenced(f"transactional id {tid} was taken by a newer member")
        fault = self._faults.pop(0) if self._faults else None
        if fault is None:
            fault = next((self._misplaced(r) for r in records if self._misplaced(r)), None)
        if fault is not None:
            self.aborts += 1
            self._abort(records)
            self.rewind()
            raise TransactionFailed(fault)
        for r in records:
            self.produce(r.topic, r.key, r.value, r.partition, r.headers)
        for tp, offset in next_offsets.items():
            self.committed[tp] = offset
        self.commits += 1

    def _abort(self, records: Sequence[Emit]) -> None:
        """What an aborted transaction leaves: its records, each partition's marker, unread."""
        touched: set[TopicPartitionKey] = set()
        for r in records:
            if self._misplaced(r) is None:
                record = self.produce(r.topic, r.key, None, r.partition, _kind=_Aborted)
                touched.add((r.topic, record.partition()))
        for topic, partition in sorted(touched):
            self.produce(topic, None, None, partition, _kind=_Aborted)

    def _misplaced(self, r: Emit) -> str | None:
        parts = self.partitions.get(r.topic)
        if parts is None:
            return f"unknown topic {r.topic}"
        if r.partition is not None and not 0 <= r.partition < len(parts):
            return f"unknown partition {r.topic}[{r.partition}]"
        return None

    def rewind(self) -> None:
        for tp in self._assigned:
            self._positions[tp] = self.committed.get(tp, 0)
        self.on_rewind()

    def close(self) -> None:
        self.unsubscribe()


class InMemoryConsumer:
    """The :class:`~horae.ports.RecordConsumer` of an :class:`InMemoryLog`: it commits nothing;
    the group's committed offsets are the log's (``log.committed``, what its members commit).
    Subscribed, it owns every partition of the topics it names (``^...``: a pattern, topics
    created later included) and takes new ones at its next :meth:`consume`; assigned, it reads
    the partitions named."""

    def __init__(self, log: InMemoryLog) -> None:
        self.log = log
        self._topics: list[str] = []
        self._on_assign: OnAssign = lambda _: None
        self._on_revoke: Callback = _no_callback
        self._subscribed = False
        self._positions: dict[TopicPartitionKey, int] = {}
        self._paused: set[TopicPartitionKey] = set()
        self._ends: dict[TopicPartitionKey, int] = {}
        self._generation = 0

    def subscribe(
        self,
        topics: Sequence[str],
        on_assign: OnAssign,
        on_revoke: Callback,
        on_lost: Callback | None = None,  # never lost here
    ) -> None:
        self._topics, self._subscribed = list(topics), True
        self._on_assign, self._on_revoke = on_assign, on_revoke

    def _matches(self, name: str) -> bool:
        return any(
            re.fullmatch(t[1:], name) if t.startswith("^") else t == name for t in self._topics
        )

    def _rebalance(self) -> None:
        wanted = [
            (name, p)
            for name, parts in self.log.partitions.items()
            if self._matches(name)
            for p in range(len(parts))
        ]
        gone = [tp for tp in self._positions if tp not in wanted]
        new = [tp for tp in wanted if tp not in self._positions]
        if gone:
            self._on_revoke(gone)
            for tp in gone:
                self._positions.pop(tp)
                self._paused.discard(tp)
                self._ends.pop(tp, None)
        if new:
            starts = self._on_assign(new) or {}
            for tp in new:
                start = starts[tp] if tp in starts else self.log.committed.get(tp)
                self._positions[tp] = start or 0
            self._generation += 1

    def assign(self, offsets: Mapping[TopicPartitionKey, int | None]) -> None:
        self._subscribed = False
        self._positions = {tp: o or 0 for tp, o in offsets.items()}
        self._paused.clear()
        self._ends.clear()

    def consume(self, max_records: int, timeout_s: float) -> list[Record]:
        if self._subscribed:
            self._rebalance()
        out: list[Record] = []
        for tp, start in self._positions.items():
            if tp in self._paused or len(out) >= max_records:
                continue
            log = self.log.partitions[tp[0]][tp[1]]
            end = start
            while end < len(log) and len(out) < max_records:
                if not isinstance(log[end], _Aborted):
                    out.append(log[end])
                end += 1
            self._positions[tp] = end
            if end >= len(log):
                self._ends[tp] = len(log)
        return out

    def seek(self, offsets: Mapping[TopicPartitionKey, int | None]) -> None:
        for tp, offset in offsets.items():
            if tp in self._positions:
                self._positions[tp] = offset or 0
                self._ends.pop(tp, None)

    def seek_committed(self) -> None:
        self.seek({tp: self.log.committed.get(tp) for tp in self._positions})

    def group_metadata(self) -> object:
        return ("in-memory group member", id(self), self._generation)

    def assignment(self) -> list[TopicPartitionKey]:
        return list(self._positions)

    def partitions(self, topic: str) -> int | None:
        parts = self.log.partitions.get(topic)
        return None if parts is None else len(parts)

    def positions(self) -> dict[TopicPartitionKey, int]:
        return dict(self._positions)

    def pause(self, partitions: Sequence[TopicPartitionKey]) -> None:
        self._paused.update(tp for tp in partitions if tp in self._positions)

    def resume(self, partitions: Sequence[TopicPartitionKey]) -> None:
        self._paused.difference_update(partitions)

    def ends_reached(self) -> dict[TopicPartitionKey, int]:
        return dict(self._ends)

    def end(self, topic: str, partition: int) -> int | None:
        parts = self.log.partitions.get(topic)
        return None if parts is None or partition >= len(parts) else len(parts[partition])

    def close(self) -> None:
        self._topics, self._subscribed = [], False
        self._positions.clear()


class InMemoryReader:
    """The :class:`~horae.ports.PartitionReader` of an :class:`InMemoryLog`."""

    def __init__(self, log: InMemoryLog) -> None:
        self.log = log

    def read(
        self, topic: str, partition: int, start: int = 0, stop: int | None = None
    ) -> Iterator[Record]:
        parts = self.log.partitions.get(topic)
        if parts is None or partition >= len(parts):
            return iter(())
        records = parts[partition]
        end = len(records) if stop is None else min(stop, len(records))
        return iter(_visible(records[start:end]))

    def end(self, topic: str, partition: int) -> int:
        parts = self.log.partitions.get(topic)
        return 0 if parts is None or partition >= len(parts) else len(parts[partition])


class InMemoryStore:
    """The :class:`~horae.ports.ReadModelStore` in memory: staged rows per table, and offsets.
    A record below a stored offset is dropped, as by
    :class:`~horae.projections.store.ProjectionStore`
    (the merge rules of the SQL tables are not modelled: every row kept is appended)."""

    def __init__(self, stage_topics: Mapping[Stage, str]) -> None:
        self.stage_topics = dict(stage_topics)
        self.rows: dict[Stage, list[Row]] = {}
        self.offsets: dict[TopicPartitionKey, int] = {}
        self._faults: list[str] = []

    def connect(self) -> None:
        """Nothing to open (the projector connects its store before it reads)."""

    def close(self) -> None:
        """Nothing to close."""

    def fail_next_apply(self, reason: str = "injected fault") -> None:
        """Make the next :meth:`apply` raise ``RuntimeError`` (nothing is written)."""
        self._faults.append(reason)

    def apply(self, batch: Batch) -> ApplyResult:
        if self._faults:
            raise RuntimeError(self._faults.pop(0))
        result = ApplyResult()
        if not batch.next_offsets:
            return result
        stored = {tp: self.offsets[tp] for tp in batch.next_offsets if tp in self.offsets}
        for stage, rows in batch.rows.items():
            kept = unapplied(stage, rows, self.stage_topics.get(stage, ""), stored, result)
            if kept:
                self.rows.setdefault(stage, []).extend(kept)
                result.rows[stage] = len(kept)
        for tp, offset in batch.next_offsets.items():
            if offset > stored.get(tp, -1):
                self.offsets[tp] = offset
        return result

    def stored_offsets(self) -> dict[TopicPartitionKey, int]:
        return dict(self.offsets)


class VirtualClock:
    """A :class:`~horae.ports.Clock` that moves only through :meth:`advance`; wall and monotonic
    time move together (:meth:`jump` moves the wall clock alone)."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self._wall = start
        self._mono = 0.0

    def now(self) -> float:
        return self._wall

    def monotonic(self) -> float:
        return self._mono

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("time does not go back")
        self._wall += seconds
        self._mono += seconds

    def jump(self, seconds: float) -> None:
        """Step the wall clock alone (an operator or NTP setting it), either way."""
        self._wall += seconds


class VirtualBrokerClock:
    """A :class:`~horae.streams.planner.clock.BrokerClock` whose broker time is the virtual
    clock's plus ``skew_s``. Probes are answered at the next :meth:`poll`; a poll with nothing to
    answer waits, that is, advances the clock by its timeout. ``answering`` False: probes are
    never answered (a broker out of reach)."""

    def __init__(self, clock: VirtualClock, skew_s: float = 0.0, latency_s: float = 0.0) -> None:
        self.clock = clock
        self.skew_s = skew_s
        self.latency_s = latency_s
        self.answering = True
        self.probes = 0
        self._pending: list[Callable[[float | None], None]] = []

    def probe(self, on_stamp: Callable[[float | None], None]) -> None:
        self.probes += 1
        self._pending.append(on_stamp)

    def poll(self, timeout_s: float) -> None:
        if self.answering and self._pending:
            self.clock.advance(self.latency_s)
            pending, self._pending = self._pending, []
            for on_stamp in pending:
                on_stamp(self.clock.now() + self.skew_s)
        elif timeout_s > 0:
            self.clock.advance(timeout_s)

    def close(self) -> None:
        self._pending.clear()


@dataclass
class SentRequest:
    url: str
    body: bytes
    headers: dict[str, str]
    method: str
    timeout_s: float | None = None


@dataclass
class RecordingSender:
    """An :class:`~horae.ports.HttpSender` that records each request and answers with the next
    of ``results`` (the last one repeats; default: 200 OK)."""

    results: list[AttemptResult] = field(
        default_factory=lambda: [AttemptResult(SendResult.OK, status=200)]
    )
    sent: list[SentRequest] = field(default_factory=list)

    async def send(
        self,
        url: str,
        body: bytes,
        headers: Mapping[str, str],
        *,
        method: str = "POST",
        timeout_s: float | None = None,
    ) -> AttemptResult:
        self.sent.append(SentRequest(url, body, dict(headers), method, timeout_s))
        return self.results.pop(0) if len(self.results) > 1 else self.results[0]


class StaticResolver:
    """A :class:`~horae.ports.Resolver` answering from a table (host → addresses); a host not in
    it does not resolve (``OSError``), as with the system resolver."""

    def __init__(self, table: Mapping[str, Sequence[str]]) -> None:
        self.table = {host.lower(): list(addrs) for host, addrs in table.items()}
        self.asked: list[tuple[str, int]] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.asked.append((host, port))
        found = self.table.get(host.lower())
        if not found:
            raise OSError(f"{host} does not resolve")
        return list(found)


class ShiftedZones:
    """A :class:`~horae.ports.ZoneSource` standing for another tzdata release, ``version``, in
    which every zone's offset from UTC moved by ``shift_s`` (as when a region drops daylight
    saving time): the schedules of the process's zoneinfo, each instant ``shift_s`` later."""

    def __init__(self, version: str, shift_s: int) -> None:
        self.version = version
        self.shift_s = shift_s

    def schedule(self, spec: TriggerSpec) -> Schedule:
        return ShiftedSchedule(spec.schedule(), self.shift_s, self.version)


class ShiftedSchedule:
    """The instants of ``inner``, each ``shift_s`` later, computed with release ``tzdata``."""

    __slots__ = ("inner", "shift_s", "tzdata", "zone_key")

    def __init__(self, inner: Schedule, shift_s: int, tzdata: str) -> None:
        self.inner = inner
        self.shift_s = shift_s
        self.tzdata = tzdata
        self.zone_key = inner.zone_key

    def next_after(self, t: int) -> int | None:
        found = self.inner.next_after(t - self.shift_s)
        return None if found is None else found + self.shift_s
