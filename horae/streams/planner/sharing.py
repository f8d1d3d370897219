"""Value sharing for the planner's due indexes: one :class:`SharedValues` per planner (the
:class:`~horae.streams.planner.decide.Decider` owns it; a planner process passes one in).

Many triggers share a tenant, a recurrence, policies, quotas, a target: the index keeps one copy
of each equal value object (frozen, hashable; a target, which is not hashable, by its URL), so a
trigger's footprint is mostly what is its own (ids, payload). The compiled domain spec and
schedule are a function of the recurrence and the policies only, so they are computed once per
distinct pair.

Every table is bounded by two generations (:class:`Generations`): lookups hit the young one;
a hit in the old one moves the entry to the young one; when the young one is full, the old one is
dropped (its entries are counted as evictions) and the young one becomes old. So the entries used
since the last turn survive, as in an LRU, at the cost of a plain ``dict`` lookup per hit. An
evicted value is still held by the definitions that share it; a later equal value simply becomes
a new shared copy. :meth:`SharedValues.stats` counts hits, misses, size and evictions (the planner
exports them as metrics).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from horae.contracts import events as ev
from horae.contracts.domain_map import trigger_spec
from horae.domain.schedule import Schedule
from horae.domain.trigger import TriggerSpec
from horae.ports import SYSTEM_ZONES, ZoneSource

K = TypeVar("K")
V = TypeVar("V")
T = TypeVar("T")

DEFAULT_LIMIT = 1_000_000  # entries per generation of each table
_NO_LABELS: dict[str, str] = {}  # held definitions are frozen: one empty mapping serves all


class Generations(Generic[K, V]):
    """A map bounded to ``2 × limit`` entries that forgets the least recently used ones in bulk
    (see the module docstring). ``young`` may be read directly (it stays the same dict object:
    a turn copies it to ``old`` and empties it): a hit there is a hit."""

    __slots__ = ("evictions", "limit", "old", "young")

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"limit {limit} < 1")
        self.limit = limit
        self.young: dict[K, V] = {}
        self.old: dict[K, V] = {}
        self.evictions = 0

    def get(self, key: K) -> V | None:
        found = self.young.get(key)
        if found is None:
            found = self.old.pop(key, None)
            if found is not None:
                self.put(key, found)
        return found

    def put(self, key: K, value: V) -> None:
        if len(self.young) >= self.limit:
            self.evictions += len(self.old)
            self.old = self.young.copy()
            self.young.clear()
        self.young[key] = value

    def __len__(self) -> int:
        return len(self.young) + len(self.old)


@dataclass(frozen=True, slots=True)
class SharingStats:
    hits: int
    misses: int
    size: int
    evictions: int


class SharedValues:
    """The planner's shared value objects and compiled schedules (see the module docstring)."""

    def __init__(self, limit: int = DEFAULT_LIMIT, zones: ZoneSource = SYSTEM_ZONES) -> None:
        """``zones``: the time-zone database schedules are compiled with."""
        self.zones = zones
        self._values: Generations[object, object] = Generations(limit)
        self._ids: Generations[int, object] = Generations(limit)  # the shared copies, by id
        self._targets: Generations[str | None, ev.Target] = Generations(limit)
        self._compiled: Generations[
            tuple[ev.Recurrence, ev.Policies], tuple[TriggerSpec, Schedule]
        ] = Generations(limit)
        self._lookups = 0  # counted per definition, not per value: hits = lookups - misses
        self._misses = 0

    def share(self, value: T) -> T:
        """The shared copy of ``value`` (``value`` itself the first time it is seen). Values
        the decoder already interned are recognised by identity, without hashing."""
        if self._ids.young.get(id(value)) is value:
            return value
        return self._share_slow(value)

    def _share_slow(self, value: T) -> T:
        """:meth:`share` past its first look (``index_copy`` inlines that look)."""
        found = self._values.young.get(value)
        if found is None:
            found = self._values.get(value)
            if found is None:
                self._misses += 1
                self._values.put(value, value)
                found = value
            self._ids.put(id(found), found)  # holds it: its id stays its own
        return found  # type: ignore[return-value]

    def target(self, t: ev.Target) -> ev.Target:
        """An equal target already held, if the last one kept at its URL (or topic) is equal (a
        target is not hashable: it has a headers mapping); keyed by a string the target holds
        anyway, so a trigger with a URL of its own costs one slot, not a key object."""
        where = t.url if t.url is not None else t.topic
        found = self._targets.get(where)
        if found is not None and (found is t or found == t):
            return found
        self._misses += 1
        if found is None:
            self._targets.put(where, t)
        return t

    def index_copy(self, d: ev.TriggerDefinition) -> ev.TriggerDefinition:
        """The definition as the index holds it: shared value objects and strings, no signature
        (it was verified at ingress; the ledger never needs it again). Built directly, not
        through ``dataclasses.replace`` (which costs ~4 µs more per trigger at a cold start).
        The look by identity is inlined: this runs once per trigger at a cold start."""
        ids, share = self._ids.young, self._share_slow
        self._lookups += 7
        tenant, author, content_type = d.tenant, d.author, d.content_type
        recurrence, policies, quotas, target = d.recurrence, d.policies, d.quotas, d.target
        where = target.url if target.url is not None else target.topic
        found = self._targets.young.get(where)
        return ev.TriggerDefinition(
            tenant=tenant if ids.get(id(tenant)) is tenant else share(tenant),
            trigger_id=d.trigger_id,
            version=d.version,
            state=d.state,
            recurrence=recurrence if ids.get(id(recurrence)) is recurrence else share(recurrence),
            target=found if found is target else self.target(target),
            authored_at=d.authored_at,
            author=author if ids.get(id(author)) is author else share(author),
            role=d.role,
            payload=d.payload,
            content_type=(
                content_type if ids.get(id(content_type)) is content_type else share(content_type)
            ),
            policies=policies if ids.get(id(policies)) is policies else share(policies),
            quotas=quotas if ids.get(id(quotas)) is quotas else share(quotas),
            description=d.description,
            labels=d.labels or _NO_LABELS,
            signature=None,
        )

    def compiled(self, d: ev.TriggerDefinition) -> tuple[TriggerSpec, Schedule]:
        """The domain spec of a definition and its (shared) compiled schedule; raises
        ValidationError. The API's dry-run goes through the same :func:`trigger_spec`."""
        key = (d.recurrence, d.policies)
        self._lookups += 1
        found = self._compiled.young.get(key)
        if found is None:
            found = self._compiled.get(key)
        if found is None:
            self._misses += 1
            self._lookups += 1  # the spec's own sharing
            spec = self.share(trigger_spec(d))
            found = (spec, self.zones.schedule(spec))
            self._compiled.put(key, found)
        return found

    def stats(self) -> SharingStats:
        tables = (self._values, self._targets, self._compiled)
        return SharingStats(
            hits=self._lookups - self._misses,
            misses=self._misses,
            size=sum(len(t) for t in tables),
            evictions=sum(t.evictions for t in (*tables, self._ids)),
        )
