"""Cron expressions: parsing (Vixie syntax) and calendar matching.

Syntax accepted by :func:`parse_cron`:

- 5 fields ``minute hour day-of-month month day-of-week``, or 6 fields with a leading
  ``second`` field (``second minute hour day-of-month month day-of-week``, as Quartz/Spring);
- per field a comma-separated list of terms: ``*``, ``N``, ``A-B``, ``*/S``, ``A-B/S`` and,
  as an extension most crons accept, ``A/S`` (= ``A-max/S``);
- names ``JAN``..``DEC`` (month) and ``SUN``..``SAT`` (day of week), case-insensitive, also in
  ranges; day of week 0 and 7 are both Sunday;
- macros ``@yearly @annually @monthly @weekly @daily @midnight @hourly``;
- the Vixie day rule: when *both* the day-of-month and day-of-week fields are restricted (neither
  starts with ``*``) a day matches if *either* matches; otherwise both must match. (``*/2`` starts
  with ``*``: it makes the rule AND, exactly as in Vixie/Debian cron.)

A job is *fixed-time* when neither its minute nor its hour field starts with ``*``; only fixed-time
jobs get the Debian DST treatment (see :mod:`horae.domain.dst`).

Not accepted (each with a precise :class:`~horae.domain.errors.ValidationError`): ``@reboot``,
Quartz ``? L W #``, values out of range, empty terms, zero steps, reversed ranges.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from horae.domain.errors import ValidationError

MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
MONTH_NAMES = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
DOW_NAMES = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
MAX_EXPR_LENGTH = 512

# (name, low, high, names, first name value)
_FIELDS: tuple[tuple[str, int, int, tuple[str, ...], int], ...] = (
    ("second", 0, 59, (), 0),
    ("minute", 0, 59, (), 0),
    ("hour", 0, 23, (), 0),
    ("day_of_month", 1, 31, (), 0),
    ("month", 1, 12, MONTH_NAMES, 1),
    ("day_of_week", 0, 7, DOW_NAMES, 0),
)


@dataclass(frozen=True, slots=True)
class CronExpr:
    """A parsed cron expression. Equality is semantic (the sets), not textual."""

    seconds: tuple[int, ...]
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days_of_month: tuple[int, ...]
    months: tuple[int, ...]
    days_of_week: tuple[int, ...]  # 0 = Sunday .. 6 = Saturday
    day_and: bool  # True: dom AND dow must match; False (both restricted): dom OR dow
    fixed_time: bool  # minute and hour fields both not starting with '*'
    text: str = field(compare=False, default="")

    @property
    def has_seconds(self) -> bool:
        return self.seconds != (0,)

    def times_of_day(self) -> tuple[int, ...]:
        """Sorted seconds after local midnight at which the job fires on a matching day."""
        return _times_of_day(self.hours, self.minutes, self.seconds)

    def days_in_month(self, year: int, month: int) -> tuple[int, ...]:
        """Days of ``month`` of ``year`` that match (empty if the month does not)."""
        if month not in self.months:
            return ()
        return _matching_days(self.days_of_month, self.days_of_week, self.day_and, year, month)

    def matches_date(self, year: int, month: int, day: int) -> bool:
        return day in self.days_in_month(year, month)

    def matches_time(self, hour: int, minute: int, second: int = 0) -> bool:
        return hour in self.hours and minute in self.minutes and second in self.seconds


@functools.lru_cache(maxsize=4096)
def _times_of_day(
    hours: tuple[int, ...], minutes: tuple[int, ...], seconds: tuple[int, ...]
) -> tuple[int, ...]:
    return tuple(h * 3600 + m * 60 + s for h in hours for m in minutes for s in seconds)


_DAYS = (0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def month_length(year: int, month: int) -> int:
    if month == 2 and year % 4 == 0 and (year % 100 != 0 or year % 400 == 0):
        return 29
    return _DAYS[month]


def _ordinal(year: int, month: int, day: int) -> int:
    """Proleptic Gregorian ordinal, as :meth:`datetime.date.toordinal`."""
    y = year - 1
    days_before_year = y * 365 + y // 4 - y // 100 + y // 400
    days_before_month = sum(month_length(year, m) for m in range(1, month))
    return days_before_year + days_before_month + day


@functools.lru_cache(maxsize=65536)
def _matching_days(
    doms: tuple[int, ...], dows: tuple[int, ...], day_and: bool, year: int, month: int
) -> tuple[int, ...]:
    length = month_length(year, month)
    first_dow = _ordinal(year, month, 1) % 7  # cron numbering: 0 = Sunday
    dom_set = frozenset(doms)
    dow_set = frozenset(dows)
    out = []
    for day in range(1, length + 1):
        dom_ok = day in dom_set
        dow_ok = (first_dow + day - 1) % 7 in dow_set
        if (dom_ok and dow_ok) if day_and else (dom_ok or dow_ok):
            out.append(day)
    return tuple(out)


def _value(token: str, index: int) -> int:
    name, low, high, names, first = _FIELDS[index]
    upper = token.upper()
    if names and upper in names:
        return names.index(upper) + first
    if upper in ("L", "W", "LW") or (token[:-1].isdigit() and upper[-1:] in ("L", "W")):
        raise ValidationError(name, token, f"'{upper[-1]}' is not supported (Vixie cron syntax)")
    if not token.isdigit() or not token.isascii():
        hint = f" or a name {names[0]}..{names[-1]}" if names else ""
        raise ValidationError(name, token, f"expected a number {low}-{high}{hint}")
    value = int(token)
    if not low <= value <= high:
        raise ValidationError(name, token, f"value {value} out of range {low}-{high}")
    return value


def _parse_field(text: str, index: int) -> set[int]:
    name, low, high, _names, _first = _FIELDS[index]
    values: set[int] = set()
    for term in text.split(","):
        if not term:
            raise ValidationError(name, text, "empty list element")
        for char in "?#":
            if char in term:
                raise ValidationError(name, term, f"'{char}' is not supported (Vixie cron syntax)")
        base, slash, step_text = term.partition("/")
        step = 1
        if slash:
            if not step_text.isdigit() or not step_text.isascii():
                raise ValidationError(name, term, "step must be a positive number")
            step = int(step_text)
            if step == 0:
                raise ValidationError(name, term, "step must be at least 1")
        if base == "*":
            start, end = low, high
        elif "-" in base:
            left, _, right = base.partition("-")
            start, end = _value(left, index), _value(right, index)
            if start > end:
                raise ValidationError(name, term, f"range start {start} is after its end {end}")
        else:
            start = _value(base, index)
            end = high if slash else start
        values.update(range(start, end + 1, step))
    if index == 5 and 7 in values:
        values.discard(7)
        values.add(0)
    return values


@functools.lru_cache(maxsize=16384)
def parse_cron(text: str) -> CronExpr:
    """Parse a cron expression (see the module docstring). Raises :class:`ValidationError`."""
    if not isinstance(text, str):
        raise ValidationError("expr", text, "cron expression must be a string")
    if len(text) > MAX_EXPR_LENGTH:
        raise ValidationError("expr", text[:40] + "...", "cron expression too long")
    stripped = " ".join(text.split())
    if not stripped:
        raise ValidationError("expr", text, "empty cron expression")
    source = stripped
    if stripped.startswith("@"):
        macro = MACROS.get(stripped.lower())
        if macro is None:
            known = " ".join(sorted(MACROS))
            raise ValidationError("expr", stripped, f"unknown macro; known: {known}")
        stripped = macro
    parts = stripped.split(" ")
    if len(parts) == 5:
        parts.insert(0, "0")
    elif len(parts) != 6:
        raise ValidationError(
            "expr", text, f"expected 5 fields (or 6 with seconds first), found {len(parts)}"
        )
    sets = [_parse_field(part, i) for i, part in enumerate(parts)]
    return CronExpr(
        seconds=tuple(sorted(sets[0])),
        minutes=tuple(sorted(sets[1])),
        hours=tuple(sorted(sets[2])),
        days_of_month=tuple(sorted(sets[3])),
        months=tuple(sorted(sets[4])),
        days_of_week=tuple(sorted(sets[5])),
        day_and=parts[3].startswith("*") or parts[5].startswith("*"),
        fixed_time=not parts[1].startswith("*") and not parts[2].startswith("*"),
        text=source,
    )
