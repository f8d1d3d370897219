"""Zone offsets, transitions and how wall times resolve to instants (DST rules).

A *wall* value is a local clock reading encoded as seconds since 1970-01-01T00:00 *as if* the
clock were UTC (``wall = utc + offset``). A :class:`ZoneCalendar` knows a zone's UTC offsets and
finds its transitions (by bisection over :mod:`zoneinfo`, memoised per UTC day). Any change of
offset counts, whether the zone calls it DST or not: a forward jump makes a *gap* of wall times that
never happen, a backward jump a *repeat* of wall times that happen twice (Europe/Dublin's negative
DST, Casablanca's Ramadan switches and abolished DST in Tehran and Sao Paulo all work alike).

:func:`resolve_wall` classifies a wall time as ``NORMAL`` (one instant), ``REPEAT`` (two or more
instants, earliest first) or ``GAP`` (no instant; the value returned is the transition instant,
i.e. the first instant after the gap).

Default behaviour, as Debian cron (:class:`DstPolicy` ``gap=shift, repeat=first``): a *fixed-time*
job (minute and hour fields not starting with ``*``) whose wall time falls in a gap fires once at
the first instant after the gap; in a repeat it fires once, on the first pass. A job with a
wildcard minute or hour follows real time: nothing in a gap, every pass of a repeat. ``gap=skip``
drops gap times of fixed-time jobs; ``repeat=both`` fires fixed-time jobs on every pass.

Assumption: no zone changes its offset twice within one UTC day with no net change (true of every
zone since 1970); such a pair would go unnoticed.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from horae.domain.errors import ValidationError
from horae.domain.timefmt import MAX_EPOCH, MIN_EPOCH
from horae.domain.tzdb import load_zone

NORMAL = 0
REPEAT = 1
GAP = 2


class GapPolicy(StrEnum):
    SHIFT = "shift"
    SKIP = "skip"


class RepeatPolicy(StrEnum):
    FIRST = "first"
    BOTH = "both"


def enum_value(enum: type[StrEnum], value: Any, field: str) -> Any:
    """``enum(value)`` or a :class:`ValidationError` listing the choices."""
    try:
        return enum(value)
    except ValueError:
        choices = "|".join(member.value for member in enum)
        raise ValidationError(field, value, f"expected one of {choices}") from None


@dataclass(frozen=True, slots=True)
class DstPolicy:
    """DST choices for fixed-time cron jobs (ignored for wildcard jobs, ``every`` and ``at``)."""

    gap: GapPolicy = GapPolicy.SHIFT
    repeat: RepeatPolicy = RepeatPolicy.FIRST

    def to_dict(self) -> dict[str, Any]:
        return {"gap": self.gap.value, "repeat": self.repeat.value}

    @classmethod
    def from_dict(cls, data: Any) -> DstPolicy:
        from horae.domain.serialization import check_keys

        data = check_keys(data, {"gap", "repeat"}, "dst")
        return cls(
            gap=enum_value(GapPolicy, data.get("gap", "shift"), "dst.gap"),
            repeat=enum_value(RepeatPolicy, data.get("repeat", "first"), "dst.repeat"),
        )


DEFAULT_DST = DstPolicy()


@dataclass(frozen=True, slots=True)
class Transition:
    """The offset changes from ``before`` to ``after`` seconds at instant ``at``."""

    at: int
    before: int
    after: int

    @property
    def is_gap(self) -> bool:
        return self.after > self.before


DayInfo = tuple[int, tuple[Transition, ...]]


class ZoneCalendar:
    """Offsets and transitions of one zone; obtain shared instances with :func:`zone_calendar`."""

    __slots__ = ("_days", "_local", "_offsets", "key", "zone")

    def __init__(self, key: str) -> None:
        self.key = key
        self.zone = load_zone(key)
        self._offsets: dict[int, int] = {}
        self._days: dict[int, tuple[Transition, ...]] = {}
        self._local: dict[int, DayInfo] = {}

    def offset_at(self, instant: int) -> int:
        """UTC offset in seconds at ``instant``."""
        instant = min(max(instant, MIN_EPOCH), MAX_EPOCH)
        offset = datetime.fromtimestamp(instant, self.zone).utcoffset()
        assert offset is not None
        return offset.days * 86400 + offset.seconds

    def _boundary_offset(self, utc_day: int) -> int:
        offset = self._offsets.get(utc_day)
        if offset is None:
            offset = self._offsets[utc_day] = self.offset_at(utc_day * 86400)
        return offset

    def _find(self, lo: int, hi: int, off_lo: int, off_hi: int) -> list[Transition]:
        if off_lo == off_hi:
            return []
        # invariant: offset(lo) == off_lo, offset(hi) != off_lo
        a, b = lo, hi
        while b - a > 1:
            mid = (a + b) // 2
            if self.offset_at(mid) == off_lo:
                a = mid
            else:
                b = mid
        after = self.offset_at(b)
        return [Transition(b, off_lo, after), *self._find(b, hi, after, off_hi)]

    def transitions_in_utc_day(self, utc_day: int) -> tuple[Transition, ...]:
        found = self._days.get(utc_day)
        if found is None:
            lo, hi = utc_day * 86400, (utc_day + 1) * 86400
            start, end = self._boundary_offset(utc_day), self._boundary_offset(utc_day + 1)
            found = tuple(self._find(lo, hi, start, end))
            if len(self._days) > 200_000:
                self._days.clear()
            self._days[utc_day] = found
        return found

    def local_day(self, wall_day: int) -> DayInfo:
        """For wall day ``wall_day`` (days since 1970-01-01 on the local calendar): the offset in
        force just before, and every transition that can affect a wall time of that day."""
        info = self._local.get(wall_day)
        if info is None:
            trs = (
                self.transitions_in_utc_day(wall_day - 1)
                + self.transitions_in_utc_day(wall_day)
                + self.transitions_in_utc_day(wall_day + 1)
            )
            info = (self._boundary_offset(wall_day - 1), trs)
            if len(self._local) > 200_000:
                self._local.clear()
            self._local[wall_day] = info
        return info

    def resolve(self, wall: int) -> tuple[int, tuple[int, ...]]:
        """:func:`resolve_wall` for ``wall`` in this zone."""
        base, trs = self.local_day(wall // 86400)
        return resolve_wall(wall, base, trs)


def resolve_wall(wall: int, base: int, trs: tuple[Transition, ...]) -> tuple[int, tuple[int, ...]]:
    """Classify wall time ``wall`` given the offset ``base`` before transitions ``trs``.

    Returns ``(NORMAL, (utc,))``, ``(REPEAT, (utc_first, utc_second, ...))`` or
    ``(GAP, (transition_instant,))``.
    """
    found: list[int] = []
    offset = base
    start: int | None = None
    for tr in trs:
        utc = wall - offset
        if (start is None or utc >= start) and utc < tr.at:
            found.append(utc)
        start, offset = tr.at, tr.after
    utc = wall - offset
    if start is None or utc >= start:
        found.append(utc)
    if len(found) == 1:
        return NORMAL, (found[0],)
    if found:
        return REPEAT, tuple(found)
    for tr in trs:
        if tr.is_gap and tr.at + tr.before <= wall < tr.at + tr.after:
            return GAP, (tr.at,)
    raise AssertionError(f"wall time {wall} neither exists nor falls in a gap")  # pragma: no cover


@functools.lru_cache(maxsize=1024)
def zone_calendar(key: str) -> ZoneCalendar:
    """The shared :class:`ZoneCalendar` of zone ``key``; :class:`ValidationError` if unknown."""
    return ZoneCalendar(key)
