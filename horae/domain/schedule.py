"""Compiled schedules: the fast ``next instant after t`` the planner calls for every trigger.

:func:`compile_schedule` turns a recurrence + zone + :class:`~horae.domain.dst.DstPolicy` into a
:class:`Schedule`. Compiled cron schedules are *interned*: every trigger with the same
(expression semantics, zone, DST choices) shares one object (held weakly: it lives as long as a
trigger references it). A cron schedule keeps a window of its next upcoming instants (ints, sorted)
and answers :meth:`Schedule.next_after` with a bisection; the window is regenerated, by walking
matching local days and resolving their wall times through the zone's transitions, when a query
falls outside it. A second window serves queries behind the first (replays, backfills) without
evicting it. ``every`` is arithmetic and ``at`` a bisection, both O(1)/O(log n) with no state.

All instants are ``int`` epoch seconds (:mod:`horae.domain.timefmt`). ``next_after(t)`` is the
first instant strictly after ``t``, or ``None`` when there is none (within :data:`SEARCH_YEARS` for
cron). Every schedule exposes ``tzdata`` (the zone database release it was computed with).
:class:`BoundedSchedule` keeps only the instants of another schedule within ``[start, end]``.
"""

from __future__ import annotations

import threading
import weakref
from bisect import bisect_left, bisect_right
from datetime import date
from typing import Protocol

from horae.domain.cron import CronExpr
from horae.domain.dst import (
    DEFAULT_DST,
    GAP,
    NORMAL,
    REPEAT,
    DstPolicy,
    GapPolicy,
    RepeatPolicy,
    Transition,
    ZoneCalendar,
    resolve_wall,
    zone_calendar,
)
from horae.domain.recurrence import AtSpec, CronSpec, EverySpec, RecurrenceSpec
from horae.domain.timefmt import MAX_EPOCH, MIN_EPOCH
from horae.domain.tzdb import tzdata_version

WINDOW = 64  # at most this many instants per cron schedule window
WINDOW_DAYS = 8  # and no more days ahead than this, unless that would leave the window empty
SEARCH_YEARS = 400  # a full Gregorian cycle: beyond it a cron expression never matches
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_MAX_DAY = MAX_EPOCH // 86400


class Schedule(Protocol):
    """What the planner needs of a compiled recurrence."""

    zone_key: str
    tzdata: str

    def next_after(self, t: int) -> int | None:
        """The first instant strictly after ``t`` (epoch seconds), or ``None``."""
        ...


