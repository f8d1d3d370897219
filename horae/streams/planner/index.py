"""The due index of one owned partition: its triggers, and which are due when.

One contract (:class:`DueIndex`), two representations, chosen per process by :data:`INDEX`
(setting ``planner.index``, env ``HORAE_PLANNER_INDEX``; the planner's unit tests run both):

- ``compact`` (:class:`CompactIndex`, the default): per trigger a slot in typed arrays
  (``array``) of its numbers and two ids of interned parts of its definition shared by the
  triggers that agree on them (and by the partitions of a planner); its key and payload in one
  buffer with an open-addressing table of slots (:class:`SlotTable`): no Python object per
  trigger; due times in a timing wheel of hour-wide buckets split into 60-second ones as they
  come near (arrays of slots and due times), only the buckets that came due in tuples. A
  :class:`TriggerEntry` is built when asked for (:meth:`DueIndex.get`, :meth:`DueIndex.pop_due`)
  and packed back at :meth:`DueIndex.settle`.
- ``objects`` (:class:`ObjectsIndex`): a dict of :class:`TriggerEntry` objects and a binary heap
  of ``(due_ts, trigger_key)`` tuples; for bisecting (it has no snapshots).

Both drop stale due times lazily: a trigger is due at the time it was last :meth:`put
<DueIndex.put>` with, as long as its entry still says so. Times are epoch seconds.
"""

from __future__ import annotations

import heapq
import weakref
from abc import ABC, abstractmethod
from array import array
from collections import Counter
from collections.abc import Hashable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Generic, Literal, TypeVar
from zlib import crc32

from horae.contracts.events import (
    AppliedCommand,
    DefinitionState,
    Lane,
    Policies,
    Quotas,
    Recurrence,
    Role,
    Target,
    TriggerDefinition,
)
from horae.domain.schedule import Schedule
from horae.domain.trigger import TriggerSpec
from horae.ports import Emit
from horae.streams.planner.sharing import SharedValues


@dataclass(slots=True, kw_only=True)
class TriggerEntry:
    """What the planner holds per trigger between decisions (mirrors ``PlannerState``); built
    with keywords only."""

    definition: TriggerDefinition
    spec: TriggerSpec  # the domain's view of the definition (policies)
    schedule: Schedule  # compiled once per version; cron schedules are shared
    next_instant: int | None = None  # next scheduled instant not yet decided (epoch s)
    due_ts: float | None = None  # when to decide it: next_instant + jitter (epoch s)
    last_decided: int | None
    paused_since: float | None = None
    applied: tuple[AppliedCommand, ...] = ()  # commands applied and not yet expired
    fired: int = 0  # scheduled instants fired so far (against ``recurrence.count``)


@dataclass(slots=True)
class Flight:
    """A trigger's scheduled fires in flight, for its overlap policy (mirrors ``PlannerState``'s
    ``running_*`` and ``buffered_*``): the running fire (its order emitted, no outcome read yet)
    counts as running until ``running_until`` at the latest; the buffered fire's order is not
    emitted yet."""

    running: str | None = None  # fire key
    running_lane: Lane | None = None
    running_until: float | None = None  # epoch s
    buffered: str | None = None  # fire key
    buffered_lane: Lane | None = None


@dataclass(slots=True)
class TenantEntry:
    """What a partition holds per tenant that received a tenant-wide command (mirrors the
    ``PlannerState`` keyed ``<tenant>/*``)."""

    suspended_since: float | None = None
    applied: tuple[AppliedCommand, ...] = ()


class DueIndex(ABC):
    """The triggers of one partition, indexed by due time (the port both representations
    implement; :func:`make_index` builds the one :data:`INDEX` names).

    Contract:
    - :meth:`get` returns a trigger's entry, the same object on every call until :meth:`settle`;
      what is changed in it is the index's (a later :meth:`get` sees it). After :meth:`settle`
      the entries got before are no longer the index's: callers drop them.
    - :meth:`put` makes ``entry`` the trigger's and, unless ``entry.due_ts`` is None, adds a
      position ``(entry.due_ts, key)``. A position ``(t, key)`` is live while ``key`` is held and
      its entry says ``due_ts == t``: changing ``due_ts`` without a put leaves the trigger due at
      no new time (a stale position is dropped when reached).
    - :meth:`earliest_due` is the ``t`` of the least live position; :meth:`pop_due` takes the
      live positions at or before ``until`` in ``(t, key)`` order and yields their triggers, up
      to ``limit``, each once a call; the caller puts each back.
    - :meth:`remove` forgets a trigger; ``len()`` counts the triggers held and
      :meth:`trigger_keys` lists their keys.
    - :meth:`reserve` is a hint: about ``n`` triggers are about to be put (a rebuild's).
    - :meth:`settle` ends a batch (the planner calls it once per loop iteration and per trigger a
      rebuild restores): the representation may pack the entries away.

    Beside the triggers, both hold the same plain maps: the partition's tenant entries, the fires
    in flight and the records a rebuild owes the log."""

    def __init__(self, partition: int) -> None:
        self.partition = partition
        self.tenants: dict[str, TenantEntry] = {}  # tenants with a tenant-wide command
        #: records the rebuild owes the log (an undecodable state's cause), committed next
        self.pending: list[Emit] = []
        #: triggers with a fire in flight (overlap policies other than ``allow`` only)
        self.flights: dict[str, Flight] = {}
        #: the running fires' keys (UTF-8, as outcome records are keyed) -> their trigger key
        self.running: dict[bytes, str] = {}

    @abstractmethod
    def __len__(self) -> int: ...

    @abstractmethod
    def get(self, key: str) -> TriggerEntry | None: ...

    @abstractmethod
    def trigger_keys(self) -> list[str]: ...

    @abstractmethod
    def put(self, key: str, entry: TriggerEntry) -> None: ...

    @abstractmethod
    def remove(self, key: str) -> None: ...

    @abstractmethod
    def earliest_due(self) -> float | None: ...

    @abstractmethod
    def pop_due(self, until: float, limit: int) -> Iterator[tuple[str, TriggerEntry]]: ...

    @abstractmethod
    def settle(self) -> None: ...

    @abstractmethod
    def reserve(self, n: int) -> None: ...


