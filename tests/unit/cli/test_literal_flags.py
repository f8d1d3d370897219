"""A flag of a ``Literal`` setting takes its choices' type: ``--brokers 3`` is the int 3 of
``Literal[1, 3]`` (``horae chaos``), ``--profile long`` the str of ``Literal["short", "long"]``."""

from __future__ import annotations

import pytest

from horae.cli.common import settings_from_args
from horae.cli.main import build_parser
from horae.settings import Settings


def test_an_int_literal_flag_is_an_int() -> None:
    args = build_parser().parse_args(["chaos", "--brokers", "3", "--profile", "long"])
    chaos = settings_from_args(args, Settings()).chaos
    assert (chaos.brokers, chaos.profile) == (3, "long")
    assert Settings().chaos.brokers == 1


def test_an_int_literal_setting_reads_its_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HORAE_CHAOS_BROKERS", "3")
    assert Settings().chaos.brokers == 3


def test_an_int_literal_flag_refuses_other_values(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["chaos", "--brokers", "2"])
    assert "invalid choice: 2" in capsys.readouterr().err
