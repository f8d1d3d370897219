"""Pure mapping of consumed records to staging rows (no I/O).

One :class:`Batch` collects, per staging table, the rows of the records it was given, in the
column order of ``sql/stage.sql``, and beside each row where its record was read (its
:class:`Source`: coordinates, key, value, timestamp), so that a record the store cannot hold can
be found and set aside (:mod:`.isolate`); a record that cannot be decoded, or whose type is not
the one its topic carries, becomes an error row instead (skipped, never stops the projection).
Tombstones (``value is None``) are consumed and ignored. Decoding is the codec's (its compiled
readers for current-schema records, schema resolution for older ones); nested value objects are
stored as the canonical JSON of their Avro datum.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, NamedTuple

from horae.contracts import events as ev
from horae.contracts._reflect import to_avro
from horae.contracts.codec import Codec, DecodeError
from horae.contracts.topics import Topic

Row = tuple[Any, ...]
#: a record's headers (as :data:`horae.ports.InputHeaders`)
InputHeaders = Sequence[tuple[str, str | bytes | None]] | Mapping[str, str | bytes | None]


class Source(NamedTuple):
    """Where the record of one staged row was read, and what it was (its key and value bytes and
    its timestamp, for an error row if the store refuses it). A tuple: one is built per record."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int | None


_UNKNOWN = "unknown"  # the state the read models show for an outcome whose result is unknown
_DISPATCHER, _CALLBACK = ev.OutcomeSource.DISPATCHER.value, ev.OutcomeSource.CALLBACK.value


class Stage(StrEnum):
    """Staging tables (``sql/stage.sql``), in the order their merges run."""

    DEFINITIONS = "stage_definitions"
    FIRES = "stage_fires"
    ATTEMPTS = "stage_attempts"
    OUTCOMES = "stage_outcomes"
    SCHEDULE_EVENTS = "stage_schedule_events"
    AUDIT = "stage_audit"
    DEAD_LETTERS = "stage_dead_letters"
    ERRORS = "stage_errors"


#: The topics the projector consumes, with the one event type each carries and its stage.
PROJECTED: dict[Topic, tuple[type[ev.Event], Stage]] = {
    Topic.ACCEPTED: (ev.TriggerDefinition, Stage.DEFINITIONS),
    Topic.FIRES: (ev.FireRecord, Stage.FIRES),
    Topic.ATTEMPTS: (ev.Attempt, Stage.ATTEMPTS),
    Topic.OUTCOMES: (ev.WorkOutcome, Stage.OUTCOMES),
    Topic.SCHEDULE_EVENTS: (ev.ScheduleEvent, Stage.SCHEDULE_EVENTS),
    Topic.AUDIT: (ev.AuditEntry, Stage.AUDIT),
    Topic.DLQ: (ev.DispatchOrder, Stage.DEAD_LETTERS),
}

STAGE_COLUMNS: dict[Stage, tuple[str, ...]] = {
    Stage.DEFINITIONS: (
        "tenant", "trigger_id", "version", "state", "recurrence", "target", "policies", "quotas",
        "authored_at", "author", "role", "description", "labels", "content_type", "payload",
        "src_partition", "src_offset",
    ),
    Stage.FIRES: (
        "fire_key", "key_hash", "tenant", "trigger_id", "origin", "scheduled_at", "sequence",
        "jitter_ms", "due_at", "decided_at", "state", "trigger_version", "tzdata_version",
        "target_kind", "lane", "cause", "cause_detail", "command_id",
        "src_topic", "src_partition", "src_offset",
    ),
    Stage.ATTEMPTS: (
        "fire_key", "key_hash", "tenant", "trigger_id", "n", "lane", "started_at", "ended_at",
        "transport_result", "duration_ms", "http_status", "error", "retry_after_s",
        "next_attempt_at", "tzdata_version", "not_sent", "src_partition", "src_offset",
    ),
    Stage.OUTCOMES: (
        "fire_key", "key_hash", "tenant", "trigger_id", "state", "attempts", "decided_at",
        "first_attempt_at", "last_attempt_at", "http_status", "error", "source",
        "tzdata_version", "src_partition", "src_offset",
    ),
    Stage.SCHEDULE_EVENTS: (
        "event_id", "type", "tenant", "trigger_id", "emitted_at", "trigger_version", "fire_key",
        "origin", "scheduled_at", "due_at", "cause", "attempt", "http_status", "tzdata_version",
        "src_partition", "src_offset",
    ),
    Stage.AUDIT: (
        "audit_id", "tenant", "principal", "role", "action", "at", "allowed", "trigger_id",
        "command_id", "detail", "src_partition", "src_offset",
    ),
    Stage.DEAD_LETTERS: (
        "dlq_id", "link", "tenant", "trigger_id", "fire_key", "origin", "scheduled_at", "lane",
        "attempt", "cause", "dead_at", "redrive_of", "record", "src_partition", "src_offset",
    ),
    Stage.ERRORS: (
        "topic", "partition", "offset", "cause", "detail", "record_key", "record_value",
        "record_ts",
    ),
}  # fmt: skip