class ObjectsIndex(DueIndex):
    """The ``objects`` representation: a dict of entries and a heap of ``(due_ts, key)``."""

    def __init__(self, partition: int) -> None:
        super().__init__(partition)
        self.entries: dict[str, TriggerEntry] = {}
        self._heap: list[tuple[float, str]] = []

    def __len__(self) -> int:
        return len(self.entries)

    def get(self, key: str) -> TriggerEntry | None:
        return self.entries.get(key)

    def trigger_keys(self) -> list[str]:
        return list(self.entries)

    def put(self, key: str, entry: TriggerEntry) -> None:
        self.entries[key] = entry
        if entry.due_ts is not None:
            heapq.heappush(self._heap, (entry.due_ts, key))

    def remove(self, key: str) -> None:
        self.entries.pop(key, None)

    def earliest_due(self) -> float | None:
        heap = self._heap
        while heap:
            due, key = heap[0]
            entry = self.entries.get(key)
            if entry is not None and entry.due_ts == due:
                return due
            heapq.heappop(heap)
        return None

    def pop_due(self, until: float, limit: int) -> Iterator[tuple[str, TriggerEntry]]:
        heap = self._heap
        taken = 0
        popped: set[str] = set()  # a trigger put twice at one time is yielded once
        while heap and taken < limit:
            due, key = heap[0]
            if due > until:
                return
            heapq.heappop(heap)
            entry = self.entries.get(key)
            if entry is None or entry.due_ts != due or key in popped:
                continue
            popped.add(key)
            taken += 1
            yield key, entry

    def settle(self) -> None:
        """Nothing to pack: the entries are the representation."""

    def reserve(self, n: int) -> None:
        """Nothing to reserve: the dict grows as it goes."""


K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
_NONE = -(2**63)  # an int column's None
_NAN = float("nan")  # a float column's None (never equal to anything)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
_new = object.__new__
_NO_LABELS: Mapping[str, str] = {}  # packed definitions are frozen: one empty mapping serves all
BUCKET_S = 60  # the compact index's timing-wheel bucket width
FAR_S = 3600  # the width of its buckets far ahead, split into BUCKET_S ones when reached
_GROW = 1024  # slots added to the columns at a time
_MIN_GARBAGE = 1 << 16  # bytes of garbage in a SlotTable's buffer before it is compacted
_NO_IDS = array("i", [-1]) * _GROW
_ZEROS = array("q", [0]) * _GROW
_NONES = array("q", [_NONE]) * _GROW
_NANS = array("d", [_NAN]) * _GROW
#: the parts of a definition the compact index shares between triggers that agree on them
Rest = tuple[str, DefinitionState, Target, str, Role, str, Quotas, str | None, Mapping[str, str]]
Plan = tuple[Recurrence, Policies, TriggerSpec, Schedule]


class _Interned(Generic[K, V]):
    """Values held once per key, with the number of slots using each (freed at zero)."""

    __slots__ = ("free", "ids", "keys", "uses", "values")

    def __init__(self) -> None:
        self.ids: dict[K, int] = {}
        self.keys: list[K | None] = []
        self.values: list[V | None] = []
        self.uses = array("q")
        self.free: list[int] = []

    def add(self, key: K, value: V) -> int:
        """The id of a new ``key`` holding ``value``, no use yet (callers count their uses in
        ``uses``)."""
        if self.free:
            i = self.free.pop()
            self.keys[i], self.values[i] = key, value
        else:
            i = len(self.values)
            self.keys.append(key)
            self.values.append(value)
            self.uses.append(0)
        self.ids[key] = i
        return i

    def release(self, i: int) -> None:
        self.uses[i] -= 1
        if self.uses[i] == 0:
            del self.ids[self.keys[i]]  # type: ignore[arg-type]
            self.keys[i] = self.values[i] = None
            self.free.append(i)


