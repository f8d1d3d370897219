"""Snapshots of a partition's compact due index: a planner that takes a partition (a restart, a
rebalance, a failover) loads the partition's latest snapshot and replays only the changelog
written after it, instead of rebuilding the index from the whole changelog.

A snapshot is a cache: dropped, stale or unreadable, the rebuild reads the whole changelog as it
always did (:func:`~horae.streams.planner.rebuild.rebuild_partition`), and that is what it must
agree with (``tests/unit/planner/test_snapshot.py`` compares the two).

**Where.** Topic ``<prefix>planner-snapshots`` (:func:`snapshot_topic`), written and read by the
planner only (its ACLs), compacted, one partition per trigger partition (created by the planner
like its clock topic, with the planner-state topic's partition count). A snapshot of partition
*p* is one or more chunk records on partition *p* (keys ``<p>/<i>``, at most
:data:`CHUNK_BYTES` of snapshot each), all produced in one of the planner's transactions: a
``read_committed`` reader sees all of them or none.

**What.** The index's triggers as :meth:`~horae.streams.planner.index.CompactIndex.image` gives
them (slot table and columns as typed arrays, the distinct rests and plans as prototype
``TriggerDefinition`` records in the event codec, the sparse maps), the partition's tenant
entries and fires in flight, and a header: the format, a fingerprint of the code that computes
next instants and due times (:data:`CODE`), the tzdata release of its schedules, and the
offsets of the planner-state and accepted-definitions partitions it covers (``state_end``,
``accepted_end``: everything before them is in the snapshot). The pair is the snapshot's
generation: a later snapshot covers more.

**When.** Only right after a commit, when the in-memory index is exactly the committed state
(nothing pending, every entry settled): then the ends are asked of the broker and the snapshot is
encoded; its chunks go out with the next transaction (produced before anything else can follow
the ends). A partition is snapshotted once the changelog records it had written or replayed
since its last snapshot reach ``max(min_changes, a quarter of its triggers)``; one partition per
loop iteration, none after an iteration as busy as a full batch (the planner's choice).

**Loading.** The latest complete generation on the partition is used if its format and
partition are this planner's, it decodes, and its ends are not past the changelog's (a
changelog recreated under the same name is shorter); otherwise the partition is rebuilt in full.
What follows the ends is replayed by the same rules as a full rebuild. A snapshot written by
other planner code (:data:`CODE`) or under another tzdata release is *stale*: its state is
trusted as a full rebuild trusts the planner-state records, and every next instant and due time
is derived again by this planner (``schedule.recomputed`` where one moved to another release).
"""

from __future__ import annotations

import hashlib
import json
import logging
import struct
import sys
from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from horae.contracts import events as ev
from horae.contracts.codec import DecodeError, decode, encode
from horae.ports import Emit, PartitionReader
from horae.streams.planner.index import (
    CompactIndex,
    DueIndex,
    Flight,
    IndexImage,
    Plan,
    Rest,
    TenantEntry,
)
from horae.streams.planner.sharing import SharedValues

log = logging.getLogger(__name__)

#: the layout of a snapshot and the meaning of its fields (:class:`IndexImage`'s): a change to
#: either needs a new number (a snapshot of another format is not loaded)
FORMAT = 1
CHUNK_BYTES = 512 * 1024  # under the broker's default record size limit (1 MB)
ENCODED_PLANS_KEPT = 100_000  # plans whose snapshot record is remembered between snapshots
_MAGIC = b"HZS1"
_CHUNK = struct.Struct(">4sqqII")  # magic, state end, accepted end, chunk index, chunk count
_LENGTH = struct.Struct(">Q")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_NO_RECURRENCE = ev.Recurrence(kind=ev.RecurrenceKind.CRON, expr="0 0 1 1 *")
_NO_TARGET = ev.Target(kind=ev.TargetKind.WEBHOOK, url="https://-")
#: topic configs: compacted (the latest chunk per key), kept (a snapshot is read at any start)
TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    "retention.ms": "-1",
    "min.compaction.lag.ms": "0",
    "segment.ms": str(3_600_000),
    "min.cleanable.dirty.ratio": "0.1",
}


def _fingerprint() -> str:
    """A hash of the modules whose code a snapshot's next instants and due times come from: a
    planner of other code derives them again when it loads the snapshot."""
    root = Path(__file__).resolve().parents[2]
    files = sorted((root / "domain").rglob("*.py"))
    files += [root / "streams" / "planner" / n for n in ("decide.py", "index.py", "snapshot.py")]
    files.append(root / "contracts" / "domain_map.py")
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


