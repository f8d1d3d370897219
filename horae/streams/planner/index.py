"""The due index of one owned partition: every trigger's next due time, cheapest first.

A binary heap of ``(due_ts, trigger_key)`` with lazy deletion: an entry whose trigger has a
different ``due_ts`` (rescheduled, paused, deleted) is dropped when it surfaces. Times are epoch
seconds (floats) to keep the per-trigger footprint small.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from dataclasses import dataclass

from horae.contracts.events import AppliedCommand, Lane, TriggerDefinition
from horae.domain.schedule import Schedule
from horae.domain.trigger import TriggerSpec
from horae.ports import Emit


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


class DueIndex:
    """Triggers of one partition, indexed by due time."""

    def __init__(self, partition: int) -> None:
        self.partition = partition
        self.entries: dict[str, TriggerEntry] = {}
        self.tenants: dict[str, TenantEntry] = {}  # tenants with a tenant-wide command
        #: records the rebuild owes the log (an undecodable state's cause), committed next
        self.pending: list[Emit] = []
        #: triggers with a fire in flight (overlap policies other than ``allow`` only)
        self.flights: dict[str, Flight] = {}
        #: the running fires' keys (UTF-8, as outcome records are keyed) -> their trigger key
        self.running: dict[bytes, str] = {}
        self._heap: list[tuple[float, str]] = []

    def __len__(self) -> int:
        return len(self.entries)

    def put(self, key: str, entry: TriggerEntry) -> None:
        self.entries[key] = entry
        if entry.due_ts is not None:
            heapq.heappush(self._heap, (entry.due_ts, key))

    def remove(self, key: str) -> None:
        self.entries.pop(key, None)

    def earliest_due(self) -> float | None:
        """The earliest live due time (drops stale heap entries on the way)."""
        heap = self._heap
        while heap:
            due, key = heap[0]
            entry = self.entries.get(key)
            if entry is not None and entry.due_ts == due:
                return due
            heapq.heappop(heap)
        return None

    def pop_due(self, until: float, limit: int) -> Iterator[tuple[str, TriggerEntry]]:
        """Yield (and unindex) up to ``limit`` triggers due at or before ``until``. The caller
        must :meth:`put` each back with its new due time."""
        heap = self._heap
        taken = 0
        while heap and taken < limit:
            due, key = heap[0]
            if due > until:
                return
            heapq.heappop(heap)
            entry = self.entries.get(key)
            if entry is None or entry.due_ts != due:
                continue
            taken += 1
            yield key, entry