class _Parts:
    """The rests and plans the compact indexes of one planner share (one per
    :class:`SharedValues`: its shared value objects are what they are interned by)."""

    __slots__ = ("plans", "rests")

    def __init__(self) -> None:
        self.rests: _Interned[tuple[object, ...], Rest] = _Interned()
        self.plans: _Interned[int, Plan] = _Interned()

    def release_all(self, rests: array[int], plans: array[int]) -> None:
        """Release the parts an index's slots use (the index is gone)."""
        for column, table in ((rests, self.rests), (plans, self.plans)):
            release = table.release
            for i in column:
                if i >= 0:
                    release(i)


_PARTS: weakref.WeakKeyDictionary[SharedValues, _Parts] = weakref.WeakKeyDictionary()


_EMPTY, _REMOVED = -1, -2  # a SlotTable cell's marks


class SlotTable:
    """The slots of a compact index: which are held, by which key, with which payload, without a
    Python object per slot.

    ``blob`` holds each slot's record, its key (UTF-8) then its payload; per slot, in typed
    arrays, where its record starts (-1: the slot is free) and the lengths of its key and
    payload. A record replaced or freed is garbage in ``blob`` until the buffer is compacted,
    when the garbage is more than half of it (and at least ``_MIN_GARBAGE``). ``cells`` is an
    open-addressing hash table with linear probing: a cell holds a slot, ``_EMPTY`` or
    ``_REMOVED`` (a slot was removed there: probes go on past it); a key's probes start at the
    CRC-32 of its UTF-8 bytes, the same in every process (``hash`` of a string is not), so that
    a snapshot's table serves the process that loads it. Its size is a power of two, rebuilt
    twice as large (or as small as the slots held allow) when more than 2/3 of its cells are not
    empty. A freed slot is the next one
    taken; ``size`` counts the slots ever taken (the index's columns have room for them)."""

    __slots__ = ("blob", "cells", "count", "filled", "free", "garbage", "klen", "plen", "start")

    def __init__(self) -> None:
        self.blob = bytearray()
        self.start = array("q")
        self.klen = array("i")
        self.plen = array("i")
        self.free: list[int] = []
        self.cells = array("i", [_EMPTY]) * 8
        self.count = 0  # keys held
        self.filled = 0  # cells not empty
        self.garbage = 0  # bytes of blob no slot's record

    def __len__(self) -> int:
        return self.count

    @property
    def size(self) -> int:
        return len(self.start)

    def reserve(self, n: int) -> None:
        """Cells for ``n`` keys without a rebuild (when fewer are held than that)."""
        if (n + 1) * 3 > len(self.cells) * 2 and self.count * 3 <= len(self.cells) * 2:
            self._rebuild(n)

    def find(self, key: str) -> int:
        """The slot of ``key``, or -1."""
        i = self._cell(key)
        return -1 if i < 0 else self.cells[i]

    def _cell(self, key: str) -> int:
        """The index of the cell holding ``key``'s slot, or -1."""
        try:
            kb = key.encode()
        except UnicodeEncodeError:  # a lone surrogate (no key decoded from a record has one)
            kb = key.encode("utf-8", "surrogatepass")
        n, cells, klen, start, blob = len(kb), self.cells, self.klen, self.start, self.blob
        mask = len(cells) - 1
        i = crc32(kb) & mask
        while True:
            s = cells[i]
            if s == _EMPTY:
                return -1
            if s >= 0 and klen[s] == n:
                a = start[s]
                if blob[a : a + n] == kb:
                    return i
            i = (i + 1) & mask

    def take(self, key: str) -> int:
        """The slot of ``key``: a free one (with no payload) if ``key`` is not held."""
        try:
            kb = key.encode()
        except UnicodeEncodeError:  # a lone surrogate (no key decoded from a record has one)
            kb = key.encode("utf-8", "surrogatepass")
        n, cells, klen, start, blob = len(kb), self.cells, self.klen, self.start, self.blob
        mask = len(cells) - 1
        i = crc32(kb) & mask
        spare = -1  # the first removal mark on the way
        while True:
            s = cells[i]
            if s == _EMPTY:
                break
            if s >= 0:
                if klen[s] == n:
                    a = start[s]
                    if blob[a : a + n] == kb:
                        return s
            elif spare < 0:
                spare = i
            i = (i + 1) & mask
        if self.free:
            slot = self.free.pop()
            start[slot], klen[slot] = len(blob), n  # a free slot has no payload
        else:
            slot = len(start)
            start.append(len(blob))
            klen.append(n)
            self.plen.append(0)
        blob += kb
        self.count += 1
        if spare >= 0:
            cells[spare] = slot
        elif (self.filled + 1) * 3 > len(cells) * 2:
            self._rebuild()  # places the new slot too
        else:
            cells[i] = slot
            self.filled += 1
        return slot

    def remove(self, key: str) -> int:
        """Free the slot of ``key`` and return it (-1 if ``key`` is not held)."""
        i = self._cell(key)
        if i < 0:
            return -1
        cells, start, klen = self.cells, self.start, self.klen
        s = cells[i]
        cells[i] = _REMOVED
        self.count -= 1
        self._drop(s)
        start[s] = -1
        klen[s] = self.plen[s] = 0
        self.free.append(s)
        return s

    def key(self, slot: int) -> str | None:
        """The key of ``slot``, None if it is free."""
        a = self.start[slot]
        if a < 0:
            return None
        return self.blob[a : a + self.klen[slot]].decode("utf-8", "surrogatepass")

    def payload(self, slot: int) -> bytes:
        """The payload of the held ``slot``."""
        n = self.plen[slot]
        if not n:
            return b""
        a = self.start[slot] + self.klen[slot]
        return bytes(self.blob[a : a + n])

    def set_payload(self, slot: int, payload: bytes) -> None:
        """Make ``payload`` the held ``slot``'s."""
        blob, a, k, n = self.blob, self.start[slot], self.klen[slot], self.plen[slot]
        if n == len(payload) and (not n or blob[a + k : a + k + n] == payload):
            return
        if a + k + n == len(blob):  # the last record: rewritten in place
            del blob[a + k :]
        else:
            record = blob[a : a + k]
            self._drop(slot)  # may compact: a new buffer, without this record
            blob = self.blob
            self.start[slot] = len(blob)
            blob += record
        blob += payload
        self.plen[slot] = len(payload)
        if self.garbage >= _MIN_GARBAGE and self.garbage * 2 > len(blob):
            self._compact()  # a record rewritten in place shrank the buffer under its garbage

    def _drop(self, slot: int) -> None:
        """Count ``slot``'s record as garbage; compact ``blob`` when that is more than half."""
        self.garbage += self.klen[slot] + self.plen[slot]
        if self.garbage >= _MIN_GARBAGE and self.garbage * 2 > len(self.blob):
            self._compact(slot)

    def _compact(self, dropped: int = -1) -> None:
        """``blob`` with the records of the held slots only (``dropped``'s, if any, left out)."""
        old, blob = self.blob, bytearray()
        start, klen, plen = self.start, self.klen, self.plen
        for s in range(len(start)):
            a = start[s]
            if a >= 0 and s != dropped:
                start[s] = len(blob)
                blob += old[a : a + klen[s] + plen[s]]
        if dropped >= 0:
            start[dropped] = -1
        self.blob, self.garbage = blob, 0

    def _rebuild(self, n: int = 0) -> None:
        """The cells rebuilt from the held slots, at most 1/3 full (2/3 with ``n`` keys)."""
        size = 8
        while size < self.count * 3 or size * 2 < n * 3:
            size *= 2
        cells = array("i", [_EMPTY]) * size
        mask, blob, start, klen = size - 1, self.blob, self.start, self.klen
        for s in range(len(start)):
            a = start[s]
            if a >= 0:
                i = crc32(blob[a : a + klen[s]]) & mask
                while cells[i] != _EMPTY:
                    i = (i + 1) & mask
                cells[i] = s
        self.cells, self.filled = cells, self.count