#: the fingerprint of this planner's code (see :func:`_fingerprint`)
CODE = _fingerprint()


def snapshot_topic(prefix: str) -> str:
    return f"{prefix}planner-snapshots"


def ensure_snapshot_topic(bootstrap: str, prefix: str) -> int:
    """Create the snapshot topic when missing, with the planner-state topic's partition count
    (idempotent); return its partition count."""
    from horae.contracts.topics import Topic, topic_name
    from horae.kafka.admin import admin_client, ensure_topic

    admin = admin_client(bootstrap)
    state = admin.list_topics(timeout=30).topics.get(topic_name(Topic.PLANNER_STATE, prefix))
    partitions = len(state.partitions) if state is not None else 1
    return ensure_topic(admin, snapshot_topic(prefix), partitions, TOPIC_CONFIG)


class SnapshotUnusable(ValueError):
    """A snapshot this planner must not load (the message says why); the partition is rebuilt
    from its changelog."""


@dataclass
class Snapshot:
    """A loaded snapshot: the index and the changelog offsets it covers. ``stale``: why its next
    instants and due times are to be derived again (written by other planner code, or under
    another tzdata release), None when they stand; ``tzdata``: the release it was written
    under."""

    index: CompactIndex
    state_end: int
    accepted_end: int
    chunks: int
    stale: str | None = None
    tzdata: str | None = None


# --- encoding ---------------------------------------------------------------------------------


def _rest_record(rest: Rest) -> bytes:
    tenant, state, target, author, role, ctype, quotas, description, labels = rest
    return encode(
        ev.TriggerDefinition(
            tenant=tenant,
            trigger_id="-",
            version=0,
            state=state,
            recurrence=_NO_RECURRENCE,
            target=target,
            authored_at=_EPOCH,
            author=author,
            role=role,
            content_type=ctype,
            quotas=quotas,
            description=description,
            labels=labels,
        )
    )


def _plan_record(plan: Plan) -> bytes:
    recurrence, policies, _, _ = plan
    return encode(
        ev.TriggerDefinition(
            tenant="-",
            trigger_id="-",
            version=0,
            state=ev.DefinitionState.LIVE,
            recurrence=recurrence,
            target=_NO_TARGET,
            authored_at=_EPOCH,
            author="-",
            policies=policies,
        )
    )


def _applied_record(applied: tuple[ev.AppliedCommand, ...], tenant: str = "-") -> bytes:
    return encode(
        ev.PlannerState(
            tenant=tenant,
            trigger_id="-",
            trigger_version=0,
            state=ev.DefinitionState.LIVE,
            updated_at=_EPOCH,
            applied_commands=applied,
        )
    )


def _sections(parts: Iterable[bytes]) -> bytes:
    out = bytearray(_MAGIC)
    for part in parts:
        out += _LENGTH.pack(len(part))
        out += part
    return bytes(out)


def encode_snapshot(
    index: CompactIndex,
    state_end: int,
    accepted_end: int,
    plan_cache: dict[int, tuple[Plan, bytes]] | None = None,
) -> bytes:
    """The snapshot of ``index`` (settled, nothing pending) covering the changelog before the
    given ends. ``plan_cache`` remembers encoded plans between calls (by the plan's identity)."""
    if index.pending:
        raise ValueError("a snapshot of an index that owes the log records")
    image = index.image()
    plans: list[bytes] = []
    cache = plan_cache if plan_cache is not None else {}
    for plan in image.plans:
        found = cache.get(id(plan))
        if found is None or found[0] is not plan:
            found = cache[id(plan)] = (plan, _plan_record(plan))
        plans.append(found[1])
    tzdata = sorted({plan[3].tzdata for plan in image.plans})
    applied_slots = sorted(image.applied)
    header = {
        "format": FORMAT,
        "code": CODE,
        "partition": index.partition,
        "state_end": state_end,
        "accepted_end": accepted_end,
        "tzdata": tzdata,
        "filled": image.filled,
        "garbage": image.garbage,
        "odd_ids": {str(s): i for s, i in image.odd_ids.items()},
        "applied_slots": applied_slots,
        "tenants": {t: e.suspended_since for t, e in index.tenants.items()},
        "flights": {
            key: [f.running, f.running_lane, f.running_until, f.buffered, f.buffered_lane]
            for key, f in index.flights.items()
        },
    }
    paused_slots = array("q", image.paused)
    paused_times = array("d", (image.paused[s] for s in paused_slots))
    columns = (
        image.start, image.klen, image.plen, image.cells, image.free, image.rest, image.plan,
        image.version, image.authored, image.next, image.last, image.fired, image.due,
        paused_slots, paused_times,
    )  # fmt: skip
    return _sections(
        [
            json.dumps(header, separators=(",", ":")).encode(),
            image.blob,
            *(_native(column) for column in columns),
            _sections(_rest_record(r) for r in image.rests),
            _sections(plans),
            _sections(_applied_record(image.applied[s]) for s in applied_slots),
            _sections(_applied_record(e.applied, t) for t, e in index.tenants.items()),
        ]
    )


