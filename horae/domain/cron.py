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

Quartz's day extensions, with Quartz's definitions (which EventBridge Scheduler documents too),
each a term of its field's list (``1,15,L`` is the 1st, the 15th and the last day):

- day of month ``L``: the last day of the month; ``L-n`` (``n`` 0-30): ``n`` days before it (no day
  in a month shorter than ``n + 1`` days);
- day of month ``LW``: the last weekday (Monday-Friday) of the month;
- day of month ``nW`` (``n`` 1-31): the weekday nearest day ``n`` *within the month*: a Saturday
  moves to the Friday before, a Sunday to the Monday after, except that the move never leaves the
  month (Saturday the 1st -> Monday the 3rd, Sunday the last -> Friday two days before). No day in
  a month shorter than ``n`` days, as a plain ``n``;
- day of week ``dL`` (``FRIL`` or ``5L``): the last such weekday of the month;
- day of week ``d#k`` (``FRI#3`` or ``5#3``, ``k`` 1-5): the ``k``-th such weekday of the month (no
  day in a month with fewer).

Day-of-week *numbers* stay Horae's (Vixie's): 0 or 7 is Sunday, so ``6#3`` is the third
*Saturday*, where Quartz and EventBridge (1 = Sunday) read it as the third Friday; names
(``FRI#3``) mean the same everywhere. The Vixie day rule above applies unchanged (``L`` does not
start with ``*``, so ``L * MON`` is the last day *or* any Monday). The extensions choose days
only: the time of day, and so the DST treatment, is unchanged.

Not accepted (each with a precise :class:`~horae.domain.errors.ValidationError`): ``@reboot``,
``?``, ``L`` / ``W`` / ``#`` outside the forms above (in another field, in a range or with a step,
``L`` alone in day of week: Quartz's Saturday, write ``SAT``), values out of range, empty terms,
zero steps, reversed ranges.
"""

from __future__ import annotations

import functools
import re
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
    # Quartz day terms: (LAST, n) = L-n, (LAST_WEEKDAY, 0) = LW, (NEAREST_WEEKDAY, n) = nW
    day_of_month_rules: tuple[tuple[str, int], ...] = ()
    # (weekday 0 = Sunday, k): k 1-5 = d#k, k = -1 = dL
    day_of_week_rules: tuple[tuple[int, int], ...] = ()
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
        return _matching_days(
            self.days_of_month,
            self.days_of_week,
            self.day_and,
            year,
            month,
            self.day_of_month_rules,
            self.day_of_week_rules,
        )

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


LAST = "last"
LAST_WEEKDAY = "last_weekday"
NEAREST_WEEKDAY = "nearest_weekday"


def _rule_day(rule: tuple[str, int], length: int, first_dow: int) -> int | None:
    """The day of a month (``length`` days, day 1 on weekday ``first_dow``) a day-of-month
    rule names, or ``None`` when the month has no such day."""
    kind, n = rule
    if kind == LAST:
        return length - n if length - n >= 1 else None
    if kind == LAST_WEEKDAY:
        dow = (first_dow + length - 1) % 7
        return length - (1 if dow == 6 else 2 if dow == 0 else 0)
    if n > length:
        return None
    dow = (first_dow + n - 1) % 7
    if dow == 6:  # Saturday: the Friday before, or Monday the 3rd when n is the 1st
        return 3 if n == 1 else n - 1
    if dow == 0:  # Sunday: the Monday after, or the Friday before when n is the last day
        return n - 2 if n == length else n + 1
    return n


def _weekday_rule_matches(rule: tuple[int, int], day: int, dow: int, length: int) -> bool:
    weekday, nth = rule
    if dow != weekday:
        return False
    return day + 7 > length if nth == -1 else (day - 1) // 7 + 1 == nth


@functools.lru_cache(maxsize=65536)
def _matching_days(
    doms: tuple[int, ...],
    dows: tuple[int, ...],
    day_and: bool,
    year: int,
    month: int,
    dom_rules: tuple[tuple[str, int], ...] = (),
    dow_rules: tuple[tuple[int, int], ...] = (),
) -> tuple[int, ...]:
    length = month_length(year, month)
    first_dow = _ordinal(year, month, 1) % 7  # cron numbering: 0 = Sunday
    dom_set = set(doms)
    for rule in dom_rules:
        ruled = _rule_day(rule, length, first_dow)
        if ruled is not None:
            dom_set.add(ruled)
    dow_set = frozenset(dows)
    out = []
    for day in range(1, length + 1):
        dom_ok = day in dom_set
        dow = (first_dow + day - 1) % 7
        dow_ok = dow in dow_set or any(
            _weekday_rule_matches(rule, day, dow, length) for rule in dow_rules
        )
        if (dom_ok and dow_ok) if day_and else (dom_ok or dow_ok):
            out.append(day)
    return tuple(out)


def _value(token: str, index: int) -> int:
    name, low, high, names, first = _FIELDS[index]
    upper = token.upper()
    if names and upper in names:
        return names.index(upper) + first
    for char in "LW#":
        if char in upper:
            raise ValidationError(name, token, _misplaced(char, index))
    if not token.isdigit() or not token.isascii():
        hint = f" or a name {names[0]}..{names[-1]}" if names else ""
        raise ValidationError(name, token, f"expected a number {low}-{high}{hint}")
    value = int(token)
    if not low <= value <= high:
        raise ValidationError(name, token, f"value {value} out of range {low}-{high}")
    return value


_DOM_RULE = re.compile(r"^(?:L(?:-(\d{1,2}))?|LW|(\d{1,2})W)$")
_DOW_RULE = re.compile(r"^([A-Z]{3}|\d)(?:L|#(\d))$")


def _misplaced(char: str, index: int) -> str:
    fields, forms = {
        "L": (
            "day_of_month or day_of_week",
            "L or L-n in day_of_month, dL (5L, FRIL) in day_of_week",
        ),
        "W": ("day_of_month", "LW or nW"),
        "#": ("day_of_week", "d#k: 5#3, FRI#3"),
    }[char]
    if index in (3, 5):
        return f"'{char}' is allowed only as a whole term: {forms}"
    return f"'{char}' is allowed only in {fields} ({forms})"


def _dom_rule(term: str) -> tuple[str, int]:
    """``L``, ``L-n``, ``LW`` or ``nW`` (day of month) as a rule; raises otherwise."""
    name = "day_of_month"
    upper = term.upper()
    if "#" in upper:
        raise ValidationError(name, term, "'#' is allowed only in day_of_week (d#k: 5#3, FRI#3)")
    match = _DOM_RULE.match(upper) if term.isascii() else None
    if match is None:
        raise ValidationError(name, term, "expected L, L-n (n 0-30), LW or nW (n 1-31)")
    offset, nearest = match.groups()
    if nearest is not None:
        n = int(nearest)
        if not 1 <= n <= 31:
            raise ValidationError(name, term, f"day {n} out of range 1-31")
        return (NEAREST_WEEKDAY, n)
    if upper == "LW":
        return (LAST_WEEKDAY, 0)
    n = int(offset or 0)
    if n > 30:
        raise ValidationError(name, term, f"offset {n} out of range 0-30")
    return (LAST, n)


def _dow_rule(term: str) -> tuple[int, int]:
    """``dL`` or ``d#k`` (day of week) as a rule; raises otherwise."""
    name = "day_of_week"
    upper = term.upper()
    if "W" in upper.replace("WED", ""):
        raise ValidationError(name, term, "'W' is allowed only in day_of_month (LW or nW)")
    if upper == "L":
        raise ValidationError(
            name, term, "'L' alone is ambiguous (Quartz reads it as Saturday): write SAT or dL"
        )
    match = _DOW_RULE.match(upper) if term.isascii() else None
    if match is None:
        raise ValidationError(
            name, term, "expected dL or d#k (d a day 0-7 or SUN..SAT, k 1-5), e.g. 5L, FRI#3"
        )
    day_text, nth_text = match.groups()
    weekday = _value(day_text, 5) % 7
    if nth_text is None:
        return (weekday, -1)
    nth = int(nth_text)
    if not 1 <= nth <= 5:
        raise ValidationError(name, term, f"occurrence {nth} out of range 1-5")
    return (weekday, nth)