@dataclass
class IndexImage:
    """A :class:`CompactIndex`'s triggers as plain values (what a snapshot stores, see
    :mod:`horae.streams.planner.snapshot`): its slot table's arrays, its columns with the rests
    and plans they use numbered from 0 in ``rests`` and ``plans``, and its sparse maps by slot.
    Due positions are not in it: they follow from ``due``. The partition's tenants, flights and
    pending records are the snapshot's."""

    blob: bytes
    start: array[int]
    klen: array[int]
    plen: array[int]
    cells: array[int]
    free: array[int]
    filled: int
    garbage: int
    rest: array[int]
    plan: array[int]
    version: array[int]
    authored: array[int]
    next: array[int]
    last: array[int]
    fired: array[int]
    due: array[float]
    rests: list[Rest]
    plans: list[Plan]
    paused: dict[int, float]
    applied: dict[int, tuple[AppliedCommand, ...]]
    odd_ids: dict[int, str]


def _renumbered(column: array[int], ids: dict[int, int]) -> array[int]:
    """``column`` with each id ``i >= 0`` written ``ids[i]`` (-1 stays)."""
    get = ids.__getitem__
    return array("i", [get(i) if i >= 0 else -1 for i in column])


class CompactIndex(DueIndex):
    """The ``compact`` representation (see the module docstring).

    Per slot: the trigger's key and payload (a :class:`SlotTable`, which also finds a key's
    slot), and in typed arrays its definition's version and
    authoring time (µs), the ids of its *rest* (tenant, state, target, author, role, content
    type, quotas, description, labels) and of its *plan* (recurrence and policies, with their
    compiled spec and schedule), its next instant, last decided instant, fired count and due
    time; a paused time, applied commands and a trigger id that is
    not its key's are rare and kept in dicts by slot. A part is interned by its strings and the
    identity of its value objects, made the shared ones by the planner's
    :class:`~horae.streams.planner.sharing.SharedValues` as the definition is packed (the decider
    hands a compact index's entries the definition as received, not a shared copy); each part is
    held while a slot uses it, in tables the compact indexes of one planner (one
    :class:`~horae.streams.planner.sharing.SharedValues`) share: a partition's index releases
    its slots' uses when it is removed from memory.

    Due times: far ahead, a dict of hour-wide buckets (arrays of slots and due times) and a heap
    of their numbers; the first is split into 60-second buckets (alike, each bucket's least due
    time kept, and a heap of their numbers) when :meth:`earliest_due` or :meth:`pop_due` reaches
    it, so that due times spread far ahead cost few bucket objects; for the buckets
    :meth:`pop_due` has reached, a sorted list and a heap of ``(due, key, slot)``. Entries got
    or popped are kept (``_hot``) until :meth:`settle` writes them back; a definition is
    decomposed again only if it was replaced."""

    def __init__(
        self,
        partition: int,
        shared: SharedValues | None = None,
        bucket_s: int = BUCKET_S,
        far_s: int = FAR_S,
    ) -> None:
        """``shared``: the planner's shared values, through which the parts of a definition
        packed are shared (the decider's); ``far_s``: a multiple of ``bucket_s``."""
        if far_s % bucket_s:
            raise ValueError(f"far_s {far_s} is not a multiple of bucket_s {bucket_s}")
        super().__init__(partition)
        self._shared = shared or SharedValues()
        self._bucket_s = bucket_s
        self._far_s = far_s
        self._keys = SlotTable()  # each slot's key and payload, each key's slot
        self._rest = array("i")
        self._plan = array("i")
        self._version = array("q")
        self._authored = array("q")  # µs since the epoch
        self._next = array("q")
        self._last = array("q")
        self._fired = array("q")
        self._due = array("d")
        self._paused: dict[int, float] = {}
        self._applied: dict[int, tuple[AppliedCommand, ...]] = {}
        self._odd_ids: dict[int, str] = {}  # trigger ids that are not their key's tail
        parts = _PARTS.get(self._shared)
        if parts is None:
            parts = _PARTS[self._shared] = _Parts()
        self._rests, self._plans = parts.rests, parts.plans
        # the parts this index's slots use are released when the index is gone
        weakref.finalize(self, parts.release_all, self._rest, self._plan).atexit = False
        self._times: dict[int, datetime] = {}  # authoring times built, by µs
        self._hot: dict[str, TriggerEntry] = {}
        self._hot_slots: dict[str, int] = {}  # each hot entry's slot
        self._made: dict[str, TriggerDefinition] = {}  # what each hot entry was built with
        self._buckets: dict[int, tuple[array[int], array[float]]] = {}
        self._lows: dict[int, tuple[float, int]] = {}  # each bucket's least (due, slot)
        self._bucket_heap: list[int] = []
        #: the positions of the buckets :meth:`pop_due` reached: sorted (``_run``, consumed from
        #: ``_at``), and put since (``_near``, a heap)
        self._run: list[tuple[float, str, int]] = []
        self._at = 0
        self._near: list[tuple[float, str, int]] = []
        self._opened = -(2**62)  # buckets up to this one are in ``_run`` or ``_near``
        #: positions in far buckets (``far_s`` wide, numbered past ``_split``), split into
        #: buckets when :meth:`earliest_due` or :meth:`pop_due` reaches them
        self._far: dict[int, tuple[array[int], array[float]]] = {}
        self._far_heap: list[int] = []
        self._split = -(2**62)

    def __len__(self) -> int:
        return len(self._keys)

    def get(self, key: str) -> TriggerEntry | None:
        entry = self._hot.get(key)
        if entry is None:
            slot = self._keys.find(key)
            if slot < 0:
                return None
            entry = self._hot[key] = self._entry(slot, key)
            self._hot_slots[key] = slot
        return entry

    def trigger_keys(self) -> list[str]:
        key_of = self._keys.key
        return [k for s in range(self._keys.size) if (k := key_of(s)) is not None]

    def put(self, key: str, entry: TriggerEntry) -> None:
        slot = self._hot_slots.get(key)
        if slot is None:
            slot = self._hot_slots[key] = self._keys.take(key)
            if slot >= len(self._due):
                self._grow()
        self._hot[key] = entry
        due = entry.due_ts
        if due is None:
            return
        f = int(due // self._far_s)
        if f > self._split:
            far = self._far.get(f)
            if far is None:
                self._far[f] = (array("i", (slot,)), array("d", (due,)))
                heapq.heappush(self._far_heap, f)
            else:
                far[0].append(slot)
                far[1].append(due)
            return
        self._place(slot, due, key)

    def _place(self, slot: int, due: float, key: str | None) -> None:
        """The position ``(due, slot)`` in its bucket (or ``_near``), ``key`` the slot's (None:
        looked up if needed)."""
        m = int(due // self._bucket_s)
        if m <= self._opened:
            heapq.heappush(self._near, (due, key or self._keys.key(slot) or "", slot))
            return
        bucket = self._buckets.get(m)
        if bucket is None:
            self._buckets[m] = (array("i", (slot,)), array("d", (due,)))
            self._lows[m] = (due, slot)
            heapq.heappush(self._bucket_heap, m)
            return
        bucket[0].append(slot)
        bucket[1].append(due)
        if due < self._lows[m][0]:
            self._lows[m] = (due, slot)

    def remove(self, key: str) -> None:
        slot = self._keys.remove(key)
        if slot < 0:
            return
        self._hot.pop(key, None)
        self._hot_slots.pop(key, None)
        self._made.pop(key, None)
        if self._rest[slot] >= 0:
            self._rests.release(self._rest[slot])
            self._plans.release(self._plan[slot])
        self._rest[slot] = self._plan[slot] = -1
        self._due[slot] = _NAN
        for sparse in (self._paused, self._applied, self._odd_ids):
            sparse.pop(slot, None)

    def earliest_due(self) -> float | None:
        while True:
            found = self._earliest_near()
            if found is not None or not self._far_heap:
                return found
            self._split_far(heapq.heappop(self._far_heap))

    def _earliest_near(self) -> float | None:
        """The earliest live position not in a far bucket (earlier than any in one)."""
        live = self._live
        run, near = self._run, self._near
        while self._at < len(run) and not live(run[self._at][2], run[self._at][0]):
            self._at += 1
        while near and not live(near[0][2], near[0][0]):
            heapq.heappop(near)
        if self._at < len(run):
            return run[self._at][0] if not near or run[self._at] < near[0] else near[0][0]
        if near:
            return near[0][0]
        heap = self._bucket_heap
        while heap:
            m = heap[0]
            due, slot = self._lows[m]
            if live(slot, due) or self._prune(m):
                return self._lows[m][0]
            heapq.heappop(heap)
        return None

    def pop_due(self, until: float, limit: int) -> Iterator[tuple[str, TriggerEntry]]:
        far = self._far_heap
        if far and far[0] <= until // self._far_s:
            while far and far[0] <= until // self._far_s:
                self._split_far(heapq.heappop(far))
        last = int(until // self._bucket_s)
        if self._bucket_heap and self._bucket_heap[0] <= last:
            self._open(last)
        run, near, dues, hot, hot_slots = (
            self._run,
            self._near,
            self._due,
            self._hot,
            self._hot_slots,
        )
        key_of = self._keys.key  # a position's slot may have been freed, or taken by another key
        popped: set[int] = set()  # a trigger put twice at one time is yielded once
        taken, at, end = 0, self._at, len(run)
        try:
            while taken < limit:
                if at < end and (not near or run[at] < near[0]):
                    due, _, slot = run[at]
                    if due > until:
                        return
                    at += 1
                elif near:
                    due, _, slot = near[0]
                    if due > until:
                        return
                    heapq.heappop(near)
                else:
                    return
                if slot in popped:
                    continue
                key = key_of(slot)  # the rest is _live, inlined
                if key is None:
                    continue
                entry = hot.get(key)
                if entry is None:
                    if dues[slot] != due:
                        continue
                    entry = hot[key] = self._entry(slot, key)
                    hot_slots[key] = slot
                elif entry.due_ts != due:
                    continue
                popped.add(slot)
                taken += 1
                yield key, entry
        finally:
            self._at = at
            if at == end:  # consumed: let its tuples go
                run.clear()
                self._at = 0

    def reserve(self, n: int) -> None:
        self._keys.reserve(n)

    def settle(self) -> None:
        slots, made = self._hot_slots, self._made
        nxt_col, last_col, fired_col, due_col = self._next, self._last, self._fired, self._due
        paused, applied = self._paused, self._applied
        for key, entry in self._hot.items():
            slot = slots[key]
            if entry.definition is not made.get(key):
                self._pack_definition(slot, key, entry)
            nxt, last, due = entry.next_instant, entry.last_decided, entry.due_ts
            nxt_col[slot] = _NONE if nxt is None else nxt
            last_col[slot] = _NONE if last is None else last
            due_col[slot] = _NAN if due is None else due
            fired_col[slot] = entry.fired
            if entry.paused_since is not None:
                paused[slot] = entry.paused_since
            elif paused:
                paused.pop(slot, None)
            if entry.applied:
                applied[slot] = entry.applied
            elif applied:
                applied.pop(slot, None)
        self._hot.clear()
        slots.clear()
        made.clear()

    # --- snapshots ------------------------------------------------------------------------
    def image(self) -> IndexImage:
        """The triggers held, as plain values (settled: call after :meth:`settle`)."""
        if self._hot:
            raise RuntimeError("image() of an index with entries not settled")
        keys, n = self._keys, self._keys.size
        rest_ids: dict[int, int] = {}
        plan_ids: dict[int, int] = {}
        for i in self._rest[:n]:
            if i >= 0 and i not in rest_ids:
                rest_ids[i] = len(rest_ids)
        for i in self._plan[:n]:
            if i >= 0 and i not in plan_ids:
                plan_ids[i] = len(plan_ids)
        rests, plans = self._rests.values, self._plans.values
        return IndexImage(
            blob=bytes(keys.blob), start=keys.start[:], klen=keys.klen[:], plen=keys.plen[:],
            cells=keys.cells[:], free=array("i", keys.free), filled=keys.filled,
            garbage=keys.garbage, rest=_renumbered(self._rest[:n], rest_ids),
            plan=_renumbered(self._plan[:n], plan_ids), version=self._version[:n],
            authored=self._authored[:n], next=self._next[:n], last=self._last[:n],
            fired=self._fired[:n], due=self._due[:n],
            rests=[rests[i] for i in rest_ids],  # type: ignore[misc]
            plans=[plans[i] for i in plan_ids],  # type: ignore[misc]
            paused=dict(self._paused), applied=dict(self._applied), odd_ids=dict(self._odd_ids),
        )  # fmt: skip

    @classmethod
    def from_image(
        cls, partition: int, image: IndexImage, shared: SharedValues | None = None
    ) -> CompactIndex:
        """The index holding what ``image`` holds (its parts interned with the planner's other
        indexes', through ``shared``); every held trigger is due at its ``due``."""
        index = cls(partition, shared)
        n = len(image.start)
        for column in (image.klen, image.plen, image.rest, image.plan, image.version,
                       image.authored, image.next, image.last, image.fired, image.due):  # fmt: skip
            if len(column) != n:
                raise ValueError(f"an image column of {len(column)} slots, not {n}")
        keys = index._keys
        keys.blob, keys.start, keys.klen, keys.plen = (
            bytearray(image.blob),
            image.start,
            image.klen,
            image.plen,
        )
        keys.cells, keys.free, keys.filled, keys.garbage = (
            image.cells,
            list(image.free),
            image.filled,
            image.garbage,
        )
        keys.count = n - len(image.free)
        rest_ids = {i: index._intern_rest(rest) for i, rest in enumerate(image.rests)}
        plan_ids = {i: index._intern_plan(plan) for i, plan in enumerate(image.plans)}
        index._rest.extend(_renumbered(image.rest, rest_ids))  # the arrays the finalizer holds
        index._plan.extend(_renumbered(image.plan, plan_ids))
        for column, table in ((index._rest, index._rests), (index._plan, index._plans)):
            uses = table.uses
            for i, count in Counter(column).items():
                if i >= 0:
                    uses[i] += count
        index._version, index._authored = image.version, image.authored
        index._next, index._last, index._fired = image.next, image.last, image.fired
        index._due = image.due
        index._paused, index._applied = dict(image.paused), dict(image.applied)
        index._odd_ids = dict(image.odd_ids)
        far_s, far, far_heap = index._far_s, index._far, index._far_heap
        start, due = image.start, image.due
        for s in range(n):
            d = due[s]
            if d == d and start[s] >= 0:  # held and due (NaN: never)
                f = int(d // far_s)
                bucket = far.get(f)
                if bucket is None:
                    far[f] = (array("i", (s,)), array("d", (d,)))
                    far_heap.append(f)
                else:
                    bucket[0].append(s)
                    bucket[1].append(d)
        heapq.heapify(far_heap)
        return index

    # --- slots ----------------------------------------------------------------------------
    def _grow(self) -> None:
        """Room for ``_GROW`` more slots in every column (one call per column, not per slot)."""
        for column in (self._rest, self._plan):
            column.extend(_NO_IDS)
        for column in (self._version, self._authored, self._fired):
            column.extend(_ZEROS)
        for column in (self._next, self._last):
            column.extend(_NONES)
        self._due.extend(_NANS)

    def _pack_definition(self, slot: int, key: str, entry: TriggerEntry) -> None:
        d = entry.definition
        rest = self._intern_rest(
            (d.tenant, d.state, d.target, d.author, d.role, d.content_type, d.quotas,
             d.description, d.labels),
        )  # fmt: skip
        self._rests.uses[rest] += 1
        plan = self._intern_plan((d.recurrence, d.policies, entry.spec, entry.schedule))
        self._plans.uses[plan] += 1
        if self._rest[slot] >= 0:
            self._rests.release(self._rest[slot])
            self._plans.release(self._plan[slot])
        self._rest[slot], self._plan[slot] = rest, plan
        self._version[slot] = d.version
        self._authored[slot] = (d.authored_at - _EPOCH) // _MICROSECOND
        if d.payload or self._keys.plen[slot]:
            self._keys.set_payload(slot, d.payload)
        if len(key) == len(d.tenant) + 1 + len(d.trigger_id) and key.endswith(d.trigger_id):
            self._odd_ids.pop(slot, None)
        else:
            self._odd_ids[slot] = d.trigger_id

    def _intern_rest(self, rest: Rest) -> int:
        """The id of ``rest`` (its target and quotas made the shared ones), interned if new; its
        uses are the caller's to count."""
        tenant, state, target, author, role, ctype, quotas, description, labels = rest
        shared = self._shared
        target, quotas = shared.target(target), shared.share(quotas)
        rests = self._rests
        rest_key = (
            tenant, state, id(target), author, role, ctype, id(quotas), description,
            tuple(labels.items()) if labels else (),
        )  # fmt: skip
        found = rests.ids.get(rest_key)
        if found is not None:
            return found
        return rests.add(
            rest_key,
            (tenant, state, target, author, role, ctype, quotas, description,
             labels or _NO_LABELS),
        )  # fmt: skip

    def _intern_plan(self, plan: Plan) -> int:
        """The id of ``plan`` (its recurrence and policies made the shared ones), interned if
        new; its uses are the caller's to count."""
        recurrence, policies, spec, schedule = plan
        share = self._shared.share
        recurrence, policies = share(recurrence), share(policies)
        plan_key = id(recurrence) << 64 | id(policies)  # one int: a partition holds many plans
        found = self._plans.ids.get(plan_key)
        if found is not None:
            return found
        return self._plans.add(plan_key, (recurrence, policies, spec, schedule))

    def _entry(self, slot: int, key: str) -> TriggerEntry:
        """The entry of ``slot`` built from its columns (its definition remembered in
        ``_made``). Built field by field: a keyword ``__init__`` costs four times as much, and
        this runs once per fire."""
        tenant, state, target, author, role, ctype, quotas, description, labels = (
            self._rests.values[self._rest[slot]]  # type: ignore[misc]
        )
        recurrence, policies, spec, schedule = self._plans.values[self._plan[slot]]  # type: ignore[misc]
        micros = self._authored[slot]
        authored = self._times.get(micros)
        if authored is None:
            if len(self._times) >= 4096:
                self._times.clear()
            authored = self._times[micros] = _EPOCH + timedelta(microseconds=micros)
        odd = self._odd_ids.get(slot) if self._odd_ids else None
        d = self._made[key] = TriggerDefinition(
            tenant, odd if odd is not None else key[len(tenant) + 1 :], self._version[slot],
            state, recurrence, target, authored, author, role, self._keys.payload(slot), ctype,
            policies, quotas, description, labels, None,
        )  # fmt: skip
        nxt, last, due = self._next[slot], self._last[slot], self._due[slot]
        entry: TriggerEntry = _new(TriggerEntry)
        entry.definition, entry.spec, entry.schedule = d, spec, schedule
        entry.next_instant = None if nxt == _NONE else nxt
        entry.due_ts = None if due != due else due
        entry.last_decided = None if last == _NONE else last
        entry.paused_since = self._paused.get(slot) if self._paused else None
        entry.applied = self._applied.get(slot, ()) if self._applied else ()
        entry.fired = self._fired[slot]
        return entry

    # --- due times ------------------------------------------------------------------------
    def _live(self, slot: int, due: float) -> bool:
        """Whether the position ``(due, slot)`` is live: the slot's trigger (its entry if got,
        else its column) says ``due_ts == due``; a freed slot's column says none."""
        if self._hot:
            key = self._keys.key(slot)
            entry = self._hot.get(key) if key is not None else None
            if entry is not None:
                return entry.due_ts == due
        return self._due[slot] == due

    def _split_far(self, f: int) -> None:
        """Far bucket ``f`` (the first one left) split into buckets: its live positions."""
        slots, dues = self._far.pop(f)
        self._split = f
        live, place = self._live, self._place
        for s, d in zip(slots, dues, strict=True):
            if live(s, d):
                place(s, d, None)

    def _prune(self, m: int) -> bool:
        """Drop bucket ``m``'s stale positions; False (and the bucket dropped) if none is left."""
        slots, dues = self._buckets[m]
        live = self._live
        kept = [(s, d) for s, d in zip(slots, dues, strict=True) if live(s, d)]
        if not kept:
            del self._buckets[m], self._lows[m]
            return False
        self._buckets[m] = (array("i", [s for s, _ in kept]), array("d", [d for _, d in kept]))
        self._lows[m] = min((d, s) for s, d in kept)
        return True

    def _open(self, last: int) -> None:
        """Move every bucket up to ``last`` into the sorted run of due positions."""
        heap, key_of, hot, due_col = self._bucket_heap, self._keys.key, self._hot, self._due
        opened = self._run[self._at :]
        while heap and heap[0] <= last:
            m = heapq.heappop(heap)
            slots, dues = self._buckets.pop(m)
            del self._lows[m]
            for s, d in zip(slots, dues, strict=True):  # the live positions (_live, inlined)
                key = key_of(s)
                if key is None:
                    continue
                entry = hot.get(key) if hot else None
                if (due_col[s] if entry is None else entry.due_ts) == d:
                    opened.append((d, key, s))
        opened.sort()
        self._run, self._at = opened, 0
        self._opened = max(self._opened, last)


IndexKind = Literal["compact", "objects"]


class IndexChoice:
    """Which representation :func:`make_index` builds (one per process; the planner process sets
    it from the ``planner.index`` setting; the planner's unit tests run both)."""

    def __init__(self) -> None:
        self.kind: IndexKind = "compact"


INDEX = IndexChoice()


def set_planner_index(kind: IndexKind) -> None:
    """Choose the due index representation of this process's planners (from the setting)."""
    INDEX.kind = kind


def make_index(partition: int, shared: SharedValues | None = None) -> DueIndex:
    """A new, empty due index of ``partition`` in the representation :data:`INDEX` names
    (``shared``: the planner's shared values, see :class:`CompactIndex`)."""
    if INDEX.kind == "compact":
        return CompactIndex(partition, shared)
    return ObjectsIndex(partition)
