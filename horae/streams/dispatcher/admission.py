"""Which ready order is sent next (pure: ``now`` is an argument).

Orders are grouped by *class*, from the lane they came on (a retry or a redrive counts as its
origin lane, ``fire.lane``): ``on_time`` (the on-time and manual lanes), ``catch_up``,
``backfill``. An order is *ready* once ``not_before`` has passed; until then it waits in memory.

When a send slot is free (fewer than ``max_inflight`` sends), the next order is chosen tier by
tier, and within a tier the oldest ``not_before`` across all triggers and tenants goes first:

1. ``on_time`` within the tenant's quota (a token of the tenant's ``rate`` bucket);
2. ``on_time`` over quota (no token left) — only spare capacity, never ahead of tier 1;
3. ``catch_up``: needs a token of the tenant bucket *and* of its catch-up bucket, whose rate is
   ``catchup_share`` of the tenant's quota (a hard cap: catch-up never goes over it);
4. ``backfill``: needs a tenant token, and goes only when nothing else can.

A tenant never has more than its ``inflight`` sends at once (hard). Under overload work is thus
held back (shed) in the published order: backfill, then catch-up, then over-quota, then on-time.
Shed orders are deferred, never dropped: every committed fire is delivered at least once.
Selection costs O(tenants with ready work) per order; each send takes at most two tokens.

Several processes: a tenant's limits (:class:`~.config.TenantLimits`, from its grant) hold for
the whole consumer group. Each process applies its *share* of them, ``owned / total`` lane
partitions (:meth:`Admission.set_share`, called by the pump on every assignment and revocation):
rates are multiplied by the share, the in-flight cap too (rounded down, at least 1). As the
planner spreads a tenant's triggers over the partitions by key, the shares add up to the
tenant's grant; a tenant whose work sits on few partitions gets less than its grant, never more
(the in-flight cap's "at least 1" aside: with more processes than the cap, each still sends one).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum, StrEnum
from typing import Generic, TypeVar

from horae.contracts import events as ev
from horae.streams.dispatcher.config import TenantLimits

T = TypeVar("T")


class LaneClass(StrEnum):
    ON_TIME = "on_time"
    CATCH_UP = "catch_up"
    BACKFILL = "backfill"


class Tier(IntEnum):
    ON_TIME = 1
    OVER_QUOTA = 2
    CATCH_UP = 3
    BACKFILL = 4


def lane_class(order: ev.DispatchOrder) -> LaneClass:
    """The class of an order: its lane, or for a retry its origin lane (``fire.lane``)."""
    lane = order.lane
    if lane is ev.Lane.RETRY:
        lane = order.fire.lane or ev.Lane.ON_TIME
    if lane is ev.Lane.CATCH_UP:
        return LaneClass.CATCH_UP
    if lane is ev.Lane.BACKFILL:
        return LaneClass.BACKFILL
    return LaneClass.ON_TIME  # on_time, manual (and a retry without an origin)


class TokenBucket:
    """``rate`` tokens per second, holding at most ``burst`` (at least one)."""

    __slots__ = ("burst", "rate", "stamp", "tokens")

    def __init__(self, rate: float, now: float) -> None:
        self.stamp = now
        self.tokens = 0.0
        self.set_rate(rate, now)
        self.tokens = self.burst

    def set_rate(self, rate: float, now: float) -> None:
        """A new rate from ``now`` on (tokens held beyond the new burst are dropped)."""
        self._refill(now)
        self.rate = max(rate, 1e-9)
        self.burst = max(1.0, rate)
        self.tokens = min(self.tokens, self.burst)

    def _refill(self, now: float) -> None:
        if now > self.stamp:
            self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
            self.stamp = now

    def has(self, now: float) -> bool:
        self._refill(now)
        return self.tokens >= 1.0

    def take(self) -> None:
        self.tokens -= 1.0

    def wait_s(self, now: float) -> float:
        self._refill(now)
        return max(0.0, (1.0 - self.tokens) / self.rate)


def process_cap(inflight: int, share: float) -> int:
    """This process's part of a tenant's in-flight cap: ``inflight * share`` rounded down, at
    least 1."""
    return max(1, int(inflight * share))


@dataclass(slots=True)
class _Tenant:
    limits: TenantLimits
    bucket: TokenBucket
    catchup: TokenBucket
    cap: int  # this process's part of limits.inflight
    inflight: int = 0
    ready: dict[LaneClass, list[tuple[float, int, object]]] = field(
        default_factory=lambda: {c: [] for c in LaneClass}
    )


class Admission(Generic[T]):
    """Holds orders until they are ready and picks the next one to send (module docstring).

    ``limits``: a tenant's limits over every process; this process applies ``share`` of them
    (1 until :meth:`set_share`)."""

    def __init__(self, limits: Callable[[str], TenantLimits], *, max_inflight: int = 256) -> None:
        self._limits = limits
        self.share = 1.0
        self.max_inflight = max_inflight
        self.inflight = 0
        self._tenants: dict[str, _Tenant] = {}
        self._delayed: list[tuple[float, int, str, LaneClass, T]] = []
        self._seq = itertools.count()
        self.held: dict[LaneClass, int] = dict.fromkeys(LaneClass, 0)

    def _tenant(self, name: str, now: float) -> _Tenant:
        t = self._tenants.get(name)
        if t is None:
            lim = self._limits(name)
            rate = lim.rate * self.share
            t = _Tenant(
                lim,
                TokenBucket(rate, now),
                TokenBucket(rate * lim.catchup_share, now),
                process_cap(lim.inflight, self.share),
            )
            self._tenants[name] = t
        return t

    def set_share(self, share: float, now: float) -> None:
        """This process now owns ``share`` (0..1) of the lane partitions: every tenant's rates
        and in-flight cap become that share of its limits (O(tenants), once per rebalance)."""
        self.share = share
        for t in self._tenants.values():
            rate = t.limits.rate * share
            t.bucket.set_rate(rate, now)
            t.catchup.set_rate(rate * t.limits.catchup_share, now)
            t.cap = process_cap(t.limits.inflight, share)

    def add(self, item: T, tenant: str, klass: LaneClass, not_before: float, now: float) -> None:
        """Hold ``item`` until ``not_before`` (unix seconds)."""
        seq = next(self._seq)
        self.held[klass] += 1
        if not_before > now:
            heapq.heappush(self._delayed, (not_before, seq, tenant, klass, item))
        else:
            heapq.heappush(self._tenant(tenant, now).ready[klass], (not_before, seq, item))

    def _promote(self, now: float) -> None:
        delayed = self._delayed
        while delayed and delayed[0][0] <= now:
            due, seq, tenant, klass, item = heapq.heappop(delayed)
            heapq.heappush(self._tenant(tenant, now).ready[klass], (due, seq, item))

    def pop(self, now: float) -> tuple[T, str, Tier] | None:
        """The next order to send, its tenant and tier, counted as in flight until
        :meth:`release`; None when no slot is free or nothing may go now."""
        self._promote(now)
        if self.inflight >= self.max_inflight:
            return None
        best: tuple[float, int, str, LaneClass, Tier] | None = None
        for tier, klass in (
            (Tier.ON_TIME, LaneClass.ON_TIME),
            (Tier.OVER_QUOTA, LaneClass.ON_TIME),
            (Tier.CATCH_UP, LaneClass.CATCH_UP),
            (Tier.BACKFILL, LaneClass.BACKFILL),
        ):
            for name, t in self._tenants.items():
                heap = t.ready[klass]
                if not heap or t.inflight >= t.cap:
                    continue
                if best is not None and heap[0][:2] >= best[:2]:
                    continue
                if tier is not Tier.OVER_QUOTA and not t.bucket.has(now):
                    continue
                if tier is Tier.CATCH_UP and not t.catchup.has(now):
                    continue
                best = (heap[0][0], heap[0][1], name, klass, tier)
            if best is not None:
                break
        if best is None:
            return None
        _, _, name, klass, tier = best
        t = self._tenants[name]
        _, _, item = heapq.heappop(t.ready[klass])
        if tier is not Tier.OVER_QUOTA:
            t.bucket.take()
        if tier is Tier.CATCH_UP:
            t.catchup.take()
        t.inflight += 1
        self.inflight += 1
        self.held[klass] -= 1
        return item, name, tier  # type: ignore[return-value]

    def release(self, tenant: str) -> None:
        """A send of ``tenant`` (from :meth:`pop`) ended."""
        self._tenants[tenant].inflight -= 1
        self.inflight -= 1

    def wake_in(self, now: float) -> float | None:
        """Seconds until something may become sendable (a delayed order due, a token refilled);
        None when nothing is held. 0 means: call :meth:`pop` now."""
        waits: list[float] = []
        if self._delayed:
            waits.append(max(0.0, self._delayed[0][0] - now))
        for t in self._tenants.values():
            if t.inflight >= t.cap:
                continue
            if t.ready[LaneClass.ON_TIME]:
                waits.append(0.0)
            for klass in (LaneClass.CATCH_UP, LaneClass.BACKFILL):
                if t.ready[klass]:
                    wait = t.bucket.wait_s(now)
                    if klass is LaneClass.CATCH_UP:
                        wait = max(wait, t.catchup.wait_s(now))
                    waits.append(wait)
        return min(waits) if waits else None

    def purge(self, keep: Callable[[T], bool]) -> int:
        """Drop every held (not in-flight) order for which ``keep`` is false; the count."""
        return len(self.take(lambda item: not keep(item)))

    def take(self, drop: Callable[[T], bool], tenant: str | None = None) -> list[T]:
        """Remove and return every held (not in-flight) order for which ``drop`` is true (only
        ``tenant``'s ready ones, when given). O(held orders): for rare events (a rewind, a
        cancel marker), never on the send path."""
        dropped: list[T] = []
        if any(drop(e[4]) for e in self._delayed):
            kept_delayed = []
            for e in self._delayed:
                if drop(e[4]):
                    self.held[e[3]] -= 1
                    dropped.append(e[4])
                else:
                    kept_delayed.append(e)
            heapq.heapify(kept_delayed)
            self._delayed = kept_delayed
        tenants = self._tenants.values() if tenant is None else [self._tenants.get(tenant)]
        for t in tenants:
            if t is None:
                continue
            for klass, heap in t.ready.items():
                gone = [e[2] for e in heap if drop(e[2])]  # type: ignore[arg-type]
                if gone:
                    dropped += gone  # type: ignore[arg-type]
                    self.held[klass] -= len(gone)
                    kept = [e for e in heap if not drop(e[2])]  # type: ignore[arg-type]
                    heapq.heapify(kept)
                    t.ready[klass] = kept
        return dropped

    def __len__(self) -> int:
        return sum(self.held.values())
