"""Tables of the tenant CLI and the parsing of its arguments."""

from __future__ import annotations

import argparse

import pytest

from horae.cli.connect import ClientSettings, api_url, client_settings
from horae.cli.main import build_parser
from horae.cli.triggers import (
    document_of_flags,
    history_table,
    lateness_table,
    schedule,
    set_path,
    table,
    target,
    triggers_table,
)
from horae.settings import Settings

TRIGGER = {
    "trigger_id": "nightly",
    "state": "live",
    "version": 3,
    "recurrence": {"kind": "cron", "expr": "0 2 * * *", "zone": "Europe/Paris"},
    "target": {"kind": "webhook", "method": "POST", "url": "https://h.example/x"},
    "next_instants": ["2026-01-02T01:00:00Z", "2026-01-03T01:00:00Z"],
}


def test_table_aligns_columns_with_two_spaces_and_no_trailing_space() -> None:
    text = table(("A", "LONGER"), [("x", None), ("wide-cell", 12), ("y", [1])])
    assert text.splitlines() == [
        "A          LONGER",
        "x          -",
        "wide-cell  12",
        "y          [1]",
    ]


def test_a_table_without_rows_is_its_header() -> None:
    assert table(("ID", "STATE"), []) == "ID  STATE"


def test_recurrence_and_target_in_a_few_words() -> None:
    assert schedule(TRIGGER) == "cron 0 2 * * * Europe/Paris"
    assert schedule({"recurrence": {"kind": "every", "interval_s": 90}}) == "every 90s"
    at = {
        "recurrence": {"kind": "at", "instants": ["2026-03-08T07:00:00Z", "2027-01-01T00:00:00Z"]}
    }
    assert schedule(at) == "at 2026-03-08T07:00:00Z (+1)"
    assert target(TRIGGER) == "POST https://h.example/x"
    assert target({"target": {"kind": "event", "topic": "events.acme"}}) == "event events.acme"


def test_triggers_table() -> None:
    assert triggers_table([TRIGGER]).splitlines() == [
        "ID       STATE  VERSION  SCHEDULE                     TARGET                    NEXT"
        "                  LAST_RUN  LAST_STATE",
        "nightly  live   3        cron 0 2 * * * Europe/Paris  POST https://h.example/x  "
        "2026-01-02T01:00:00Z  -         -",
    ]


def test_history_table_shows_the_outcome_state() -> None:
    fire = {
        "fire_key": "k1",
        "scheduled_at": "2026-01-01T00:00:00Z",
        "due_at": "2026-01-01T00:00:00Z",
        "state": "fired",
        "lane": "on_time",
        "lateness_ms": 12,
        "cause": None,
        "outcome": {"state": "succeeded"},
    }
    lines = history_table([fire, {**fire, "state": "skipped", "outcome": None}]).splitlines()
    assert lines[0].split() == [
        "SCHEDULED", "DUE", "STATE", "LANE", "LATENESS_MS", "CAUSE", "OUTCOME", "FIRE_KEY"
    ]  # fmt: skip
    assert lines[1].split() == [
        "2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z", "fired", "on_time", "12", "-",
        "succeeded", "k1",
    ]  # fmt: skip
    assert lines[2].split()[2] == "skipped" and lines[2].split()[6] == "-"


def test_lateness_table_summary_then_triggers() -> None:
    summary = {
        "summary": {"fires": 3, "p50_ms": 10.0, "p99_ms": 30.0, "max_ms": 31.0, "missed": 1},
        "triggers": [
            {"trigger_id": "a", "fires": 3, "p50_ms": 10.0, "p99_ms": 30.0, "max_ms": 31.0,
             "missed": 1},
        ],
    }  # fmt: skip
    assert [line.split() for line in lateness_table(summary).splitlines()] == [
        ["TRIGGER", "FIRES", "P50_MS", "P99_MS", "MAX_MS", "MISSED"],
        ["*", "3", "10.0", "30.0", "31.0", "1"],
        ["a", "3", "10.0", "30.0", "31.0", "1"],
    ]


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


def test_create_flags_make_a_trigger_document() -> None:
    args = parse(
        "triggers", "create", "nightly", "--cron", "0 2 * * *", "--zone", "Europe/Paris",
        "--url", "https://h.example/x", "--secret-ref", "acme-hook", "--label", "team=ops",
        "--description", "nightly export",
    )  # fmt: skip
    assert args.trigger == "nightly"
    assert document_of_flags(args) == {
        "recurrence": {"kind": "cron", "expr": "0 2 * * *", "zone": "Europe/Paris"},
        "target": {"kind": "webhook", "url": "https://h.example/x", "secret_refs": ["acme-hook"]},
        "labels": {"team": "ops"},
        "description": "nightly export",
    }
    event = parse("triggers", "create", "e", "--every", "300", "--topic", "events.acme")
    assert document_of_flags(event) == {
        "recurrence": {"kind": "every", "interval_s": 300},
        "target": {"kind": "event", "topic": "events.acme"},
    }


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--url", "https://x.example"], "one of --cron, --every, --at"),
        (["--cron", "* * * * *"], "one of --url, --topic"),
        (["--cron", "* * * * *", "--url", "https://x", "--label", "nolabel"], "KEY=VALUE"),
    ],
)
def test_create_flags_missing_say_what(argv: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        document_of_flags(parse("triggers", "create", "x", *argv))


@pytest.mark.parametrize(
    "argv",
    [
        ["triggers", "create", "x", "--cron", "* * * * *", "--every", "60"],
        ["triggers", "frobnicate", "x"],
        ["triggers", "list", "--state", "sleeping"],
        ["backfill", "x", "--from", "2026-01-01T00:00:00Z"],
        ["history"],
    ],
)
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        parse(*argv)
    assert caught.value.code == 2


def test_url_and_token_flags_override_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HORAE_API_URL", "http://env.example:1")
    monkeypatch.setenv("HORAE_API_TOKEN", "from-env")
    config = client_settings(parse("triggers", "list"))
    assert config.url == "http://env.example:1"
    assert config.token is not None and config.token.get_secret_value() == "from-env"
    config = client_settings(parse("history", "a", "--api-url", "http://f:2", "--token", "t"))
    assert config.url == "http://f:2"
    assert config.token is not None and config.token.get_secret_value() == "t"
    monkeypatch.delenv("HORAE_API_URL")
    assert api_url(Settings(), ClientSettings()) == "http://127.0.0.1:8089"
    monkeypatch.setenv("HORAE_API_PORT", "9001")
    monkeypatch.setenv("HORAE_API_HOST", "0.0.0.0")
    assert api_url(Settings(), ClientSettings()) == "http://127.0.0.1:9001"


def test_help_names_the_environment_variables(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse("apply", "--help")
    out = capsys.readouterr().out
    assert "HORAE_API_URL" in out and "HORAE_API_TOKEN" in out


def test_set_path_creates_missing_objects() -> None:
    doc: dict[str, object] = {"policies": {"misfire": "skip"}}
    set_path(doc, "policies.retry.max_attempts", 3)
    set_path(doc, "description", "x")
    assert doc == {
        "policies": {"misfire": "skip", "retry": {"max_attempts": 3}},
        "description": "x",
    }
