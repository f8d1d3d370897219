"""Acceptance: ``horae next`` run as a real process, as a tenant or a script would."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

pytestmark = pytest.mark.acceptance

RFC3339_UTC = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")


def horae(
    *args: str, stdin: str | None = None, env: dict[str, str] | None = None
) -> tuple[int, str, str]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("HORAE_NEXT_")}
    full_env.update(env or {})
    proc = subprocess.run(
        [sys.executable, "-m", "horae.cli.main", "next", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        env=full_env,
        check=False,
    )
    return proc.returncode, proc.stdout, proc.stderr


def test_prints_rfc3339_utc_one_per_line() -> None:
    code, out, err = horae(
        "0 2 * * *", "--zone", "America/New_York", "--after", "2026-03-07T12:00:00Z", "--count", "3"
    )
    assert code == 0, err
    # 02:00 does not exist on 2026-03-08 in New York: Debian cron runs it right after the gap.
    assert out.splitlines() == [
        "2026-03-08T07:00:00Z",
        "2026-03-09T06:00:00Z",
        "2026-03-10T06:00:00Z",
    ]


def test_local_adds_wall_time_offset_tzdata_and_dst_note() -> None:
    code, out, _ = horae(
        "*/30 * * * *", "--zone", "America/New_York", "--after", "2026-11-01T05:00:00Z",
        "--count", "3", "--local",
    )  # fmt: skip
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("2026-11-01T05:30:00Z 2026-11-01T01:30:00-04:00 America/New_York")
    assert "tzdata=" in lines[0] and "first pass" in lines[0]
    assert lines[1].startswith("2026-11-01T06:00:00Z 2026-11-01T01:00:00-05:00")
    assert "second pass" in lines[1]


def test_every_and_at_expressions() -> None:
    code, out, _ = horae("@every 90s", "--after", "2026-01-01T00:00:00Z", "--count", "2")
    assert code == 0
    assert out.splitlines() == ["2026-01-01T00:01:30Z", "2026-01-01T00:03:00Z"]
    code, out, _ = horae(
        "@at 2026-03-08T07:00:00Z,2027-01-01T00:00:00+01:00", "--after", "2026-01-01T00:00:00Z"
    )
    assert code == 0
    assert out.splitlines() == ["2026-03-08T07:00:00Z", "2026-12-31T23:00:00Z"]


def test_after_defaults_to_now() -> None:
    code, out, _ = horae("@hourly", "--count", "2")
    assert code == 0
    lines = out.splitlines()
    assert len(lines) == 2 and all(RFC3339_UTC.match(line) for line in lines)
    assert all(line.endswith(":00:00Z") for line in lines)


def test_env_fallbacks() -> None:
    env = {
        "HORAE_NEXT_ZONE": "Asia/Kolkata",
        "HORAE_NEXT_AFTER": "2026-01-01T00:00:00Z",
        "HORAE_NEXT_COUNT": "1",
    }
    code, out, _ = horae("0 9 * * *", env=env)
    assert code == 0
    assert out.splitlines() == ["2026-01-01T03:30:00Z"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["61 * * * *"], "expr.minute: value 61 out of range 0-59"),
        (["0 9 * * *", "--zone", "Mars/Olympus"], "zone: unknown time zone"),
        (["0 0 30 2 *"], "no instant in the next 5 years"),
        (["@every 30s"], "minimum interval"),
        (["0 9 * * *", "--count", "0"], "count: must be an integer"),
        (["0 9 * * *", "--after", "yesterday"], "after: expected an RFC 3339 timestamp"),
        (["0 9 * * FRY"], "expr.day_of_week"),
        ([], "EXPR is required"),
    ],
)
def test_errors_are_precise_exit_2_without_traceback(args: list[str], message: str) -> None:
    code, out, err = horae(*args)
    assert code == 2
    assert out == ""
    assert message in err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_jsonl_one_line_per_input_line_errors_do_not_stop_the_batch() -> None:
    requests = [
        '{"expr": "0 9 * * 1-5", "zone": "Europe/Paris", "after": "2026-03-08T00:00:00Z", '
        '"count": 2}',
        "not json",
        '{"expr": "0 0 30 2 *"}',
        "",
        '{"expr": "@hourly", "count": 1, "after": "2026-01-01T00:00:00Z"}',
        '{"expr": "0 9 * * *", "zone": "Nowhere/City"}',
        "[1, 2]",
        '{"expr": "@every 5m", "count": 2, "after": "2026-01-01T00:01:00Z"}',
    ]
    code, out, err = horae("--jsonl", stdin="\n".join(requests) + "\n")
    assert code == 0, err
    results = [json.loads(line) for line in out.splitlines()]
    assert len(results) == len(requests)
    assert results[0]["instants"] == ["2026-03-09T08:00:00Z", "2026-03-10T08:00:00Z"]
    assert results[0]["tzdata"]
    assert "invalid JSON" in results[1]["error"]
    assert "no instant in the next 5 years" in results[2]["error"]
    assert "error" in results[3]
    assert results[4] == {"instants": ["2026-01-01T01:00:00Z"], "tzdata": results[0]["tzdata"]}
    assert "unknown time zone" in results[5]["error"]
    assert "error" in results[6]
    assert results[7]["instants"] == ["2026-01-01T00:05:00Z", "2026-01-01T00:10:00Z"]


def test_the_platform_minimum_interval_applies_as_in_the_api() -> None:
    """``HORAE_MIN_INTERVAL_S`` is the API's limit; ``horae next`` applies the same one."""
    after = ("--after", "2026-03-07T12:00:00Z", "--count", "2")
    code, out, err = horae("@every 5s", *after, env={"HORAE_MIN_INTERVAL_S": "1"})
    assert code == 0, err
    assert out.splitlines() == ["2026-03-07T12:00:05Z", "2026-03-07T12:00:10Z"]
    code, out, err = horae("@every 120s", *after, env={"HORAE_MIN_INTERVAL_S": "3600"})
    assert code == 2 and out == "" and "the minimum interval is 1h" in err, err
    lines = '{"expr": "@every 120s"}\n{"expr": "@every 2h"}\n'
    code, out, _ = horae("--jsonl", stdin=lines, env={"HORAE_MIN_INTERVAL_S": "3600"})
    first, second = (json.loads(line) for line in out.splitlines())
    assert code == 0 and "minimum interval is 1h" in first["error"] and "instants" in second


def test_text_the_api_refuses_is_refused() -> None:
    code, _, err = horae("0 9 * * *\x01", "--after", "2026-03-07T12:00:00Z")
    assert code == 2 and "expr: holds a control character (U+0001 at 9)" in err, err