_T, _TS, _I4, _I8 = "text", "timestamptz", "int4", "int8"

#: PostgreSQL types of the staging columns, for binary COPY (JSON is staged as text).
STAGE_TYPES: dict[Stage, tuple[str, ...]] = {
    Stage.DEFINITIONS: (
        _T, _T, _I8, _T, _T, _T, _T, _T, _TS, _T, _T, _T, _T, _T, "bytea", _I4, _I8,
    ),
    Stage.FIRES: (
        _T, _T, _T, _T, _T, _TS, _I8, _I8, _TS, _TS, _T, _I8, _T, _T, _T, _T, _T, _T, _T, _I4, _I8,
    ),
    Stage.ATTEMPTS: (
        _T, _T, _T, _T, _I8, _T, _TS, _TS, _T, _I8, _I4, _T, "float8", _TS, _T, _T, _I4, _I8,
    ),
    Stage.OUTCOMES: (_T, _T, _T, _T, _T, _I8, _TS, _TS, _TS, _I4, _T, _T, _T, _I4, _I8),
    Stage.SCHEDULE_EVENTS: (
        _T, _T, _T, _T, _TS, _I8, _T, _T, _TS, _TS, _T, _I8, _I4, _T, _I4, _I8,
    ),
    Stage.AUDIT: (_T, _T, _T, _T, _T, _TS, "bool", _T, _T, _T, _I4, _I8),
    Stage.DEAD_LETTERS: (
        _T, _T, _T, _T, _T, _T, _TS, _T, _I4, _T, _TS, _T, "bytea", _I4, _I8,
    ),
    Stage.ERRORS: (_T, _I4, _I8, _T, _T, "bytea", "bytea", _TS),
}  # fmt: skip


def _json_default(value: object) -> object:
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat()
    if isinstance(value, bytes | bytearray):
        return bytes(value).hex()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def to_json(value: object) -> str:
    """Canonical JSON text (sorted keys) of a datum part, for a jsonb column."""
    return json.dumps(value, default=_json_default, sort_keys=True, separators=(",", ":"))


def _json(value: object) -> str:
    """The canonical JSON of a value object (its Avro datum)."""
    return to_json(to_avro(value))


def _definition(d: ev.TriggerDefinition, t: str, p: int, o: int) -> Row:
    return (
        d.tenant, d.trigger_id, d.version, d.state, _json(d.recurrence), _json(d.target),
        _json(d.policies), _json(d.quotas), d.authored_at, d.author, d.role, d.description,
        _json(d.labels), d.content_type, d.payload, p, o,
    )  # fmt: skip


def _fire(d: ev.FireRecord, t: str, p: int, o: int) -> Row:
    return (
        d.fire_key, d.key_hash, d.tenant, d.trigger_id, d.origin, d.scheduled_at, d.sequence,
        d.jitter_ms, d.due_at, d.decided_at, d.state, d.trigger_version, d.tzdata_version,
        d.target_kind, d.lane, d.cause, d.cause_detail, d.command_id, t, p, o,
    )  # fmt: skip


def _attempt(d: ev.Attempt, t: str, p: int, o: int) -> Row:
    return (
        d.fire_key, d.key_hash, d.tenant, d.trigger_id, d.n, d.lane, d.started_at, d.ended_at,
        d.transport_result, d.duration_ms, d.http_status, d.error, d.retry_after_s,
        d.next_attempt_at, d.tzdata_version, d.not_sent, p, o,
    )  # fmt: skip


def _outcome(d: ev.WorkOutcome, t: str, p: int, o: int) -> Row:
    """``state`` is ``unknown`` when the result is; ``source`` of a record written before
    WorkOutcome v4: ``callback`` when it has no attempt times (only the callback's lack them)."""
    source = d.source or (_DISPATCHER if d.first_attempt_at is not None else _CALLBACK)
    return (
        d.fire_key, d.key_hash, d.tenant, d.trigger_id, _UNKNOWN if d.unknown else d.state,
        d.attempts, d.decided_at, d.first_attempt_at, d.last_attempt_at, d.http_status, d.error,
        source, d.tzdata_version, p, o,
    )  # fmt: skip


