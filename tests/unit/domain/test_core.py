"""Validation, queries, window caching, tzdata reporting and the purity of the domain package."""

from __future__ import annotations

import ast
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import horae.domain
from horae.domain import (
    AtSpec,
    CronSpec,
    EverySpec,
    Limits,
    TriggerSpec,
    ValidationError,
    compile_schedule,
    first_within,
    instants_between,
    next_instants,
    occurrences,
    parse_expression,
    parse_instant,
    tzdata_version,
    validate_trigger,
    what_if,
)
from horae.domain.schedule import CronSchedule

NOW = parse_instant("2026-03-01T12:00:00Z")


def cases(n: int) -> settings:
    return settings(max_examples=n, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize(
    ("expr", "zone", "field", "fragment"),
    [
        ("0 0 30 2 *", "UTC", "recurrence", "no instant in the next 5 years"),
        ("0 0 31 4,6,9,11 *", "UTC", "recurrence", "no instant in the next 5 years"),
        ("@every 30s", "UTC", "recurrence", "minimum interval is 1m"),
        ("*/30 * * * * *", "UTC", "recurrence", "fires every 30s"),
        ("@at 2020-01-01T00:00:00Z", "UTC", "recurrence", "no instant in the next 5 years"),
        ("0 9 * * *", "Europe/Atlantis", "zone", "unknown time zone"),
    ],
)
def test_validation_errors(expr: str, zone: str, field: str, fragment: str) -> None:
    with pytest.raises(ValidationError) as info:
        validate_trigger(TriggerSpec(parse_expression(expr), zone), NOW)
    assert info.value.field == field
    assert fragment in info.value.message


def test_validation_limits_are_configurable() -> None:
    spec = TriggerSpec(parse_expression("@every 30s"))
    validate_trigger(spec, NOW, Limits(min_interval_s=10))
    with pytest.raises(ValidationError, match="horizon_s"):
        validate_trigger(TriggerSpec(CronSpec("@daily"), horizon_s=30 * 86400), NOW)
    validate_trigger(TriggerSpec(CronSpec("0 0 29 2 *")), NOW)  # leap day: within 5 years


def test_expression_syntax() -> None:
    assert parse_expression("@every 1h30m") == EverySpec(5400, 0)
    assert parse_expression("@every 5m from 2026-03-08T07:00:00Z") == EverySpec(
        300, parse_instant("2026-03-08T07:00:00Z")
    )
    at = parse_expression("@at 2026-03-08T07:00:00Z, 2026-03-08T06:00:00Z")
    assert at == AtSpec(
        (parse_instant("2026-03-08T06:00:00Z"), parse_instant("2026-03-08T07:00:00Z"))
    )
    for bad, fragment in [
        ("@every", "needs an interval"),
        ("@every 5 minutes", "duration"),
        ("@every 5m since 2026", "from"),
        ("@at", "RFC 3339"),
        ("@at 2026-03-08T07:00:00", "UTC offset"),
        ("@at 2026-03-08T07:00:00.5Z", "fractional"),
    ]:
        with pytest.raises(ValidationError, match=fragment):
            parse_expression(bad)


def test_queries_window_limit_and_what_if() -> None:
    daily = compile_schedule(CronSpec("0 9 * * *"), "Europe/Paris")
    weekdays = compile_schedule(CronSpec("0 9 * * MON-FRI"), "Europe/Paris")
    start, end = parse_instant("2026-03-02T00:00:00Z"), parse_instant("2026-03-16T00:00:00Z")
    page = instants_between(daily, start, end, 100)
    assert len(page.instants) == 14 and not page.truncated
    assert instants_between(daily, start, end, 5).truncated
    diff = what_if(daily, weekdays, start, end, 100)
    assert len(diff.only_a) == 4 and diff.only_b == () and len(diff.b) == 10
    assert diff.to_dict()["only_a"][0] == "2026-03-07T08:00:00Z"
    with pytest.raises(ValidationError, match="limit"):
        instants_between(daily, start, end, 0)
    with pytest.raises(ValidationError, match="count"):
        next_instants(daily, start, 10**9)
    with pytest.raises(ValidationError, match="before its start"):
        instants_between(daily, end, start, 10)
    assert first_within(daily, start) == parse_instant("2026-03-02T08:00:00Z")


def test_every_and_at_schedules() -> None:
    every = compile_schedule(EverySpec(90, 1000), "Asia/Tehran")
    assert next_instants(every, 0, 3) == [1000, 1090, 1180]
    assert next_instants(every, 1090, 2) == [1180, 1270]
    at = compile_schedule(AtSpec((5, 10)), "UTC")
    assert next_instants(at, 0, 5) == [5, 10]
    assert at.next_after(10) is None


def test_occurrences_report_tzdata_offset_and_dst_note() -> None:
    schedule = compile_schedule(CronSpec("30 2 * * *"), "America/New_York")
    (occ,) = occurrences(
        schedule, next_instants(schedule, parse_instant("2026-03-08T00:00:00Z"), 1)
    )
    assert occ.utc_text == "2026-03-08T07:00:00Z"
    assert occ.local_text == "2026-03-08T03:00:00-04:00"
    assert occ.offset_s == -4 * 3600
    assert occ.tzdata == tzdata_version("America/New_York") != "unknown"
    assert occ.dst is not None and "gap shifted" in occ.dst
    assert occ.to_dict()["tzdata"] == occ.tzdata


def test_tzdata_version_is_the_one_zoneinfo_uses() -> None:
    import zoneinfo

    for directory in zoneinfo.TZPATH:
        if (Path(directory) / "America/New_York").is_file():
            header = (Path(directory) / "tzdata.zi").read_text().splitlines()[0]
            assert header == f"# version {tzdata_version('America/New_York')}"
            break
    else:
        import tzdata  # type: ignore[import-not-found,unused-ignore]

        assert tzdata_version("America/New_York") == tzdata.IANA_VERSION


def test_compiled_cron_schedules_are_shared() -> None:
    a = compile_schedule(CronSpec("0 9 * * 1-5"), "Asia/Tokyo")
    b = compile_schedule(CronSpec("0  9 * * MON-FRI"), "Asia/Tokyo")
    assert a is b
    assert compile_schedule(CronSpec("0 9 * * 1-5"), "Asia/Seoul") is not a


@cases(300)
@given(
    expr=st.sampled_from(["* * * * *", "*/7 1-3 * * *", "0 0 * * *", "30 2 1 * *", "0 */6 * * 0"]),
    zone=st.sampled_from(["UTC", "America/New_York", "Australia/Lord_Howe", "Asia/Tehran"]),
    seed=st.integers(0, 2**32),
)
def test_window_cache_answers_queries_in_any_order(expr: str, zone: str, seed: int) -> None:
    """Random forward/backward queries on the shared schedule equal a fresh computation."""
    shared = compile_schedule(CronSpec(expr), zone)
    assert isinstance(shared, CronSchedule)
    rng = random.Random(seed)
    base = parse_instant("2026-03-01T00:00:00Z") + rng.randrange(300 * 86400)
    for _ in range(40):
        t = base + rng.randrange(-3 * 86400, 3 * 86400)
        fresh = CronSchedule(shared.expr, zone)
        expected, _ = fresh.generate(t, 1)
        assert shared.next_after(t) == expected[0]


FORBIDDEN_MODULES = {
    "kafka", "confluent_kafka", "psycopg", "httpx", "aiohttp", "requests", "socket",
    "subprocess", "fastapi", "pydantic_settings", "random", "time",
}  # fmt: skip


def test_domain_is_pure() -> None:
    """No I/O library, no clock, no environment in horae.domain (tzdb.py only reads tzdata)."""
    root = Path(horae.domain.__file__).parent
    for path in sorted(root.glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                names = []
            for name in names:
                assert name.split(".")[0] not in FORBIDDEN_MODULES, (path.name, name)
                if name.split(".")[0] == "os":
                    assert path.name == "tzdb.py", path.name
            if isinstance(node, ast.Attribute):
                assert node.attr not in ("now", "utcnow", "today", "environ", "time_ns"), (
                    path.name,
                    node.attr,
                )
