"""Property tests: the cron engine against the brute-force oracle, near every 2020-2027 transition.

Zones cover the southern hemisphere, half-hour DST (Lord_Howe, Chatham's 45-minute offset),
2-hour DST (Troll), DST at midnight (Havana, Asuncion, Santiago), negative DST (Dublin),
zones whose rules changed (Sao_Paulo, Tehran, Casablanca, Apia, Cairo) and zones without DST.
"""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from horae.domain import (
    CronSpec,
    DstPolicy,
    GapPolicy,
    RepeatPolicy,
    compile_schedule,
    instants_between,
)
from horae.domain.schedule import CronSchedule

from .oracle import ZONES, oracle_instants, transitions


def cases(n: int) -> settings:
    return settings(
        max_examples=n,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


YEAR_2020 = int(datetime(2020, 1, 1, tzinfo=UTC).timestamp())
YEAR_2028 = int(datetime(2028, 1, 1, tzinfo=UTC).timestamp())

# Hours and minutes where the interesting things happen (gaps and repeats sit around 0-3 h and
# 22-24 h local; Lord_Howe and Chatham move by 30 and 45 minutes).
HOURS = st.sampled_from([0, 1, 2, 3, 4, 12, 22, 23])
MINUTES = st.sampled_from([0, 1, 15, 29, 30, 31, 44, 45, 59])


@st.composite
def minute_field(draw: st.DrawFn) -> str:
    choice = draw(st.integers(0, 6))
    if choice == 0:
        return "*"
    if choice == 1:
        return f"*/{draw(st.sampled_from([5, 10, 15, 20, 30, 45]))}"
    if choice == 2:
        a, b = sorted(draw(st.lists(MINUTES, min_size=2, max_size=2, unique=True)))
        return f"{a}-{b}"
    if choice == 3:
        values = draw(st.lists(MINUTES, min_size=2, max_size=3, unique=True))
        return ",".join(str(v) for v in values)
    if choice == 4:
        return f"{draw(MINUTES)}-59/{draw(st.sampled_from([10, 15, 30]))}"
    return str(draw(MINUTES))


@st.composite
def hour_field(draw: st.DrawFn) -> str:
    choice = draw(st.integers(0, 5))
    if choice == 0:
        return "*"
    if choice == 1:
        return f"*/{draw(st.sampled_from([2, 3, 5]))}"
    if choice == 2:
        a, b = sorted(draw(st.lists(HOURS, min_size=2, max_size=2, unique=True)))
        return f"{a}-{b}"
    if choice == 3:
        values = draw(st.lists(HOURS, min_size=2, max_size=3, unique=True))
        return ",".join(str(v) for v in values)
    return str(draw(HOURS))


@st.composite
def date_fields(draw: st.DrawFn) -> str:
    dom = draw(st.sampled_from(["*", "*", "*", "1-15", "*/2", "5,10,20,25,31", "16-31"]))
    month = draw(st.sampled_from(["*", "*", "*", "1-6", "JAN,MAR,APR,SEP,OCT,NOV", "2-12/2"]))
    dow = draw(st.sampled_from(["*", "*", "*", "MON-FRI", "0,6", "SUN", "1-5", "SAT,SUN"]))
    return f"{dom} {month} {dow}"


@st.composite
def expressions(draw: st.DrawFn) -> str:
    return f"{draw(minute_field())} {draw(hour_field())} {draw(date_fields())}"


DST_ZONES = [z for z in ZONES if transitions(z)]


@st.composite
def near_transition(draw: st.DrawFn) -> tuple[str, int]:
    """A zone and a start minute within a day before to two hours after one of its transitions."""
    zone = draw(st.sampled_from(DST_ZONES))
    at = draw(st.sampled_from(transitions(zone)))
    return zone, at + 60 * draw(st.integers(-26 * 60, 2 * 60))


@st.composite
def anywhere(draw: st.DrawFn) -> tuple[str, int]:
    zone = draw(st.sampled_from(ZONES))
    return zone, YEAR_2020 + 60 * draw(st.integers(0, (YEAR_2028 - YEAR_2020) // 60))


def _engine(expr: str, zone: str, start: int, end: int, dst: DstPolicy) -> list[int]:
    schedule = compile_schedule(CronSpec(expr), zone, dst)
    return list(instants_between(schedule, start, end, 100_000).instants)


@cases(2500)
@given(expr=expressions(), where=near_transition(), hours=st.integers(1, 30))
def test_default_policy_matches_oracle_near_transitions(
    expr: str, where: tuple[str, int], hours: int
) -> None:
    zone, start = where
    end = start + hours * 3600
    expected = oracle_instants(expr, zone, start, end)
    assert _engine(expr, zone, start, end, DstPolicy()) == expected


@cases(1500)
@given(
    expr=expressions(),
    where=near_transition(),
    shift=st.booleans(),
    both=st.booleans(),
)
def test_every_policy_choice_matches_oracle(
    expr: str, where: tuple[str, int], shift: bool, both: bool
) -> None:
    zone, start = where
    end = start + 28 * 3600
    dst = DstPolicy(
        GapPolicy.SHIFT if shift else GapPolicy.SKIP,
        RepeatPolicy.BOTH if both else RepeatPolicy.FIRST,
    )
    expected = oracle_instants(expr, zone, start, end, shift=shift, both=both)
    assert _engine(expr, zone, start, end, dst) == expected


@cases(200)
@given(expr=expressions(), where=anywhere())
def test_matches_oracle_anywhere_2020_2027(expr: str, where: tuple[str, int]) -> None:
    zone, start = where
    end = start + 26 * 3600
    assert _engine(expr, zone, start, end, DstPolicy()) == oracle_instants(expr, zone, start, end)


@cases(1000)
@given(
    expr=expressions(),
    where=near_transition(),
    count=st.integers(1, 6),
    second=st.integers(0, 59),
)
def test_fresh_generation_agrees_with_cached_windows(
    expr: str, where: tuple[str, int], count: int, second: int
) -> None:
    """``generate`` from an arbitrary second (small windows) equals the shared cached schedule."""
    zone, start = where
    start += second
    shared = compile_schedule(CronSpec(expr), zone)
    assert isinstance(shared, CronSchedule)
    fresh = CronSchedule(shared.expr, zone)
    times, end = fresh.generate(start, count)
    assert times == sorted(set(times)) and all(t > start for t in times)
    chained = []
    t = start
    for _ in range(len(times)):
        found = shared.next_after(t)
        assert found is not None
        chained.append(found)
        t = found
    assert chained == times
    if len(times) == count:
        assert end == times[-1]