def _schedule_event(d: ev.ScheduleEvent, t: str, p: int, o: int) -> Row:
    return (
        d.event_id, d.type, d.tenant, d.trigger_id, d.emitted_at, d.trigger_version, d.fire_key,
        d.origin, d.scheduled_at, d.due_at, d.cause, d.attempt, d.http_status, d.tzdata_version,
        p, o,
    )  # fmt: skip


def _audit(d: ev.AuditEntry, t: str, p: int, o: int) -> Row:
    return (
        d.audit_id, d.tenant, d.principal, d.role, d.action, d.at, d.allowed, d.trigger_id,
        d.command_id, _json(d.detail), p, o,
    )  # fmt: skip


MAPPERS: dict[Stage, Callable[[Any, str, int, int], Row]] = {
    Stage.DEFINITIONS: _definition,
    Stage.FIRES: _fire,
    Stage.ATTEMPTS: _attempt,
    Stage.OUTCOMES: _outcome,
    Stage.SCHEDULE_EVENTS: _schedule_event,
    Stage.AUDIT: _audit,
}


#: the DLQ record's headers the read model keeps (:mod:`horae.streams.dispatcher.conclude` and
#: :mod:`~horae.streams.dispatcher.records` write them)
H_DLQ_CAUSE, H_REDRIVE = "horae-dlq-cause", "horae-redrive-of"


def _header(headers: InputHeaders | None, name: str) -> str | None:
    pairs = headers.items() if isinstance(headers, Mapping) else headers or ()
    for key, raw in pairs:
        if key == name and isinstance(raw, bytes | bytearray):
            return bytes(raw).decode(errors="replace")
    return None


def dead_letter_id(partition: int, offset: int) -> str:
    """A dead letter's id: where its record lies in the DLQ topic (``<partition>-<offset>``)."""
    return f"{partition}-{offset}"


def _dead_letter(
    d: ev.DispatchOrder,
    t: str,
    p: int,
    o: int,
    headers: InputHeaders | None,
    timestamp_ms: int | None,
    value: bytes,
) -> Row:
    """A DLQ record's row: the fire, the attempt it died at, the cause (its header), when (the
    record's timestamp; without one, the order's ``not_before``), the redrive it came from, and
    the record's value (the order a redrive sends again)."""
    f = d.fire
    dead_at = _ts(timestamp_ms) or d.not_before
    return (
        dead_letter_id(p, o), f"{t}:{p}:{o}", f.tenant, f.trigger_id, f.fire_key, f.origin,
        f.scheduled_at, d.lane, d.attempt, _header(headers, H_DLQ_CAUSE) or "", dead_at,
        _header(headers, H_REDRIVE), value, p, o,
    )  # fmt: skip


def _ts(timestamp_ms: int | None) -> datetime | None:
    if timestamp_ms is None or timestamp_ms < 0:
        return None
    return datetime.fromtimestamp(timestamp_ms / 1000, UTC)


def error_row(source: Source, cause: str, detail: str) -> Row:
    """The ``projection_errors`` row of a record set aside with ``cause`` and ``detail``."""
    return (
        source.topic, source.partition, source.offset, cause, detail, source.key, source.value,
        _ts(source.timestamp_ms),
    )  # fmt: skip


@dataclass
class Batch:
    """The staging rows of one batch, plus the next offset per (topic, partition) it covers."""

    rows: dict[Stage, list[Row]] = field(default_factory=dict)
    #: beside each row of ``rows`` (same stage, same index): the record it came from
    sources: dict[Stage, list[Source]] = field(default_factory=dict)
    next_offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    records: int = 0
    errors: int = 0
    tombstones: int = 0
    last_timestamp_ms: dict[tuple[str, int], int] = field(default_factory=dict)
    min_timestamp_ms: int | None = None  # oldest record timestamp in the batch

    def add_error(
        self,
        topic: str,
        partition: int,
        offset: int,
        error: DecodeError,
        key: bytes | None,
        value: bytes | None,
        timestamp_ms: int | None,
    ) -> None:
        source = Source(topic, partition, offset, key, value, timestamp_ms)
        self.add_row(Stage.ERRORS, error_row(source, error.cause, error.detail), source)
        self.errors += 1

    def add_row(self, stage: Stage, row: Row, source: Source) -> None:
        """Stage ``row`` of the record ``source`` (no offset is advanced: see
        :meth:`RecordMapper.add`)."""
        self.rows.setdefault(stage, []).append(row)
        self.sources.setdefault(stage, []).append(source)

    def count(self, stage: Stage) -> int:
        return len(self.rows.get(stage, ()))


@dataclass(frozen=True, slots=True)
class SetAside:
    """A record the store could not hold: where it was read, which table refused it, why."""

    source: Source
    stage: Stage
    detail: str


