"""Queries over compiled schedules: next N, a window with a limit, what-if, DST explanations.

These are the functions the API's dry-run, the CLI and the planner share:

- :func:`next_instants` ``(schedule, after, count) -> list[int]``;
- :func:`instants_between` ``(schedule, start, end, limit) -> InstantPage`` (``[start, end)``);
- :func:`what_if` ``(a, b, start, end, limit) -> WhatIf``: both specs' instants and the difference;
- :func:`occurrences` ``(schedule, instants) -> list[Occurrence]``: each instant with its zone,
  local offset, tzdata version and DST note (``dst: gap shifted ...``);
- :func:`dst_adjustments` ``(schedule, start, end) -> list[DstAdjustment]``: every wall time the DST
  rules moved or dropped in a window, with its cause, for the history;
- :func:`first_within` ``(schedule, now, years)``: the validation "has an instant in N years".
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from horae.domain.dst import REPEAT, GapPolicy, RepeatPolicy
from horae.domain.errors import ValidationError
from horae.domain.schedule import CronSchedule, Schedule
from horae.domain.timefmt import format_local, format_utc
from horae.domain.tzdb import load_zone

MAX_COUNT = 10_000
MAX_LIMIT = 100_000
MAX_WINDOW_S = 10 * 366 * 86400


def _check_count(value: int, field: str, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
        raise ValidationError(field, value, f"must be an integer 1..{high}")


def next_instants(schedule: Schedule, after: int, count: int) -> list[int]:
    """The first ``count`` instants strictly after ``after`` (fewer if the schedule ends)."""
    _check_count(count, "count", MAX_COUNT)
    out: list[int] = []
    t = after
    while len(out) < count:
        found = schedule.next_after(t)
        if found is None:
            break
        out.append(found)
        t = found
    return out


@dataclass(frozen=True, slots=True)
class InstantPage:
    """Instants of ``[start, end)``; ``truncated`` when ``limit`` cut the list short."""

    instants: tuple[int, ...]
    truncated: bool


def instants_between(schedule: Schedule, start: int, end: int, limit: int) -> InstantPage:
    """All instants in ``[start, end)``, at most ``limit`` of them."""
    _check_count(limit, "limit", MAX_LIMIT)
    if end < start:
        raise ValidationError("end", end, "window end is before its start")
    if end - start > MAX_WINDOW_S:
        raise ValidationError("end", end, f"window longer than {MAX_WINDOW_S // 86400} days")
    out: list[int] = []
    t = schedule.next_after(start - 1)
    while t is not None and t < end:
        if len(out) == limit:
            return InstantPage(tuple(out), True)
        out.append(t)
        t = schedule.next_after(t)
    return InstantPage(tuple(out), False)


@dataclass(frozen=True, slots=True)
class WhatIf:
    """Instants of a current spec ``a`` and a proposed spec ``b`` over one window."""

    a: tuple[int, ...]
    b: tuple[int, ...]
    only_a: tuple[int, ...]  # would no longer fire
    only_b: tuple[int, ...]  # would newly fire
    truncated: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "a": [format_utc(v) for v in self.a],
            "b": [format_utc(v) for v in self.b],
            "only_a": [format_utc(v) for v in self.only_a],
            "only_b": [format_utc(v) for v in self.only_b],
            "truncated": self.truncated,
        }


def what_if(a: Schedule, b: Schedule, start: int, end: int, limit: int) -> WhatIf:
    """Compare two schedules over ``[start, end)`` (each list capped at ``limit``)."""
    page_a = instants_between(a, start, end, limit)
    page_b = instants_between(b, start, end, limit)
    set_a, set_b = set(page_a.instants), set(page_b.instants)
    return WhatIf(
        a=page_a.instants,
        b=page_b.instants,
        only_a=tuple(v for v in page_a.instants if v not in set_b),
        only_b=tuple(v for v in page_b.instants if v not in set_a),
        truncated=page_a.truncated or page_b.truncated,
    )


def first_within(schedule: Schedule, now: int, years: int = 5) -> int | None:
    """The first instant after ``now`` if it is within ``years`` years, else ``None``."""
    first = schedule.next_after(now)
    if first is None or first > now + years * 366 * 86400:
        return None
    return first


@dataclass(frozen=True, slots=True)
class Occurrence:
    """An instant with the facts a tenant needs to understand it."""

    utc: int
    zone: str
    offset_s: int
    tzdata: str
    dst: str | None = None

    @property
    def utc_text(self) -> str:
        return format_utc(self.utc)

    @property
    def local_text(self) -> str:
        return format_local(self.utc, load_zone(self.zone))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "utc": self.utc_text,
            "local": self.local_text,
            "zone": self.zone,
            "tzdata": self.tzdata,
        }
        if self.dst:
            out["dst"] = self.dst
        return out


def _wall_text(wall: int) -> str:
    return (datetime(1970, 1, 1) + timedelta(seconds=wall)).isoformat()


def _matching_walls(schedule: CronSchedule, lo: int, hi: int) -> list[int]:
    """Wall times in ``[lo, hi)`` matching the expression's calendar and time of day."""
    out: list[int] = []
    for day in range(lo // 86400, (hi - 1) // 86400 + 1):
        moment = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(days=day)
        if not schedule.expr.matches_date(moment.year, moment.month, moment.day):
            continue
        out.extend(w for tod in schedule.tods if lo <= (w := day * 86400 + tod) < hi)
    return out


def dst_note(schedule: Schedule, instant: int) -> str | None:
    """Why a cron instant is where it is, if DST moved it; ``None`` otherwise."""
    if not isinstance(schedule, CronSchedule):
        return None
    cal = schedule.cal
    for tr in cal.transitions_in_utc_day(instant // 86400):
        if tr.at == instant and tr.is_gap and schedule.fixed:
            walls = _matching_walls(schedule, tr.at + tr.before, tr.at + tr.after)
            if walls:
                return f"dst: gap shifted ({_wall_text(walls[0])} does not exist)"
    kind, values = cal.resolve(instant + cal.offset_at(instant))
    if kind == REPEAT:
        passes = "first pass" if instant == values[0] else "second pass"
        return f"dst: repeated wall time, {passes}"
    return None


def occurrences(schedule: Schedule, instants: list[int] | tuple[int, ...]) -> list[Occurrence]:
    """Annotate instants of ``schedule`` with offset, tzdata version and DST note."""
    zone = load_zone(schedule.zone_key)
    out = []
    for value in instants:
        offset = datetime.fromtimestamp(value, zone).utcoffset()
        seconds = int(offset.total_seconds()) if offset is not None else 0
        note = dst_note(schedule, value)
        out.append(Occurrence(value, schedule.zone_key, seconds, schedule.tzdata, note))
    return out


@dataclass(frozen=True, slots=True)
class DstAdjustment:
    """A matching wall time that DST moved (``instant`` = where it went) or dropped (``None``)."""

    wall: str
    cause: str
    instant: int | None


def dst_adjustments(schedule: Schedule, start: int, end: int) -> list[DstAdjustment]:
    """Every wall time of a cron schedule that a DST transition in ``[start, end)`` affected."""
    if end - start > MAX_WINDOW_S:
        raise ValidationError("end", end, f"window longer than {MAX_WINDOW_S // 86400} days")
    if not isinstance(schedule, CronSchedule):
        return []
    out: list[DstAdjustment] = []
    fixed = schedule.fixed
    for utc_day in range(start // 86400, (end - 1) // 86400 + 1):
        for tr in schedule.cal.transitions_in_utc_day(utc_day):
            if not start <= tr.at < end:
                continue
            if tr.is_gap:
                for wall in _matching_walls(schedule, tr.at + tr.before, tr.at + tr.after):
                    if fixed and schedule.dst.gap is GapPolicy.SHIFT:
                        out.append(DstAdjustment(_wall_text(wall), "dst: gap shifted", tr.at))
                    elif fixed:
                        out.append(DstAdjustment(_wall_text(wall), "dst: gap skipped", None))
                    else:
                        cause = "dst: gap (wall time does not exist)"
                        out.append(DstAdjustment(_wall_text(wall), cause, None))
            elif fixed and schedule.dst.repeat is RepeatPolicy.FIRST:
                cause = "dst: repeated wall time, second pass not fired"
                for wall in _matching_walls(schedule, tr.at + tr.after, tr.at + tr.before):
                    out.append(DstAdjustment(_wall_text(wall), cause, None))
    return out