_Field = tuple[set[int], set[tuple[str, int]], set[tuple[int, int]]]


def _parse_field(text: str, index: int) -> _Field:
    """A field's plain values and its Quartz rules (day of month, day of week)."""
    name, low, high, _names, _first = _FIELDS[index]
    values: set[int] = set()
    dom_rules: set[tuple[str, int]] = set()
    dow_rules: set[tuple[int, int]] = set()
    for term in text.split(","):
        if not term:
            raise ValidationError(name, text, "empty list element")
        if "?" in term:
            raise ValidationError(name, term, "'?' is not supported (Vixie cron syntax)")
        upper = term.upper()
        special = "L" in upper or "#" in upper or ("W" in upper.replace("WED", ""))
        if special and index in (3, 5):
            if "/" in term or ("-" in term and not upper.startswith("L-")):
                char = next(c for c in "L#W" if c in upper)
                raise ValidationError(name, term, _misplaced(char, index))
            if index == 3:
                dom_rules.add(_dom_rule(term))
            else:
                dow_rules.add(_dow_rule(term))
            continue
        if "#" in term:
            raise ValidationError(name, term, _misplaced("#", index))
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
    return values, dom_rules, dow_rules


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
    fields = [_parse_field(part, i) for i, part in enumerate(parts)]
    sets = [values for values, _dom, _dow in fields]
    return CronExpr(
        seconds=tuple(sorted(sets[0])),
        minutes=tuple(sorted(sets[1])),
        hours=tuple(sorted(sets[2])),
        days_of_month=tuple(sorted(sets[3])),
        months=tuple(sorted(sets[4])),
        days_of_week=tuple(sorted(sets[5])),
        day_and=parts[3].startswith("*") or parts[5].startswith("*"),
        fixed_time=not parts[1].startswith("*") and not parts[2].startswith("*"),
        day_of_month_rules=tuple(sorted(fields[3][1])),
        day_of_week_rules=tuple(sorted(fields[5][2])),
        text=source,
    )