def _native(column: array[int] | array[float]) -> bytes:
    """``column``'s bytes, little-endian."""
    if sys.byteorder == "little":
        return column.tobytes()
    copy = column[:]
    copy.byteswap()
    return copy.tobytes()


# --- decoding ---------------------------------------------------------------------------------


def _split(blob: bytes | memoryview) -> list[memoryview]:
    view = memoryview(blob)
    if bytes(view[:4]) != _MAGIC:
        raise SnapshotUnusable("not a snapshot (magic)")
    parts, at = [], 4
    while at < len(view):
        (n,) = _LENGTH.unpack_from(view, at)
        at += _LENGTH.size
        if at + n > len(view):
            raise SnapshotUnusable("truncated")
        parts.append(view[at : at + n])
        at += n
    return parts


def _column(column: array[int] | array[float], data: memoryview) -> None:
    if len(data) % column.itemsize:
        raise SnapshotUnusable(f"a column of {len(data)} bytes")
    column.frombytes(data)
    if sys.byteorder != "little":
        column.byteswap()


def _ints(kind: str, data: memoryview) -> array[int]:
    column = array(kind)
    _column(column, data)
    return column


def _floats(data: memoryview) -> array[float]:
    column = array("d")
    _column(column, data)
    return column


_INTS = "qiiiiiiqqqqq"  # start, klen, plen, cells, free, rest, plan, version .. fired
_SECTIONS = 2 + len(_INTS) + 3 + 4  # header, blob, ints, due and paused, four record lists


def decode_snapshot(
    blob: bytes,
    partition: int,
    shared: SharedValues,
    plan_cache: dict[bytes, Plan] | None = None,
) -> Snapshot:
    """The snapshot of ``partition`` in ``blob``; raises :class:`SnapshotUnusable` when it is
    not this planner's to load (another format or partition, damaged). Written by other planner
    code or under another tzdata release, it is loaded ``stale``: the rebuild derives every next
    instant and due time again. ``plan_cache`` shares the decoded plans between the partitions
    of one rebuild (by their record's bytes)."""
    parts = _split(blob)
    try:
        header = json.loads(bytes(parts[0]))
    except (IndexError, ValueError) as exc:
        raise SnapshotUnusable(f"header: {exc}") from exc
    if header.get("format") != FORMAT:
        raise SnapshotUnusable(f"format {header.get('format')}, this planner reads {FORMAT}")
    if header.get("partition") != partition:
        raise SnapshotUnusable(f"of partition {header.get('partition')}")
    if len(parts) != _SECTIONS:
        raise SnapshotUnusable(f"{len(parts)} sections, not {_SECTIONS}")
    ints = [_ints(kind, part) for kind, part in zip(_INTS, parts[2:], strict=False)]
    at = 2 + len(_INTS)
    due, paused_slots, paused_times = (
        _floats(parts[at]),
        _ints("q", parts[at + 1]),
        _floats(parts[at + 2]),
    )
    cache = plan_cache if plan_cache is not None else {}
    try:
        rests = [_rest(bytes(b)) for b in _split(parts[at + 3])]
        plans = [_plan(bytes(b), shared, cache) for b in _split(parts[at + 4])]
        applied = [decode(bytes(b), ev.PlannerState) for b in _split(parts[at + 5])]
        tenants = [decode(bytes(b), ev.PlannerState) for b in _split(parts[at + 6])]
    except DecodeError as exc:
        raise SnapshotUnusable(f"a record: {exc}") from exc
    stale = []
    if header.get("code") != CODE:
        stale.append("written by other planner code")
    releases = sorted({plan[3].tzdata for plan in plans})
    if releases and releases != header["tzdata"]:
        stale.append(f"written under tzdata {header['tzdata']}, this planner's is {releases}")
    start, klen, plen, cells, free, rest, plan, version, authored, nxt, last, fired = ints
    slots = header["applied_slots"]
    image = IndexImage(
        blob=bytes(parts[1]), start=start, klen=klen, plen=plen, cells=cells, free=free,
        filled=header["filled"], garbage=header["garbage"], rest=rest, plan=plan,
        version=version, authored=authored, next=nxt, last=last, fired=fired, due=due,
        rests=rests, plans=plans, paused=dict(zip(paused_slots, paused_times, strict=True)),
        applied={s: a.applied_commands for s, a in zip(slots, applied, strict=True)},
        odd_ids={int(s): i for s, i in header["odd_ids"].items()},
    )  # fmt: skip
    try:
        index = CompactIndex.from_image(partition, image, shared)
    except (ValueError, IndexError, KeyError) as exc:
        raise SnapshotUnusable(f"image: {exc}") from exc
    for state in tenants:
        since = header["tenants"].get(state.tenant)
        index.tenants[state.tenant] = TenantEntry(since, state.applied_commands)
    for key, (running, lane, until, buffered, buffered_lane) in header["flights"].items():
        index.flights[key] = Flight(
            running,
            None if lane is None else ev.Lane(lane),
            until,
            buffered,
            None if buffered_lane is None else ev.Lane(buffered_lane),
        )
        if running is not None:
            index.running[running.encode()] = key
    written_under = header["tzdata"]
    return Snapshot(
        index,
        header["state_end"],
        header["accepted_end"],
        chunks=0,
        stale="; ".join(stale) or None,
        tzdata=written_under[0] if len(written_under) == 1 else None,
    )


