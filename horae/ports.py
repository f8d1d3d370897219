"""The ports of Horae: what the decision cores need from the outside world, and nothing more.

Each port is a :class:`typing.Protocol`; its docstrings are the contract an adapter must keep.
The real adapters live next to the I/O they wrap (:mod:`horae.kafka.txn`,
:mod:`horae.kafka.consumer`, :mod:`horae.kafka.reader`,
:mod:`horae.projections.store`, :mod:`horae.outbound.http_sender`); the in-memory twins live in
:mod:`horae.testing`, and one contract suite per port (``tests/unit/ports``, with the real
adapters under ``tests/integration/ports``) runs over both.

The decision cores (the planner's :mod:`~horae.streams.planner.decide`, the dispatcher's
conclusion, the projector's :mod:`~horae.projections.rows`) import this module and the contracts,
never ``confluent_kafka``, ``psycopg`` or ``aiohttp``.

Value types:

- :class:`Emit` — THE record to produce, whoever produces it (planner, dispatcher, breaker,
  synthetic loads): topic name, key and value bytes, partition (None: by key), headers. Built from
  an event by :class:`horae.contracts.routing.Router`, which owns the one routing table
  (event type → topic, key).
- :class:`Record` — a plain :class:`InputRecord` and :class:`ConsumedRecord` (in-memory logs,
  tests).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from time import monotonic as _monotonic
from time import time as _time
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, runtime_checkable

if TYPE_CHECKING:
    from horae.domain.schedule import Schedule
    from horae.domain.trigger import TriggerSpec
    from horae.outbound.results import AttemptResult
    from horae.projections.rows import ApplyResult, Batch

#: ``(topic, partition)``
TopicPartitionKey = tuple[str, int]
#: next offsets to read (the offset after the last record consumed), per partition
Offsets = Mapping[TopicPartitionKey, int]
#: headers of a record to produce
Headers = Sequence[tuple[str, bytes]]
#: headers as a consumed record may carry them (confluent-kafka gives a list of pairs)
InputHeaders = Sequence[tuple[str, str | bytes | None]] | Mapping[str, str | bytes | None]


@runtime_checkable
class InputRecord(Protocol):
    """One consumed record. ``confluent_kafka.Message`` satisfies it structurally, so a hot path
    hands the broker's messages to a decision core without wrapping them.

    The accessors are methods (as on ``Message``); a record read from a log always has a topic,
    partition and offset (``None`` only on error events, which adapters never hand over).
    """

    def topic(self) -> str | None:
        """The topic's full name."""

    def partition(self) -> int | None:
        """The partition number."""

    def offset(self) -> int | None:
        """The record's offset in its partition."""

    def key(self) -> bytes | None:
        """The key bytes (None: no key)."""

    def value(self) -> bytes | None:
        """The value bytes (None: a tombstone)."""

    def headers(self) -> InputHeaders | None:
        """The headers (None or empty: none)."""


class Record:
    """A plain :class:`InputRecord` (what the in-memory adapters store and hand out)."""

    __slots__ = ("_headers", "_key", "_offset", "_partition", "_timestamp_ms", "_topic", "_value")

    def __init__(
        self,
        topic: str,
        partition: int,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        headers: Headers | None = None,
        timestamp_ms: int = 0,
    ) -> None:
        self._timestamp_ms = timestamp_ms
        self._topic = topic
        self._partition = partition
        self._offset = offset
        self._key = key
        self._value = value
        self._headers = headers

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value

    def headers(self) -> Headers | None:
        return self._headers

    def timestamp(self) -> tuple[int, int]:
        """``(1, ms)`` (create time) when stamped, else ``(0, 0)``."""
        return (1, self._timestamp_ms) if self._timestamp_ms else (0, 0)

    def __repr__(self) -> str:
        return f"Record({self._topic}[{self._partition}]@{self._offset}, key={self._key!r})"


