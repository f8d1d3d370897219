"""Cron parsing (Vixie syntax, precise errors) and matching against cronsim/croniter as oracles.

Quartz's ``L W #`` day terms: :mod:`tests.unit.domain.test_cron_quartz`."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from croniter import croniter
from cronsim import CronSim, CronSimError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from horae.domain import (
    CronSpec,
    ValidationError,
    compile_schedule,
    format_utc,
    next_instants,
    parse_cron,
    parse_instant,
)

from .oracle import ZONES


def cases(n: int) -> settings:
    return settings(max_examples=n, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_fields_names_ranges_steps_and_lists() -> None:
    expr = parse_cron("0/15 1-3,5 */10 JAN-MAR mon-FRI,7")
    assert expr.minutes == (0, 15, 30, 45)
    assert expr.hours == (1, 2, 3, 5)
    assert expr.days_of_month == (1, 11, 21, 31)
    assert expr.months == (1, 2, 3)
    assert expr.days_of_week == (0, 1, 2, 3, 4, 5)
    assert expr.day_and  # day-of-month starts with '*'
    assert expr.fixed_time
    assert not expr.has_seconds


def test_vixie_day_rule() -> None:
    assert not parse_cron("0 0 1,15 * MON").day_and  # both restricted: OR
    assert parse_cron("0 0 * * MON").day_and
    assert parse_cron("0 0 */2 * MON").day_and  # '*/2' starts with '*': AND, as Vixie
    # 2026-03-02 is a Monday, not the 1st or 15th: matches under OR
    assert parse_cron("0 0 1,15 * MON").matches_date(2026, 3, 2)
    assert not parse_cron("0 0 */2 * MON").matches_date(2026, 3, 2)  # day 2 is even


def test_macros_and_seconds() -> None:
    assert parse_cron("@yearly") == parse_cron("@annually") == parse_cron("0 0 1 1 *")
    assert parse_cron("@monthly") == parse_cron("0 0 1 * *")
    assert parse_cron("@weekly") == parse_cron("0 0 * * 0") == parse_cron("0 0 * * 7")
    assert parse_cron("@daily") == parse_cron("@midnight") == parse_cron("0 0 * * *")
    assert parse_cron("@hourly") == parse_cron("0 * * * *")
    six = parse_cron("30 */20 9 * * *")
    assert six.seconds == (30,) and six.minutes == (0, 20, 40) and six.has_seconds
    assert parse_cron("0 5 4 * * *") == parse_cron("5 4 * * *")


@pytest.mark.parametrize(
    ("text", "field", "fragment"),
    [
        ("60 * * * *", "minute", "out of range 0-59"),
        ("* 24 * * *", "hour", "out of range 0-23"),
        ("* * 0 * *", "day_of_month", "out of range 1-31"),
        ("* * * 13 *", "month", "out of range 1-12"),
        ("* * * * 8", "day_of_week", "out of range 0-7"),
        ("* * * FOO *", "month", "JAN..DEC"),
        ("* * * * FRY", "day_of_week", "SUN..SAT"),
        ("*/0 * * * *", "minute", "step must be at least 1"),
        ("5-1 * * * *", "minute", "range start 5 is after its end 1"),
        ("1,,2 * * * *", "minute", "empty list element"),
        ("* * ? * *", "day_of_month", "'?' is not supported"),
        ("L * * * *", "minute", "'L' is allowed only in day_of_month or day_of_week"),
        ("* * * 1W *", "month", "'W' is allowed only in day_of_month"),
        ("* * 1#2 * *", "day_of_month", "'#' is allowed only in day_of_week"),
        ("* * * * 5W", "day_of_week", "'W' is allowed only in day_of_month"),
        ("* * 1-L * *", "day_of_month", "'L' is allowed only as a whole term"),
        ("* * L/2 * *", "day_of_month", "'L' is allowed only as a whole term"),
        ("* * * * 1-5L", "day_of_week", "'L' is allowed only as a whole term"),
        ("* * LL * *", "day_of_month", "expected L, L-n (n 0-30), LW or nW (n 1-31)"),
        ("* * L-31 * *", "day_of_month", "offset 31 out of range 0-30"),
        ("* * 32W * *", "day_of_month", "day 32 out of range 1-31"),
        ("* * 0W * *", "day_of_month", "day 0 out of range 1-31"),
        ("* * * * L", "day_of_week", "'L' alone is ambiguous"),
        ("* * * * 5#6", "day_of_week", "occurrence 6 out of range 1-5"),
        ("* * * * 5#0", "day_of_week", "occurrence 0 out of range 1-5"),
        ("* * * * 8L", "day_of_week", "value 8 out of range 0-7"),
        ("* * * * #2", "day_of_week", "expected dL or d#k"),
        ("* * * * FRY#2", "day_of_week", "SUN..SAT"),
        ("* * * *", "expr", "found 4"),
        ("* * * * * * *", "expr", "found 7"),
        ("@reboot", "expr", "unknown macro"),
        ("", "expr", "empty"),
        ("61 * * * * *", "second", "out of range 0-59"),
    ],
)
def test_precise_errors(text: str, field: str, fragment: str) -> None:
    with pytest.raises(ValidationError) as info:
        parse_cron(text)
    assert info.value.field == field
    assert fragment in info.value.message
    with pytest.raises(ValidationError) as spec_info:
        CronSpec(text)
    assert spec_info.value.field in ("expr", f"expr.{field}")


def _term(draw: st.DrawFn, low: int, high: int) -> str:
    kind = draw(st.integers(0, 4))
    a = draw(st.integers(low, high - 1))
    b = draw(st.integers(a + 1, high))  # cronsim reads 'a-a/s' as 'a/s'; Vixie as {a}
    step = draw(st.integers(1, max(1, high - low)))
    return [str(a), f"{a}-{b}", f"*/{step}", f"{a}-{b}/{step}", "*"][kind]


START_2020 = int(datetime(2020, 1, 1, tzinfo=UTC).timestamp())
END_2027 = int(datetime(2027, 12, 1, tzinfo=UTC).timestamp())


@st.composite
def cron_text(draw: st.DrawFn) -> str:
    def field(low: int, high: int) -> str:
        terms = [_term(draw, low, high) for _ in range(draw(st.integers(1, 3)))]
        return "*" if "*" in terms else ",".join(terms)

    return " ".join(
        [field(0, 59), field(0, 23), field(1, 31), field(1, 12), field(0, 6)]
    )  # fmt: skip


@cases(400)
@given(text=cron_text())
def test_parsed_sets_agree_with_cronsim(text: str) -> None:
    ours = parse_cron(text)
    try:
        sim = CronSim(text, datetime(2026, 1, 1, tzinfo=UTC))
    except CronSimError:  # a day that never occurs (0 0 30 2 *): ours parses it, and it never fires
        assert next_instants(compile_schedule(CronSpec(text), "UTC"), START_2020, 1) == []
        return
    assert set(ours.minutes) == sim.minutes
    assert set(ours.hours) == sim.hours
    assert set(ours.days_of_month) == sim.days
    assert set(ours.months) == sim.months
    assert set(ours.days_of_week) == {d % 7 for d in sim.weekdays if isinstance(d, int)}
    assert ours.day_and == sim.day_and


@cases(600)
@given(text=cron_text(), start=st.integers(START_2020, END_2027))
def test_utc_next_instants_agree_with_cronsim_and_croniter(text: str, start: int) -> None:
    schedule = compile_schedule(CronSpec(text), "UTC")
    ours = next_instants(schedule, start, 5)
    begin = datetime.fromtimestamp(start, UTC)
    try:
        sim = CronSim(text, begin)
    except CronSimError:  # cronsim refuses a day that never occurs (0 0 30 2 *): none of ours
        assert ours == []
        return
    expected = [int(next(sim).timestamp()) for _ in range(5)]
    assert ours == expected
    dom, dow = text.split()[2], text.split()[4]
    if dom != "*" and dow != "*":
        return  # croniter departs from Vixie when both day fields are restricted; cronsim agrees
    it = croniter(text, begin)
    assert [int(it.get_next(float)) for _ in range(5)] == expected


@cases(600)
@given(
    minute=st.integers(0, 59),
    hour=st.integers(0, 23),
    dates=st.sampled_from(["* * *", "* * 1-5", "1,15 * *", "* 3,10,11 SUN", "*/3 * *"]),
    zone=st.sampled_from(ZONES),
    start=st.integers(START_2020, END_2027),
)
def test_fixed_time_jobs_agree_with_cronsim_in_zones(
    minute: int, hour: int, dates: str, zone: str, start: int
) -> None:
    """cronsim mimics Debian for fixed-time 5-field jobs: a second, independent oracle."""
    text = f"{minute} {hour} {dates}"
    schedule = compile_schedule(CronSpec(text), zone)
    ours = next_instants(schedule, start, 4)
    from zoneinfo import ZoneInfo

    sim = CronSim(text, datetime.fromtimestamp(start, ZoneInfo(zone)))
    expected = [int(next(sim).timestamp()) for _ in range(4)]
    assert [format_utc(v) for v in ours] == [format_utc(v) for v in expected]


def test_seconds_field_against_a_second_by_second_scan() -> None:
    schedule = compile_schedule(CronSpec("*/20 */30 9-10 * * MON"), "Europe/Dublin")
    start = parse_instant("2026-03-28T00:00:00Z")
    ours = next_instants(schedule, start, 30)
    from zoneinfo import ZoneInfo

    zone = ZoneInfo("Europe/Dublin")
    expected = []
    u = start + 1
    while len(expected) < 30:
        wall = datetime.fromtimestamp(u, zone)
        if (
            wall.second % 20 == 0
            and wall.minute % 30 == 0
            and wall.hour in (9, 10)
            and wall.weekday() == 0
        ):
            expected.append(u)
            u += 1
        else:
            u += 1 if wall.weekday() == 0 and wall.hour in (9, 10) else 60 - wall.second
    assert ours == expected