def _rest(record: bytes) -> Rest:
    d = decode(record, ev.TriggerDefinition)
    return (
        d.tenant, d.state, d.target, d.author, d.role, d.content_type, d.quotas, d.description,
        d.labels,
    )  # fmt: skip


def _plan(record: bytes, shared: SharedValues, cache: dict[bytes, Plan]) -> Plan:
    found = cache.get(record)
    if found is None:
        d = decode(record, ev.TriggerDefinition)
        spec, schedule = shared.compiled(d)
        found = cache[record] = (d.recurrence, d.policies, spec, schedule)
    return found


# --- chunks on the topic ---------------------------------------------------------------------


def chunk_records(
    topic: str, partition: int, blob: bytes, state_end: int, accepted_end: int, previous: int = 0
) -> list[Emit]:
    """The records of one snapshot of ``partition``: its chunks, then tombstones for the keys of
    a ``previous`` snapshot's chunks past this one's."""
    n = max(1, -(-len(blob) // CHUNK_BYTES))
    out = []
    for i in range(n):
        head = _CHUNK.pack(_MAGIC, state_end, accepted_end, i, n)
        value = head + blob[i * CHUNK_BYTES : (i + 1) * CHUNK_BYTES]
        out.append(Emit(topic, f"{partition}/{i}".encode(), value, partition))
    out += [Emit(topic, f"{partition}/{i}".encode(), None, partition) for i in range(n, previous)]
    return out


@dataclass
class _Gathering:
    generation: tuple[int, int]
    count: int
    chunks: dict[int, bytes] = field(default_factory=dict)


def read_latest(
    reader: PartitionReader, topic: str, partition: int
) -> tuple[bytes, int, int, int] | None:
    """The latest complete snapshot on ``topic[partition]``: its bytes, its ends and its chunk
    count; None when there is none. Chunks of one snapshot are committed together and read in
    order; a chunk that is not a snapshot's is skipped."""
    best: _Gathering | None = None
    current: _Gathering | None = None
    for msg in reader.read(topic, partition):
        value = msg.value()
        if value is None or len(value) < _CHUNK.size:
            continue
        magic, state_end, accepted_end, i, n = _CHUNK.unpack_from(value)
        if magic != _MAGIC or i >= n:
            continue
        generation = (state_end, accepted_end)
        if current is None or current.generation != generation or current.count != n:
            current = _Gathering(generation, n)
        current.chunks[i] = value[_CHUNK.size :]
        if len(current.chunks) == n and (best is None or generation >= best.generation):
            best, current = current, None
    if best is None:
        return None
    blob = b"".join(best.chunks[i] for i in range(best.count))
    return blob, best.generation[0], best.generation[1], best.count


# --- the planner's keeper ----------------------------------------------------------------------


class Snapshots:
    """When a planner snapshots which partition, and the loading of a partition's snapshot (see
    the module docstring). One per planner; called from its loop thread only."""

    def __init__(
        self,
        reader: PartitionReader,
        topic: str,
        state_topic: str,
        accepted_topic: str,
        min_changes: int = 10_000,
        partitions: int | None = None,
    ) -> None:
        """``partitions``: how many partitions the snapshot topic has (None: as many as the
        changelog); a partition past them is not snapshotted."""
        self.reader = reader
        self.partitions = partitions
        self.topic = topic
        self.state_topic = state_topic
        self.accepted_topic = accepted_topic
        self.min_changes = min_changes
        self._changes: dict[int, int] = {}  # changelog records since the last snapshot
        self._chunks: dict[int, int] = {}  # the chunk count of the last snapshot known
        self._encoded: dict[int, tuple[Plan, bytes]] = {}
        self._decoded: dict[bytes, Plan] = {}
        self.written = 0  # snapshots produced (counted when handed out)
        self.loaded = 0  # snapshots loaded
        self.replayed: dict[int, int] = {}  # changelog records read by each partition's rebuild

    def load(self, partition: int, shared: SharedValues) -> Snapshot | None:
        """The partition's latest usable snapshot, or None (logged: why not)."""
        try:
            found = read_latest(self.reader, self.topic, partition)
        except Exception as exc:  # optional: the rebuild reads the changelog, or fails on it
            log.warning("snapshot of partition %d not read, rebuilt in full: %r", partition, exc)
            return None
        if found is None:
            return None
        blob, state_end, accepted_end, chunks = found
        self._chunks[partition] = chunks
        try:
            loaded = decode_snapshot(blob, partition, shared, self._decoded)
            for topic, end in ((self.state_topic, state_end), (self.accepted_topic, accepted_end)):
                now_end = self.reader.end(topic, partition)
                if end > now_end:
                    raise SnapshotUnusable(
                        f"it covers {topic}[{partition}] to {end}, past {now_end}"
                    )
        except SnapshotUnusable as exc:
            log.warning("snapshot of partition %d not used, rebuilt in full: %s", partition, exc)
            return None
        except Exception:  # damaged in a way no check names: a full rebuild is always right
            log.exception("snapshot of partition %d not loaded, rebuilt in full", partition)
            return None
        self.loaded += 1
        if loaded.stale:
            log.info("snapshot of partition %d %s: its instants are derived again", partition,
                     loaded.stale)  # fmt: skip
        loaded.chunks = chunks
        return loaded

    def rebuilt(self, partition: int, replayed: int) -> None:
        """``partition``'s index was rebuilt, replaying ``replayed`` changelog records."""
        self._changes[partition] = replayed
        self.replayed[partition] = replayed

    def committed(self, records: Sequence[Emit]) -> None:
        """Count the changelog records of a committed batch per partition."""
        state, changes = self.state_topic, self._changes
        for r in records:
            if r.topic == state and r.partition is not None and r.partition in changes:
                changes[r.partition] += 1

    def due(self, indexes: Mapping[int, DueIndex]) -> list[int]:
        """The owned partitions that need a snapshot, the one with most changes first."""
        due = [
            (n, p)
            for p, n in self._changes.items()
            if (self.partitions is None or p < self.partitions)
            and isinstance(index := indexes.get(p), CompactIndex)
            and not index.pending
            and n >= max(self.min_changes, len(index) // 4)
        ]
        return [p for _, p in sorted(due, reverse=True)]

    def owed(self, indexes: Mapping[int, DueIndex]) -> list[Emit]:
        """The records of one snapshot, of the owned partition that most needs one, if any
        needs one (call when every index is the committed state: right after a commit)."""
        due = self.due(indexes)
        if not due:
            return []
        p = due[0]
        index = indexes[p]
        assert isinstance(index, CompactIndex)
        try:
            state_end = self.reader.end(self.state_topic, p)
            accepted_end = self.reader.end(self.accepted_topic, p)
        except Exception as exc:  # optional: asked again after the next commit
            log.warning("no snapshot of partition %d now: its changelog's end unknown: %r", p, exc)
            return []
        blob = encode_snapshot(index, state_end, accepted_end, self._encoded)
        if len(self._encoded) > ENCODED_PLANS_KEPT:
            self._encoded.clear()
        records = chunk_records(
            self.topic, p, blob, state_end, accepted_end, self._chunks.get(p, 0)
        )
        self._chunks[p] = sum(1 for r in records if r.value is not None)
        self._changes[p] = 0
        self.written += 1
        return records