class EverySchedule:
    """``anchor + k * interval`` for integer ``k >= 0``."""

    __slots__ = ("anchor", "interval", "tzdata", "zone_key")

    def __init__(self, spec: EverySpec, zone_key: str = "UTC") -> None:
        self.interval = spec.interval_s
        self.anchor = spec.anchor
        self.zone_key = zone_key
        self.tzdata = tzdata_version(zone_key)

    def next_after(self, t: int) -> int | None:
        if t < self.anchor:
            return self.anchor
        value = self.anchor + ((t - self.anchor) // self.interval + 1) * self.interval
        return value if value <= MAX_EPOCH else None


class AtSchedule:
    """A fixed sorted set of instants."""

    __slots__ = ("instants", "tzdata", "zone_key")

    def __init__(self, spec: AtSpec, zone_key: str = "UTC") -> None:
        self.instants = spec.instants
        self.zone_key = zone_key
        self.tzdata = tzdata_version(zone_key)

    def next_after(self, t: int) -> int | None:
        i = bisect_right(self.instants, t)
        return self.instants[i] if i < len(self.instants) else None


class BoundedSchedule:
    """The instants of ``inner`` in ``[start, end]`` (both inclusive; ``None``: unbounded)."""

    __slots__ = ("end", "inner", "start", "tzdata", "zone_key")

    def __init__(self, inner: Schedule, start: int | None, end: int | None) -> None:
        self.inner = inner
        self.start = start
        self.end = end
        self.zone_key = inner.zone_key
        self.tzdata = inner.tzdata

    def next_after(self, t: int) -> int | None:
        if self.start is not None and t < self.start:
            t = self.start - 1
        value = self.inner.next_after(t)
        if value is None or (self.end is not None and value > self.end):
            return None
        return value


Window = tuple[int, int, list[int]]  # (lo, end, instants): valid for lo <= t < end


class CronSchedule:
    """A cron expression in a zone with DST choices; shared via :func:`compile_schedule`."""

    __slots__ = (
        "__weakref__",
        "_aux",
        "_both",
        "_shift",
        "_win",
        "cal",
        "dst",
        "expr",
        "fixed",
        "tods",
        "tzdata",
        "zone_key",
    )

    def __init__(self, expr: CronExpr, zone_key: str, dst: DstPolicy = DEFAULT_DST) -> None:
        self.expr = expr
        self.zone_key = zone_key
        self.dst = dst
        self.cal: ZoneCalendar = zone_calendar(zone_key)
        self.tzdata = tzdata_version(zone_key)
        self.tods = expr.times_of_day()
        self.fixed = expr.fixed_time
        self._shift = self.fixed and dst.gap is GapPolicy.SHIFT
        self._both = not self.fixed or dst.repeat is RepeatPolicy.BOTH
        self._win: Window = (1, 0, [])
        self._aux: Window = (1, 0, [])

    def next_after(self, t: int) -> int | None:
        lo, end, times = self._win
        if not lo <= t < end:
            lo, end, times = self._aux
            if not lo <= t < end:
                return self._refill(t)
        i = bisect_right(times, t)
        return times[i] if i < len(times) else None

    def _refill(self, t: int) -> int | None:
        lo0, end0, times0 = self._win
        if t >= lo0:
            # Moving forward: the old window stays as the auxiliary one for triggers lagging
            # behind (the planner's triggers of one schedule sit close to each other).
            times, end = self.generate(t, WINDOW)
            self._aux = self._win
            self._win = (t, end, times)
        else:
            # Behind the window: look twice as far back, so that a spread of cursors costs a
            # logarithmic number of refills, and extend the window if the two meet.
            lo = max(t - (lo0 - t), MIN_EPOCH)
            times, end = self.generate(lo, 2 * WINDOW)
            if end <= t:  # too far behind to bridge: a window just for this query
                lo = t
                times, end = self.generate(t, WINDOW)
            if end >= lo0 and len(times) + len(times0) <= 4 * WINDOW:
                self._win = (lo, max(end, end0), sorted(set(times).union(times0)))
            else:
                self._aux = (lo, end, times)
        i = bisect_right(times, t)
        return times[i] if i < len(times) else None

    def generate(self, after: int, count: int) -> tuple[list[int], int]:
        """Upcoming instants after ``after`` and the end of their validity: every instant in
        ``(after, end]`` is in the list. At most ``count`` instants, and only those of the next
        :data:`WINDOW_DAYS` days when there is at least one. An empty list means the search
        reached :data:`SEARCH_YEARS` (or year 9999) and ``end`` is that limit."""
        expr, cal, tods = self.expr, self.cal, self.tods
        out: list[int] = []
        first_day = after // 86400 - 1
        start = date.fromordinal(max(first_day + _EPOCH_ORDINAL, 1))
        year, month, from_day = start.year, start.month, start.day
        last_day = min(first_day + SEARCH_YEARS * 366, _MAX_DAY)
        span_day = first_day + WINDOW_DAYS
        while True:
            month_day = date(year, month, 1).toordinal() - _EPOCH_ORDINAL
            if month_day > last_day:
                break
            for dom in expr.days_in_month(year, month):
                if dom < from_day:
                    continue
                day = month_day + dom - 1
                if day > last_day:
                    break
                base, trs = cal.local_day(day)
                if out and (len(out) >= count or day > span_day):
                    # Instants before this day's earliest possible one are final.
                    top = base if not trs else max(base, *(tr.after for tr in trs))
                    out = sorted(set(out))
                    final = bisect_left(out, day * 86400 + tods[0] - top)
                    if final >= count:
                        return out[:count], out[count - 1]
                    if final and day > span_day:
                        return out[:final], out[final - 1]
                if trs:
                    self._emit_transition_day(day, base, trs, after, count, out)
                else:
                    origin = day * 86400 - base
                    if origin + tods[-1] > after:
                        i = bisect_right(tods, after - origin)
                        out.extend([origin + tod for tod in tods[i : i + count]])
            from_day = 1
            month += 1
            if month == 13:
                year, month = year + 1, 1
                if year > 9999:
                    break
        out = sorted(set(out))
        if len(out) >= count:
            return out[:count], out[count - 1]
        return out, (last_day - 1) * 86400

    def _emit_transition_day(
        self,
        day: int,
        base: int,
        transitions: tuple[Transition, ...],
        after: int,
        count: int,
        out: list[int],
    ) -> None:
        low = min(base, *(tr.after for tr in transitions))
        settled = max(tr.at + max(tr.before, tr.after) for tr in transitions)
        wall0 = day * 86400
        tods = self.tods
        produced: set[int] = set()
        for index in range(bisect_right(tods, after + low - wall0), len(tods)):
            wall = wall0 + tods[index]
            kind, values = resolve_wall(wall, base, transitions)
            if kind == NORMAL:
                chosen: tuple[int, ...] = values
            elif kind == REPEAT:
                chosen = values if self._both else values[:1]
            elif kind == GAP and self._shift:
                chosen = values
            else:
                chosen = ()
            for value in chosen:
                if value > after and value not in produced:
                    out.append(value)
                    produced.add(value)
            if len(produced) >= count and wall > settled:
                break


_INTERN: weakref.WeakValueDictionary[tuple[object, ...], CronSchedule] = (
    weakref.WeakValueDictionary()
)
_BY_TEXT: weakref.WeakValueDictionary[tuple[str, str, str, str], CronSchedule] = (
    weakref.WeakValueDictionary()
)  # fast path: same text, zone and DST choices
_INTERN_LOCK = threading.Lock()


def compile_schedule(
    recurrence: RecurrenceSpec, zone: str = "UTC", dst: DstPolicy = DEFAULT_DST
) -> CronSchedule | EverySchedule | AtSchedule:
    """The compiled :class:`Schedule` of ``recurrence`` in IANA ``zone`` with DST choices ``dst``.

    Cron schedules are shared per (expression semantics, zone, dst); raises
    :class:`~horae.domain.errors.ValidationError` for an unknown zone.
    """
    if isinstance(recurrence, CronSpec):
        text_key = (recurrence.expr, zone, dst.gap.value, dst.repeat.value)
        found = _BY_TEXT.get(text_key)
        if found is not None:
            return found
        expr = recurrence.parsed
        key = (expr, zone, dst)
        with _INTERN_LOCK:
            found = _INTERN.get(key)
            if found is None:
                found = CronSchedule(expr, zone, dst)
                _INTERN[key] = found
            _BY_TEXT[text_key] = found
            return found
    zone_calendar(zone)  # validates the zone
    if isinstance(recurrence, EverySpec):
        return EverySchedule(recurrence, zone)
    return AtSchedule(recurrence, zone)
