"""``horae oidc rotate`` adds a key to the directory (published now, signing after the lead) and
``horae oidc keys`` lists what each key does; both refuse to run without a directory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from horae.cli.common import settings_from_args
from horae.cli.main import build_parser
from horae.outbound.oidc_files import OidcKeyFiles
from horae.settings import Settings, get_settings


def main(argv: list[str]) -> int:
    """The command as ``horae`` runs it, without the process set-up (the process-wide Kafka
    connection ``horae.cli.main.main`` installs would outlive this test)."""
    args = build_parser().parse_args(argv)
    code: int = args.func(settings_from_args(args, Settings()), args)
    return code


@pytest.fixture(autouse=True)
def fresh_settings() -> Iterator[None]:
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def test_rotate_then_list(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HORAE_OIDC_KEYS_DIR", str(tmp_path))
    assert main(["oidc", "rotate", "--oidc-publish-lead-s", "0"]) == 0
    first = capsys.readouterr().out.split()[0]
    assert main(["oidc", "rotate"]) == 0  # the default lead: 600 s
    second = capsys.readouterr().out.split()[0]
    keys = OidcKeyFiles(tmp_path).key_set().keys
    assert [k.kid for k in keys] == [first, second]
    assert keys[1].activates_at - keys[0].activates_at >= 600
    assert main(["oidc", "keys"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split("\t")[:2] for line in lines] == [
        [first, "signing"],
        [second, "publishing"],
    ]
    assert all(line.endswith("\tprivate") for line in lines)


def test_no_directory_is_refused(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("HORAE_OIDC_KEYS_DIR", raising=False)
    assert main(["oidc", "rotate"]) == 2
    assert "HORAE_OIDC_KEYS_DIR" in capsys.readouterr().err