class Emit(NamedTuple):
    """One record to produce (the only such type in Horae).

    ``partition`` None lets the producer's partitioner pick by key (murmur2, as Kafka's Java
    clients); a trigger-partitioned record carries its trigger's partition number. ``event`` is
    the event the value encodes, when the emitter built it from one (metrics and tests read it;
    it is never produced)."""

    topic: str
    key: bytes
    value: bytes | None
    partition: int | None = None
    headers: Headers | None = None
    event: Any = None


class TransactionFailed(RuntimeError):
    """A batch was not committed. Nothing of it is visible to ``read_committed`` readers, the
    input was rewound to the last committed offsets, and the owner was notified: it must rebuild
    whatever state it derived from records consumed since then."""


class Fenced(TransactionFailed):
    """A batch was not committed because a newer member with the same transactional id (the
    same worker slot, restarted) fenced this one. Nothing of the batch is visible; the member is
    not rewound and can no longer commit (every later :meth:`TransactionalLog.commit` raises
    :class:`Fenced` again): its owner stops and closes it. The newer member owns the slot."""


class TransactionalLog(Protocol):
    """A consumer-group member and its transactional producer: consume, then commit the records
    produced and the input offsets consumed in ONE transaction (consume-transform-produce, KIP-447).

    Partitions are assigned to the member by the group; ``on_assign`` / ``on_revoke`` (given to
    :meth:`subscribe`) run inside :meth:`consume`, between batches, with the partitions as
    ``(topic, partition)`` pairs. After a rebalance every owned partition is read again from its
    last committed offset (what was read of it and not committed is read again, by this member or
    by the partition's new owner), and a revoked partition is no longer among :meth:`positions`.
    A member fenced by a newer member with the same transactional id can no longer commit
    (:class:`Fenced`). Records of aborted transactions are never read (read_committed), and keep
    their offsets: a later record's offset lies past them.
    """

    def subscribe(
        self,
        topics: Sequence[str],
        on_assign: Callable[[Sequence[TopicPartitionKey]], None],
        on_revoke: Callable[[Sequence[TopicPartitionKey]], None],
        on_lost: Callable[[Sequence[TopicPartitionKey]], None] | None = None,
    ) -> None:
        """Join the group for ``topics``. ``on_revoke``: partitions given up in a rebalance;
        ``on_lost``: partitions lost without one (session expired, fenced; other members may
        have processed them meanwhile), by default reported through ``on_revoke``."""

    def unsubscribe(self) -> None:
        """Leave the group: every owned partition is released (``on_revoke`` is not called)."""

    def consume(self, max_records: int, timeout_s: float) -> Sequence[InputRecord]:
        """Up to ``max_records`` committed records (read_committed) of the owned partitions, in
        offset order per partition, waiting at most ``timeout_s`` for the first one. Error
        events are logged by the adapter and never returned."""

    def assignment(self) -> list[TopicPartitionKey]:
        """The partitions owned now."""

    def positions(self) -> dict[TopicPartitionKey, int]:
        """The next offset to consume per owned partition, for those with a known position: what
        :meth:`commit` takes as ``next_offsets`` after a batch was consumed and applied."""

    def commit(self, records: Sequence[Emit], next_offsets: Offsets) -> None:
        """Produce ``records`` and commit ``next_offsets`` for the group, atomically: either every
        record becomes visible to read_committed readers together with the offsets, or none is.

        On failure the adapter aborts the transaction (or, when the producer is unusable — fenced,
        ambiguous timeout — replaces it, which aborts what the old one left open), rewinds every
        owned partition to its last committed offset (:meth:`rewind`), and raises
        :class:`TransactionFailed`. The caller then continues consuming from there.

        A member fenced by a newer one with the same transactional id raises :class:`Fenced`
        instead, without a rewind or a new producer (a new one would fence the newer member in
        turn): it can no longer commit.

        ``next_offsets`` are those of owned partitions (:meth:`positions` after the batch): after
        a revocation the records read of a revoked partition are the new owner's to commit; it
        reads them again from the last committed offset.
        """

    def rewind(self) -> None:
        """Seek every owned partition back to its last committed offset (the beginning when none
        was committed) and call the owner's ``on_rewind`` callback (given to the adapter when it
        was built): the owner drops the state it derived from uncommitted input."""

    def close(self) -> None:
        """Flush and leave the group. Idempotent."""


