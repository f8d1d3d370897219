"""Misfire evaluation: what happens to instants that were due while nobody decided them.

:func:`evaluate_misfire` ``(schedule, last_decided, now, policy, horizon_s, paused=(),
max_records=1000, jitter_ms=0, jitter_key="") -> MisfireOutcome`` classifies every instant in
``(last_decided, now]``:

1. inside a ``paused`` interval ``[start, end)`` -> not fired, cause ``paused``;
2. at most ``policy.grace_s`` late -> fires on time;
3. more than ``horizon_s`` late -> not fired, cause ``expired: past horizon``;
4. otherwise *missed*, handled by the policy:

   - ``fire_once`` (default): the latest missed instant fires (late) unless an on-time instant
     fires in the same evaluation; every other missed instant is ``skipped: misfire policy``;
   - ``fire_all``: the latest ``max_fires`` missed instants fire, in order; earlier ones are
     ``skipped: misfire policy``;
   - ``skip``: every missed instant is ``skipped: misfire policy``.

The planner calls it on every tick *and* on a cold start after any outage: one path, so it neither
floods nor silently skips. At most ``max_records`` individual non-fire records are returned; the
rest is summarised in :class:`Omitted` ranges (``paused`` and ``expired`` ranges are exact: every
instant of the schedule in ``[start, end)`` had that cause; ``skipped`` ranges carry an exact
count). All times are epoch seconds; ``decided_through`` is the planner's new cursor.

Jitter: with ``jitter_ms > 0`` an instant ``t`` is due at ``t + offset`` where ``offset`` is
:func:`horae.domain.jitter.jitter_offset` ``(jitter_key, t, jitter_ms, next instant)``. Lateness
counts from that jittered due time: an instant fires on time while ``now`` is at most ``grace_s``
after ``t + offset`` — the grace stretches with the jitter, the jitter is not capped by the grace.
An on-time :class:`Fire` carries its ``jitter_ms``; a catch-up fire has none (it fires now). The
offset stays below the next instant, so jittered due times keep the instants' order.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from horae.domain.dst import enum_value
from horae.domain.errors import ValidationError
from horae.domain.jitter import jitter_offset
from horae.domain.schedule import Schedule
from horae.domain.serialization import check_keys, get_int
from horae.domain.timefmt import format_utc

CAUSE_PAUSED = "paused"
CAUSE_EXPIRED = "expired: past horizon"
CAUSE_SKIPPED = "skipped: misfire policy"
MAX_FIRES_LIMIT = 10_000
MAX_GRACE_S = 86400
MAX_HORIZON_S = 366 * 86400


class MisfireKind(StrEnum):
    FIRE_ONCE = "fire_once"
    FIRE_ALL = "fire_all"
    SKIP = "skip"


@dataclass(frozen=True, slots=True)
class MisfirePolicy:
    """How missed instants are handled; ``max_fires`` bounds ``fire_all``."""

    kind: MisfireKind = MisfireKind.FIRE_ONCE
    max_fires: int = 10
    grace_s: int = 60

    def __post_init__(self) -> None:
        enum_value(MisfireKind, self.kind, "misfire.policy")
        for name, high in (("max_fires", MAX_FIRES_LIMIT), ("grace_s", MAX_GRACE_S)):
            value = getattr(self, name)
            low = 1 if name == "max_fires" else 0
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise ValidationError(f"misfire.{name}", value, f"out of range {low}..{high}")

    def to_dict(self) -> dict[str, Any]:
        return {"policy": self.kind.value, "max_fires": self.max_fires, "grace_s": self.grace_s}

    @classmethod
    def from_dict(cls, data: Any) -> MisfirePolicy:
        body = check_keys(data, {"policy", "max_fires", "grace_s"}, "misfire")
        return cls(
            kind=enum_value(MisfireKind, body.get("policy", "fire_once"), "misfire.policy"),
            max_fires=get_int(body, "max_fires", 10, "misfire", 1, MAX_FIRES_LIMIT),
            grace_s=get_int(body, "grace_s", 60, "misfire", 0, MAX_GRACE_S),
        )


@dataclass(frozen=True, slots=True)
class Fire:
    """An instant to fire now; ``late_s`` after its (jittered) due time, never negative."""

    scheduled: int
    late_s: int
    catch_up: bool  # True when it fires because of the misfire policy (late)
    jitter_ms: int = 0  # its jitter offset (on-time fires only)


@dataclass(frozen=True, slots=True)
class NotFired:
    scheduled: int
    cause: str
    detail: str = ""


@dataclass(frozen=True, slots=True)
class Omitted:
    """Instants in ``[start, end)`` with ``cause``, not listed one by one (``count`` if known)."""

    cause: str
    start: int
    end: int
    count: int | None


@dataclass(frozen=True, slots=True)
class MisfireOutcome:
    fires: tuple[Fire, ...]
    not_fired: tuple[NotFired, ...]
    omitted: tuple[Omitted, ...]
    decided_through: int


class _Records:
    def __init__(self, limit: int) -> None:
        self.left = limit
        self.items: list[NotFired] = []
        self.omitted: list[Omitted] = []

    def add(self, item: NotFired) -> bool:
        if self.left <= 0:
            return False
        self.left -= 1
        self.items.append(item)
        return True


def _segments(
    lo: int,
    hi: int,
    now: int,
    grace_s: int,
    horizon_s: int,
    paused: tuple[tuple[int, int], ...],
) -> list[tuple[int, int, str]]:
    """Split ``(lo, hi]`` (as half-open ``[lo+1, hi+1)``) into runs of one class."""
    cuts = {lo + 1, hi + 1, now - grace_s, now - horizon_s}
    for start, end in paused:
        cuts.update((start, end))
    points = sorted(c for c in cuts if lo + 1 <= c <= hi + 1)
    out = []
    for a, b in itertools.pairwise(points):
        if any(s <= a < e for s, e in paused):
            kind = CAUSE_PAUSED
        elif a >= now - grace_s:
            kind = "on_time"
        elif a < now - horizon_s:
            kind = CAUSE_EXPIRED
        else:
            kind = "missed"
        out.append((a, b, kind))
    return out


def evaluate_misfire(
    schedule: Schedule,
    last_decided: int,
    now: int,
    policy: MisfirePolicy = MisfirePolicy(),
    horizon_s: int = 86400,
    paused: tuple[tuple[int, int], ...] | list[tuple[int, int]] = (),
    max_records: int = 1000,
    jitter_ms: int = 0,
    jitter_key: str = "",
) -> MisfireOutcome:
    """Decide the instants in ``(last_decided, now]``; see the module docstring."""
    if isinstance(horizon_s, bool) or not 0 <= horizon_s <= MAX_HORIZON_S:
        raise ValidationError("horizon_s", horizon_s, f"out of range 0..{MAX_HORIZON_S}")
    if now <= last_decided:
        return MisfireOutcome((), (), (), last_decided)
    grace = policy.grace_s
    if not paused:  # the common tick: at most one instant, on time (same result, less work)
        first = schedule.next_after(last_decided)
        if first is None or first > now:
            return MisfireOutcome((), (), (), now)
        if first >= now - grace - jitter_ms // 1000:
            second = schedule.next_after(first)
            if second is None or second > now:
                if not jitter_ms:
                    return MisfireOutcome((Fire(first, now - first, False),), (), (), now)
                jitter = jitter_offset(jitter_key, first, jitter_ms, second)
                late_ms = (now - first) * 1000 - jitter
                if late_ms <= grace * 1000:
                    fire = Fire(first, max(0, late_ms // 1000), False, jitter)
                    return MisfireOutcome((fire,), (), (), now)

    def offset(t: int) -> int:
        return jitter_offset(jitter_key, t, jitter_ms, schedule.next_after(t)) if jitter_ms else 0

    records = _Records(max_records)
    on_time: list[tuple[int, int]] = []  # (instant, jitter offset)
    missed: list[int] = []
    stretch = -(-jitter_ms // 1000)  # the on-time segment widened by the largest offset
    segments = _segments(last_decided, now, now, grace + stretch, horizon_s, tuple(paused))
    for start, end, kind in segments:
        t = schedule.next_after(start - 1)
        while t is not None and t < end:
            jitter = offset(t) if kind == "on_time" else 0
            if kind == "on_time" and (now - t) * 1000 - jitter <= grace * 1000:
                on_time.append((t, jitter))
            elif kind == "on_time" and t < now - horizon_s:  # only in the widened part
                if not records.add(NotFired(t, CAUSE_EXPIRED)):
                    records.omitted.append(Omitted(CAUSE_EXPIRED, t, t + 1, None))
            elif kind in ("on_time", "missed"):
                missed.append(t)
            elif not records.add(NotFired(t, kind)):
                records.omitted.append(Omitted(kind, t, end, None))
                break
            t = schedule.next_after(t)
    if policy.kind is MisfireKind.FIRE_ALL:
        firing = missed[-policy.max_fires :]
        detail = f"fire_all: beyond max_fires {policy.max_fires}"
    elif policy.kind is MisfireKind.FIRE_ONCE and missed and not on_time:
        firing = missed[-1:]
        detail = f"fire_once: coalesced into {format_utc(firing[0])}"
    else:
        firing = []
        detail = (
            "fire_once: an on-time fire supersedes it"
            if policy.kind is MisfireKind.FIRE_ONCE
            else "skip"
        )
    skipped = missed[: len(missed) - len(firing)]
    for index, t in enumerate(skipped):
        if not records.add(NotFired(t, CAUSE_SKIPPED, detail)):
            rest = skipped[index:]
            records.omitted.append(Omitted(CAUSE_SKIPPED, rest[0], rest[-1] + 1, len(rest)))
            break
    fires = [Fire(t, now - t, True) for t in firing] + [
        Fire(t, max(0, ((now - t) * 1000 - jitter) // 1000), False, jitter) for t, jitter in on_time
    ]
    return MisfireOutcome(
        fires=tuple(sorted(fires, key=lambda f: f.scheduled)),
        not_fired=tuple(sorted(records.items, key=lambda r: r.scheduled)),
        omitted=tuple(records.omitted),
        decided_through=now,
    )
