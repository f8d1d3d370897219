"""The settings model: sections read their env, secrets stay hidden, every CLI flag comes from a
field (its env name in ``--help``, the flag winning over the env), and nothing else reads
``HORAE_*``."""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import pytest
from pydantic_settings import BaseSettings

from horae import failpoints
from horae.cli.common import settings_from_args
from horae.cli.main import build_parser, main
from horae.settings import SECTIONS, Settings, env_name, get_settings

HORAE = Path(__file__).resolve().parents[2] / "horae"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No ``HORAE_*`` of the calling shell leaks in; the cached settings are dropped around."""
    for name in [n for n in os.environ if n.startswith("HORAE_")]:
        monkeypatch.delenv(name)
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def test_sections_and_shared_fields_read_their_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {
        "HORAE_TOPIC_PREFIX": "t.",
        "HORAE_TOPIC_PARTITIONS": "3",
        "HORAE_CODEC": "fastavro",
        "HORAE_PLANNER_TICK_S": "0.25",
        "HORAE_DISPATCHER_MAX_INFLIGHT": "8",
        "HORAE_DISPATCHER_ALLOW": '["127.0.0.1/32"]',
        "HORAE_PROJECTOR_BATCH_RECORDS": "100",
        "HORAE_NEXT_ZONE": "Asia/Kolkata",
        "HORAE_DEMO_SECONDS": "2.5",
        "HORAE_DEV_KAFKA_PORT": "29999",
        "HORAE_STATE_DIR": "/tmp/horae-state",
    }.items():
        monkeypatch.setenv(name, value)
    s = Settings()
    assert (s.topic_prefix, s.topic_partitions, s.codec) == ("t.", 3, "fastavro")
    assert s.planner.tick_s == 0.25
    assert s.dispatcher.max_inflight == 8 and s.dispatcher.allow == ["127.0.0.1/32"]
    assert s.projector.batch_records == 100
    assert s.next.zone == "Asia/Kolkata"
    assert s.demo.seconds == 2.5
    assert s.dev.kafka_port == 29999
    assert s.state_dir == Path("/tmp/horae-state")
    assert Settings().planner.metrics_port == 0  # unset: not served, the same for every process


def test_the_old_dispatch_names_are_not_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HORAE_DISPATCH_MAX_INFLIGHT", "8")
    assert Settings().dispatcher.max_inflight == 256


def test_secrets_are_hidden_in_repr_and_str(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HORAE_TENANT_KEYS", '{"acme": {"acme-1": "tenant-secret"}}')
    monkeypatch.setenv("HORAE_PLATFORM_KEY", "platform-secret")
    monkeypatch.setenv(
        "HORAE_DISPATCHER_WEBHOOK_SECRETS", '{"acme": {"main": "whsec_webhooksecret"}}'
    )
    monkeypatch.setenv("HORAE_DISPATCHER_CALLBACK_SECRET", "callback-secret")
    monkeypatch.setenv("HORAE_DATABASE_URL", "postgresql://horae:db-password@db/horae")
    s = Settings()
    for text in (repr(s), str(s), repr(s.dispatcher), str(s.dispatcher)):
        for secret in ("tenant-secret", "platform-secret", "webhooksecret", "callback-secret"):
            assert secret not in text
        assert "db-password" not in text
    assert s.database_url == "postgresql://horae:db-password@db/horae"
    assert s.dispatcher.webhook_secrets["acme"]["main"].get_secret_value() == "whsec_webhooksecret"
    # the platform key joins every tenant's map, so planners accept what the breaker signs
    assert s.tenant_key_bytes() == {
        "acme": {"acme-1": b"tenant-secret", "horae-platform": b"platform-secret"}
    }


def test_every_field_says_what_it_is() -> None:
    models: list[type[BaseSettings]] = [Settings, *SECTIONS.values()]
    for model in models:
        for name, field in model.model_fields.items():
            assert name in SECTIONS or field.description, f"{model.__name__}.{name}"


def _commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, (*path, name))


def _model_field(dest: str) -> tuple[type[BaseSettings], str]:
    section, _, name = dest.removeprefix("setting:").rpartition(".")
    return (SECTIONS[section] if section else Settings), name


def _values(annotation: Any) -> tuple[str, str, Any]:
    """(env value, flag value, the flag's value once parsed) for a flag of this type."""
    if annotation == list[str]:  # a repeated flag; its env is a JSON list
        return '["from-env"]', "from-flag", ["from-flag"]
    kinds = [a for a in get_args(annotation) if a is not type(None)] or [annotation]
    kind = annotation if get_origin(annotation) is Literal else kinds[0]
    if get_origin(kind) is Literal:
        choices = get_args(kind)
        return str(choices[0]), str(choices[-1]), choices[-1]  # Literal[1, 3] too
    samples: dict[Any, tuple[str, str, Any]] = {
        int: ("7", "9", 9),
        float: ("0.5", "1.5", 1.5),
        str: ("from-env", "from-flag", "from-flag"),
        Path: ("/tmp/from-env", "/tmp/from-flag", Path("/tmp/from-flag")),
    }
    return samples[kind]


def _generated(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if a.dest.startswith("setting:")]


def test_every_flag_shows_its_env_name_and_overrides_the_env(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    checked = set()
    for path, parser in _commands(build_parser()):
        text = parser.format_help()
        for action in _generated(parser):
            model, name = _model_field(action.dest)
            env = env_name(model, name)
            assert env in text, f"horae {' '.join(path)} --help does not name {env}"
            flag = action.option_strings[0]
            section = action.dest.removeprefix("setting:").rpartition(".")[0]
            if isinstance(action, argparse.BooleanOptionalAction):
                env_value, argv, expected = "true", [f"--no-{flag[2:]}"], False
            else:
                env_value, flag_value, expected = _values(model.model_fields[name].annotation)
                argv = [flag, flag_value]
            with monkeypatch.context() as m:
                m.setenv(env, env_value)
                base = Settings()
                resolved = settings_from_args(build_parser().parse_args([*path, *argv]), base)
            holder = getattr(resolved, section) if section else resolved
            assert getattr(holder, name) == expected, f"horae {' '.join(path)} {flag}"
            checked.add((model, name))
    # every scalar field of every section is a flag of some command
    for model in SECTIONS.values():
        for name, field in model.model_fields.items():
            if not re.search(r"dict|list|Secret", str(field.annotation)):
                assert (model, name) in checked, f"{model.__name__}.{name} has no flag"


#: the tenant CLI (docs/cli.md) and the operator's token command: their options say what to act
#: on, one invocation at a time; only the API connection is configuration (HORAE_API_URL/TOKEN)
TENANT_COMMANDS = {
    "triggers",
    "targets",
    "history",
    "lateness",
    "fires",
    "backfill",
    "apply",
    "diff",
    "dead-letters",
}
PER_INVOCATION = TENANT_COMMANDS | {"tokens"}


def test_every_flag_of_every_command_has_an_environment_fallback() -> None:
    """The README's promise: no hand-written option on a process or operator command; each one is
    a settings field. The tenant CLI's connection flags fall back to HORAE_API_URL/TOKEN."""
    for path, parser in _commands(build_parser()):
        options = [
            a for a in parser._actions
            if a.option_strings and not isinstance(a, argparse._HelpAction)
        ]  # fmt: skip
        if path and path[0] in PER_INVOCATION:
            if path[0] in TENANT_COMMANDS and options:
                flags = {f for a in options for f in a.option_strings}
                assert {"--api-url", "--token"} <= flags, f"horae {' '.join(path)}"
            continue
        for action in options:
            assert action.dest.startswith("setting:"), (
                f"horae {' '.join(path)} {action.option_strings[0]} has no environment variable"
            )


def test_a_repeated_flag_collects_its_values() -> None:
    args = build_parser().parse_args(["dlq", "list", "--fire-key", "a", "--fire-key", "b"])
    assert settings_from_args(args, Settings()).dlq.fire_key == ["a", "b"]


def test_flags_not_given_leave_the_env_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HORAE_PLANNER_TICK_S", "0.3")
    args = build_parser().parse_args(["planner", "--max-skew-s", "5"])
    s = settings_from_args(args, Settings())
    assert (s.planner.tick_s, s.planner.max_skew_s) == (0.3, 5.0)


def test_an_invalid_setting_is_one_line_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HORAE_NEXT_COUNT", "many")
    assert main(["next", "@hourly"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("horae next: invalid next settings: count:")
    assert len(err.strip().splitlines()) == 1


def test_nothing_but_the_settings_reads_horae_variables() -> None:
    reads = re.compile(r"""(environ\.get\(|environ\[|getenv\()\s*f?["']HORAE_|env_default\(""")
    offenders = [
        f"{path.relative_to(HORAE.parent)}:{n}"
        for path in sorted(HORAE.rglob("*.py"))
        if path.name != "settings.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if reads.search(line)
    ]
    assert offenders == []


def test_failpoints_are_armed_from_a_spec() -> None:
    try:
        failpoints.arm(" before_commit=0.25, after_commit ,")
        assert failpoints.armed() == {"before_commit": 0.25, "after_commit": 1.0}
        failpoints.arm("")
        assert failpoints.armed() == {}
    finally:
        failpoints.arm("")