class PartitionReader(Protocol):
    """Reads a partition outside any consumer group (state rebuilds on assignment)."""

    def read(
        self, topic: str, partition: int, start: int = 0, stop: int | None = None
    ) -> Iterator[InputRecord]:
        """The committed records of ``topic[partition]`` from offset ``start`` up to the end as it
        was when reading began (its last stable offset), or ``stop`` if lower, in offset order.
        Records of open or aborted transactions are never returned; a missing or empty partition
        yields nothing."""

    def end(self, topic: str, partition: int) -> int:
        """The offset past the last record of the existing ``topic[partition]`` now: every
        record committed before the call lies below it, so a :meth:`read` from it returns only
        records committed later."""


class ConsumedRecord(InputRecord, Protocol):
    """A record as a :class:`RecordConsumer` hands it over: an :class:`InputRecord` with its
    timestamp (``confluent_kafka.Message`` satisfies it as it is)."""

    def timestamp(self) -> tuple[int, int]:
        """``(type, epoch milliseconds)``; type 0: the record has no timestamp."""


#: what a consumer's owner says on assignment: where each partition starts (None: the
#: beginning; missing: the group's committed offset)
OnAssign = Callable[[Sequence[TopicPartitionKey]], Mapping[TopicPartitionKey, int | None] | None]


class RecordConsumer(Protocol):
    """A read_committed consumer that commits nothing itself: its owner keeps the positions (the
    projector, in PostgreSQL with its rows) and says where each partition starts, or a
    transactional log commits them for the group with :meth:`group_metadata` (the dispatcher's
    committer thread, while this consumer reads on another); once a newer member of its slot
    fenced that log, nothing this member read is committed (the commit raises :class:`Fenced`,
    the group's offsets stay at its last commit, the group's next member reads those records
    again). Either subscribed
    (:meth:`subscribe`: a group member, partitions assigned by the group) or assigned
    (:meth:`assign`: the partitions named, no group). Callbacks run inside :meth:`consume`.
    """

    def subscribe(
        self,
        topics: Sequence[str],
        on_assign: OnAssign,
        on_revoke: Callable[[Sequence[TopicPartitionKey]], None],
        on_lost: Callable[[Sequence[TopicPartitionKey]], None] | None = None,
    ) -> None:
        """Join the group for ``topics``; a name starting with ``^`` is a pattern (every topic
        it matches, topics created later included, within the metadata refresh). ``on_assign``
        gets the partitions newly assigned and returns where each starts (None: its beginning;
        a partition missing, or no answer: the group's committed offset, else the beginning);
        ``on_revoke`` / ``on_lost`` (default: ``on_revoke``) get the partitions going, before
        they go."""

    def assign(self, offsets: Mapping[TopicPartitionKey, int | None]) -> None:
        """Read exactly these partitions, each from its offset (None: the beginning)."""

    def consume(self, max_records: int, timeout_s: float) -> Sequence[ConsumedRecord]:
        """Up to ``max_records`` committed records of the partitions read and not paused, in
        offset order per partition, waiting at most ``timeout_s`` for the first. Records of open
        or aborted transactions are never returned. Error events are logged, never returned; one
        the consumer cannot go on after (fenced, denied by the broker) raises."""

    def seek(self, offsets: Mapping[TopicPartitionKey, int | None]) -> None:
        """Read these owned partitions again from the offsets given (None: the beginning): what
        was fetched of them and not returned is dropped, and their ends reached forgotten."""

    def seek_committed(self) -> None:
        """Read every owned partition again from the group's committed offset (the beginning
        when none), as after an aborted transaction."""

    def group_metadata(self) -> object:
        """This member's group and generation, opaque: what a transactional log sends with the
        offsets it commits for the group (KIP-447). Changes with every assignment."""

    def assignment(self) -> list[TopicPartitionKey]:
        """The partitions read now."""

    def positions(self) -> dict[TopicPartitionKey, int]:
        """The next offset to read per partition read, for those with a known position."""

    def partitions(self, topic: str) -> int | None:
        """How many partitions ``topic`` has, as the cluster says now (None: not known)."""

    def pause(self, partitions: Sequence[TopicPartitionKey]) -> None:
        """Return no more records of these partitions until :meth:`resume` (still owned)."""

    def resume(self, partitions: Sequence[TopicPartitionKey]) -> None:
        """Return records of these paused partitions again, from where they stood."""

    def ends_reached(self) -> dict[TopicPartitionKey, int]:
        """The partitions read up to their end since they were assigned or sought, each with
        its end offset then (records may have come since)."""

    def end(self, topic: str, partition: int) -> int | None:
        """The partition's end as last seen by this consumer, without asking the broker
        (read_committed: its last stable offset); None while not known."""

    def close(self) -> None:
        """Leave the group (if subscribed) and release everything. Idempotent."""


