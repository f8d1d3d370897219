"""The default directories follow the XDG base directory specification."""

from __future__ import annotations

from pathlib import Path

import pytest

from horae.paths import default_cache_dir, default_state_dir


def test_xdg_variables_are_used_when_absolute(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert default_state_dir() == tmp_path / "state" / "horae"
    assert default_cache_dir() == tmp_path / "cache" / "horae"


@pytest.mark.parametrize("value", [None, "", "relative/dir"])
def test_home_fallback_when_unset_empty_or_relative(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, value: str | None
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("XDG_STATE_HOME", "XDG_CACHE_HOME"):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    assert default_state_dir() == tmp_path / ".local" / "state" / "horae"
    assert default_cache_dir() == tmp_path / ".cache" / "horae"