@dataclass
class ApplyResult:
    """What one :meth:`~horae.ports.ReadModelStore.apply` did (a value of the store port)."""

    rows: dict[Stage, int] = field(default_factory=dict)  # staged rows applied per table
    duplicates_identical: int = 0
    duplicates_different: int = 0
    dropped: int = 0  # records below the stored offsets (already applied)
    set_aside: list[SetAside] = field(default_factory=list)  # records the store could not hold

    def add(self, other: ApplyResult) -> None:
        """Count ``other`` (another transaction of the same batch) in this result."""
        for stage, n in other.rows.items():
            self.rows[stage] = self.rows.get(stage, 0) + n
        self.duplicates_identical += other.duplicates_identical
        self.duplicates_different += other.duplicates_different
        self.dropped += other.dropped
        self.set_aside.extend(other.set_aside)

    @property
    def total_rows(self) -> int:
        return sum(n for s, n in self.rows.items() if s is not Stage.ERRORS)


def position_of(stage: Stage, row: Row, stage_topic: str) -> tuple[str, int, int]:
    """Where the record of a staged row was read: ``(topic, partition, offset)`` (an error row
    names its topic; every other row comes from its stage's topic)."""
    if stage is Stage.ERRORS:
        return str(row[0]), int(row[1]), int(row[2])
    return stage_topic, int(row[-2]), int(row[-1])


def unapplied(
    stage: Stage,
    rows: list[Row],
    stage_topic: str,
    stored: Mapping[tuple[str, int], int],
    result: ApplyResult,
) -> list[Row]:
    """The rows of records at or above the ``stored`` offsets of their partitions (the others
    were applied by an earlier batch: counted in ``result.dropped``)."""
    kept = []
    for row in rows:
        topic, partition, offset = position_of(stage, row, stage_topic)
        if offset < stored.get((topic, partition), -1):
            result.dropped += 1
        else:
            kept.append(row)
    return kept


class RecordMapper:
    """Turns consumed records into a :class:`Batch`; ``topics`` maps full topic names to the
    projected topic they are (``<prefix><suffix>``). A tenant's events topic under the same prefix
    (``<prefix>events.<token>``, see :func:`~horae.contracts.topics.events_topic`) is recognised
    the first time one of its records comes."""

    def __init__(self, codec: Codec, topics: Mapping[str, Topic]) -> None:
        self.codec = codec
        self.topics = dict(topics)
        prefixes = {
            name[: -len(t.value)] for name, t in self.topics.items() if name.endswith(t.value)
        }
        self._events = tuple(f"{p}{Topic.SCHEDULE_EVENTS.value}." for p in prefixes)

    def add(
        self,
        batch: Batch,
        topic: str,
        partition: int,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        timestamp_ms: int | None = None,
        headers: InputHeaders | None = None,
    ) -> None:
        """Stage one record (or its error row) and advance the partition's next offset
        (``headers``: the record's; a dead letter keeps its cause and lineage from them)."""
        batch.records += 1
        tp = (topic, partition)
        batch.next_offsets[tp] = offset + 1
        if timestamp_ms is not None and timestamp_ms >= 0:
            batch.last_timestamp_ms[tp] = timestamp_ms
            if batch.min_timestamp_ms is None or timestamp_ms < batch.min_timestamp_ms:
                batch.min_timestamp_ms = timestamp_ms
        if value is None:
            batch.tombstones += 1
            return
        suffix = self.topics.get(topic)
        if suffix is None and topic.startswith(self._events):  # a tenant's events topic
            suffix = self.topics[topic] = Topic.SCHEDULE_EVENTS
        if suffix is None or suffix not in PROJECTED:
            err = DecodeError("topic", f"{topic} is not a projected topic")
            batch.add_error(topic, partition, offset, err, key, value, timestamp_ms)
            return
        expected, stage = PROJECTED[suffix]
        try:
            event = self.codec.decode(value)
            if type(event) is not expected:
                raise DecodeError(
                    "type", f"a {type(event).__name__} on {topic}, expected {expected.__name__}"
                )
            if stage is Stage.DEAD_LETTERS:
                assert isinstance(event, ev.DispatchOrder)  # the type checked above
                row = _dead_letter(event, topic, partition, offset, headers, timestamp_ms, value)
            else:
                row = MAPPERS[stage](event, topic, partition, offset)
        except DecodeError as exc:
            batch.add_error(topic, partition, offset, exc, key, value, timestamp_ms)
            return
        except (KeyError, TypeError, ValueError) as exc:
            err = DecodeError("invalid", f"{type(exc).__name__}: {exc}")
            batch.add_error(topic, partition, offset, err, key, value, timestamp_ms)
            return
        batch.add_row(stage, row, Source(topic, partition, offset, key, value, timestamp_ms))