class ReadModelStore(Protocol):
    """The projector's store: read-model rows and the input offsets they cover, together."""

    def apply(self, batch: Batch) -> ApplyResult:
        """Write the batch's rows and its ``next_offsets`` in ONE transaction; a record below an
        offset already stored is dropped and counted (a replay is a no-op); an offset never moves
        back. A batch without offsets writes nothing. On any error nothing is left behind and the
        error propagates; the caller reconnects and reads again from :meth:`stored_offsets`."""

    def stored_offsets(self) -> dict[TopicPartitionKey, int]:
        """The committed next offsets, per ``(topic, partition)`` ever applied."""


class HttpSender(Protocol):
    """Sends one attempt of one outbound call (see :mod:`horae.outbound.http_sender` for the full
    contract: SSRF check first, connection only to the checked addresses, no redirects, bounded
    body, deadline). Never raises for a failed attempt: the result says how it ended."""

    async def send(
        self,
        url: str,
        body: bytes,
        headers: Mapping[str, str],
        *,
        method: str = "POST",
        timeout_s: float | None = None,
    ) -> AttemptResult:
        """One signed request (``headers`` already carry the signature) to ``url``; the whole
        attempt ends within ``timeout_s`` (when given) or the sender's own deadline, whichever
        is lower, and then says it timed out."""


class Clock(Protocol):
    """Time, injected: a wall clock for what is recorded and decided, a monotonic one for what
    is measured (timeouts, ages of readings)."""

    def now(self) -> float:
        """Wall-clock time, epoch seconds (may jump)."""

    def monotonic(self) -> float:
        """Seconds from an arbitrary origin; never goes back."""


class Resolver(Protocol):
    """Host name resolution (the address policy's: ``AddressPolicy(resolver=...)``)."""

    def __call__(self, host: str, port: int) -> Awaitable[Sequence[str]]:
        """The TCP addresses of ``host`` as strings; raises ``OSError`` when it does not resolve."""


class ZoneSource(Protocol):
    """The time-zone database a planner computes instants with (its tzdata release)."""

    def schedule(self, spec: TriggerSpec) -> Schedule:
        """The compiled schedule of ``spec`` under this database; its ``tzdata`` names the
        release (what the planner records on every fire, event and planner state)."""


class SystemZones:
    """The process's :mod:`zoneinfo` (:meth:`~horae.domain.trigger.TriggerSpec.schedule`),
    whose release is read once per process (:mod:`horae.domain.tzdb`): a new tzdata takes
    effect when the planner restarts."""

    def schedule(self, spec: TriggerSpec) -> Schedule:
        return spec.schedule()


class SystemClock:
    """The process's clocks: :func:`time.time` and :func:`time.monotonic`."""

    def now(self) -> float:
        return _time()

    def monotonic(self) -> float:
        return _monotonic()


class WallClock:
    """A :class:`Clock` whose wall time is ``now()`` of the function given (a deliberately skewed
    clock in tests and benchmarks); monotonic time is the system's."""

    def __init__(self, now: Callable[[], float]) -> None:
        self.now = now

    def monotonic(self) -> float:
        return _monotonic()


SYSTEM_CLOCK = SystemClock()
SYSTEM_ZONES = SystemZones()
