"""Quartz's day extensions (``L``, ``L-n``, ``LW``, ``nW``, ``dL``, ``d#k``) against an oracle.

The oracle is written from the definitions (Quartz's, as EventBridge documents them) on
:class:`datetime.date`, without the engine's arithmetic: the last day is the one whose next day
is in another month; ``nW`` is the weekday of the month nearest day ``n`` (by distance, among the
month's Monday-Fridays); ``d#k`` counts the weekday's occurrences from the 1st; ``dL`` is a
weekday a week after which is another month. Expressions are drawn as structures and rendered
as text, so the oracle never parses. The engine's DST handling is checked unchanged by a minute
scan (the one of :mod:`.oracle`) whose day test is this oracle.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from horae.domain import (
    CronSpec,
    DstPolicy,
    GapPolicy,
    RepeatPolicy,
    compile_schedule,
    instants_between,
    next_instants,
    parse_cron,
    parse_instant,
)

from .oracle import ZONES, minute_table, transitions

DOW_NAMES = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")


def cases(n: int) -> settings:
    return settings(
        max_examples=n,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


# A term is (kind, a, b): ("day", n, _), ("range", a, b), ("L", offset, _), ("LW", _, _),
# ("W", n, _) for the day of month; ("dow", d, _), ("dowrange", a, b), ("dL", d, _),
# ("d#", d, k) for the day of week (d in 0-7, 7 = Sunday; rendered as a number or a name).
Term = tuple[str, int, int]


@dataclass(frozen=True)
class Days:
    dom: tuple[Term, ...]  # () = '*'
    dow: tuple[Term, ...]  # () = '*'
    names: bool  # day-of-week rendered as names

    def text(self) -> str:
        return f"{self._dom_text()} * {self._dow_text()}"

    def _dom_text(self) -> str:
        if not self.dom:
            return "*"
        out = []
        for kind, a, b in self.dom:
            out.append(
                {
                    "day": str(a),
                    "range": f"{a}-{b}",
                    "L": "L" if a == 0 else f"L-{a}",
                    "LW": "LW",
                    "W": f"{a}W",
                }[kind]
            )
        return ",".join(out)

    def _dow_text(self) -> str:
        if not self.dow:
            return "*"

        def day(d: int) -> str:
            return DOW_NAMES[d % 7] if self.names else str(d)

        out = []
        for kind, a, b in self.dow:
            out.append(
                {
                    "dow": day(a),
                    "dowrange": f"{day(a)}-{day(b)}" if a <= b else f"{a}-{b}",
                    "dL": f"{day(a)}L",
                    "d#": f"{day(a)}#{b}",
                }[kind]
            )
        return ",".join(out)


def _next_month(year: int, month: int) -> date:
    return date(year + 1, 1, 1) if month == 12 else date(year, month + 1, 1)


def _month_days(year: int, month: int) -> list[date]:
    first, out = date(year, month, 1), []
    while first.month == month:
        out.append(first)
        first += timedelta(days=1)
    return out


def _cron_dow(moment: date) -> int:
    return (moment.weekday() + 1) % 7  # 0 = Sunday


def _dom_term(term: Term, moment: date) -> bool:
    kind, a, b = term
    days = _month_days(moment.year, moment.month)
    if kind == "day":
        return moment.day == a
    if kind == "range":
        return a <= moment.day <= b
    if kind == "L":
        last = _next_month(moment.year, moment.month) - timedelta(days=1)
        return moment == last - timedelta(days=a)
    weekdays = [d for d in days if d.weekday() < 5]
    if kind == "LW":
        return moment == max(weekdays)
    assert kind == "W"
    if a > len(days):
        return False
    return moment == min(weekdays, key=lambda d: abs(d.day - a))


def _dow_term(term: Term, moment: date) -> bool:
    kind, a, b = term
    dow = _cron_dow(moment)
    if kind == "dow":
        return dow == a % 7
    if kind == "dowrange":
        return any(dow == v % 7 for v in range(a, b + 1))
    if dow != a % 7:
        return False
    if kind == "dL":
        return (moment + timedelta(days=7)).month != moment.month
    assert kind == "d#"
    same = [d for d in _month_days(moment.year, moment.month)[: moment.day] if _cron_dow(d) == dow]
    return len(same) == b


def oracle_day(days: Days, moment: date) -> bool:
    """Whether ``moment`` matches the day fields, by the Vixie rule over the definitions."""
    dom_ok = not days.dom or any(_dom_term(t, moment) for t in days.dom)
    dow_ok = not days.dow or any(_dow_term(t, moment) for t in days.dow)
    if days.dom and days.dow:
        return dom_ok or dow_ok
    return dom_ok and dow_ok


@st.composite
def dom_term(draw: st.DrawFn) -> Term:
    kind = draw(st.sampled_from(["day", "range", "L", "L", "LW", "W", "W"]))
    if kind == "day":
        return ("day", draw(st.integers(1, 31)), 0)
    if kind == "range":
        a = draw(st.integers(1, 30))
        return ("range", a, draw(st.integers(a, 31)))
    if kind == "L":
        return ("L", draw(st.one_of(st.just(0), st.integers(0, 3), st.integers(0, 30))), 0)
    if kind == "LW":
        return ("LW", 0, 0)
    return ("W", draw(st.one_of(st.sampled_from([1, 2, 28, 29, 30, 31]), st.integers(1, 31))), 0)


@st.composite
def dow_term(draw: st.DrawFn) -> Term:
    kind = draw(st.sampled_from(["dow", "dowrange", "dL", "dL", "d#", "d#"]))
    d = draw(st.integers(0, 7))
    if kind == "dowrange":
        a = draw(st.integers(0, 6))
        return ("dowrange", a, draw(st.integers(a, 7)))
    if kind == "d#":
        return ("d#", d, draw(st.integers(1, 5)))
    return (kind, d, 0)


@st.composite
def day_fields(draw: st.DrawFn) -> Days:
    shape = draw(st.sampled_from(["dom", "dom", "dow", "dow", "both"]))
    dom = dow = ()
    if shape in ("dom", "both"):
        dom = tuple(draw(st.lists(dom_term(), min_size=1, max_size=3)))
    if shape in ("dow", "both"):
        dow = tuple(draw(st.lists(dow_term(), min_size=1, max_size=2)))
    # Names and numbers mix freely, except a name range must not wrap (SUN is 0, not 7).
    names = draw(st.booleans()) and not any(k == "dowrange" and b == 7 for k, _a, b in dow)
    return Days(dom, dow, names)


def test_definitions_on_known_months() -> None:
    def days(text: str, year: int, month: int) -> tuple[int, ...]:
        return parse_cron(f"0 0 {text}").days_in_month(year, month)

    # February 2026 starts on a Sunday and has 28 days; February 2024 had 29; May 2026 starts
    # on a Friday; August 2026 starts on a Saturday; May 2027 ends on a Monday.
    assert days("L * *", 2026, 2) == (28,) and days("L * *", 2024, 2) == (29,)
    assert days("L-1 * *", 2026, 4) == (29,) and days("L-30 * *", 2026, 2) == ()
    assert days("LW * *", 2026, 5) == (29,)  # Sunday 31st -> Friday 29th
    assert days("LW * *", 2027, 5) == (31,)
    assert days("1W * *", 2026, 8) == (3,)  # Saturday the 1st -> Monday the 3rd
    assert days("15W * *", 2026, 8) == (14,)  # Saturday -> Friday
    assert days("16W * *", 2026, 8) == (17,)  # Sunday -> Monday
    assert days("31W * *", 2026, 5) == (29,)  # Sunday the last -> Friday, not June
    assert days("31W * *", 2026, 4) == ()  # April has no 31st
    assert days("* * 6#3", 2026, 2) == (21,)  # third Saturday (Horae's 6 = Saturday)
    assert days("* * FRI#3", 2026, 2) == (20,) == days("* * 5#3", 2026, 2)
    assert days("* * MON#5", 2026, 2) == ()
    assert days("* * 5L", 2026, 5) == (29,) == days("* * FRIL", 2026, 5)
    assert days("* * 0L", 2026, 3) == (29,) == days("* * 7L", 2026, 3)
    assert days("1,15,L * *", 2026, 2) == (1, 15, 28)
    assert days("L * MON", 2026, 2) == (2, 9, 16, 23, 28)  # both restricted: OR (Vixie)
    assert days("L * *", 2026, 2) == days("L * *", 2026, 2)
    assert parse_cron("0 0 L * *") == parse_cron("0 0 l * *") == parse_cron("0 0 L-0 * *")
    assert parse_cron("0 0 * * FRI#3") == parse_cron("0 0 * * 5#3")
    assert parse_cron("0 0 L * *") != parse_cron("0 0 LW * *")


@cases(3000)
@given(days=day_fields(), year=st.integers(1900, 2200), month=st.integers(1, 12))
def test_days_of_a_month_match_the_definitions(days: Days, year: int, month: int) -> None:
    expected = tuple(d.day for d in _month_days(year, month) if oracle_day(days, d))
    assert parse_cron(f"0 0 {days.text()}").days_in_month(year, month) == expected


@cases(300)
@given(days=day_fields(), start=st.integers(0, 200 * 365 * 86400), second=st.booleans())
def test_next_instants_in_utc_match_the_definitions(days: Days, start: int, second: bool) -> None:
    """Long searches: the next instants of a day-only schedule, from anywhere in 1970-2170."""
    text = f"{'7 ' if second else ''}30 12 {days.text()}"
    ours = next_instants(compile_schedule(CronSpec(text), "UTC"), start, 3)
    expected: list[int] = []
    moment = datetime.fromtimestamp(start, UTC).date()
    while len(expected) < 3 and moment.year < 2200:
        at = int(datetime(moment.year, moment.month, moment.day, 12, 30, tzinfo=UTC).timestamp())
        at += 7 if second else 0
        if at > start and oracle_day(days, moment):
            expected.append(at)
        moment += timedelta(days=1)
    if len(expected) < 3:  # past the engine's search horizon: it may stop earlier
        assert ours == expected[: len(ours)]
    else:
        assert ours == expected


# DST: the day extensions choose days only; the time of day keeps its DST treatment.

DST_ZONES = [z for z in ZONES if transitions(z)]
HOURS = st.sampled_from([0, 1, 2, 3, 12, 22, 23])
MINUTES = st.sampled_from([0, 15, 30, 45, 59])


def _local_date(utc: int, month: int, day: int) -> date:
    """The local date of a scanned minute (its year from the UTC instant, a day at most apart)."""
    year = datetime.fromtimestamp(utc, UTC).year
    utc_month = datetime.fromtimestamp(utc, UTC).month
    if month == 12 and utc_month == 1:
        year -= 1
    elif month == 1 and utc_month == 12:
        year += 1
    return date(year, month, day)


def _oracle_instants(
    days: Days, minute: str, hour: str, zone: str, start: int, end: int, dst: DstPolicy
) -> list[int]:
    minutes = set(range(60)) if minute == "*" else {int(minute)}
    hours = set(range(24)) if hour == "*" else {int(hour)}
    fixed = minute != "*" and hour != "*"
    shift, both = dst.gap is GapPolicy.SHIFT, dst.repeat is RepeatPolicy.BOTH

    def matches(utc: int, m: int, h: int, day: int, month: int) -> bool:
        return m in minutes and h in hours and oracle_day(days, _local_date(utc, month, day))

    out = []
    for utc, m, h, day, month, _dow, second_pass, skipped in minute_table(zone, start, end):
        fire = matches(utc, m, h, day, month) and (not second_pass or not fixed or both)
        if fixed and shift and any(matches(utc, w[0], w[1], w[2], w[3]) for w in skipped):
            fire = True
        if fire:
            out.append(utc)
    return out


@st.composite
def near_transition(draw: st.DrawFn) -> tuple[str, int]:
    """A zone and a start minute up to 40 days before, or a day after, one of its transitions."""
    zone = draw(st.sampled_from(DST_ZONES))
    at = draw(st.sampled_from(transitions(zone)))
    return zone, at + 60 * draw(st.integers(-40 * 1440, 1440))


@cases(250)
@given(
    days=day_fields(),
    minute=st.one_of(st.just("*"), MINUTES.map(str)),
    hour=HOURS.map(str),
    where=near_transition(),
    shift=st.booleans(),
    both=st.booleans(),
)
def test_dst_treatment_unchanged_near_transitions(
    days: Days, minute: str, hour: str, where: tuple[str, int], shift: bool, both: bool
) -> None:
    zone, start = where
    end = start + 42 * 86400
    dst = DstPolicy(
        GapPolicy.SHIFT if shift else GapPolicy.SKIP,
        RepeatPolicy.BOTH if both else RepeatPolicy.FIRST,
    )
    schedule = compile_schedule(CronSpec(f"{minute} {hour} {days.text()}"), zone, dst)
    ours = list(instants_between(schedule, start, end, 100_000).instants)
    assert ours == _oracle_instants(days, minute, hour, zone, start, end, dst)


def test_last_sunday_at_a_gap_and_a_repeat() -> None:
    """Europe's clocks change on the last Sunday of March and October: ``30 2 * * SUNL``."""
    berlin = compile_schedule(CronSpec("30 2 * * SUNL"), "Europe/Berlin")
    after = parse_instant("2026-03-01T00:00:00Z")
    assert next_instants(berlin, after, 3) == [
        parse_instant("2026-03-29T01:00:00Z"),  # 02:30 does not exist: 03:00 CEST (gap shift)
        parse_instant("2026-04-26T00:30:00Z"),
        parse_instant("2026-05-31T00:30:00Z"),
    ]
    after = parse_instant("2026-10-01T00:00:00Z")
    assert next_instants(berlin, after, 2) == [
        parse_instant("2026-10-25T00:30:00Z"),  # the first 02:30 (CEST) only
        parse_instant("2026-11-29T01:30:00Z"),
    ]
