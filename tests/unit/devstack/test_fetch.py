"""The Maven closure fetch shared by the broker's and MirrorMaker 2's jars."""

from __future__ import annotations

from pathlib import Path

import pytest

from horae.devstack import StackError
from horae.devstack.kafka import FILES, fetch_closure


def test_a_complete_closure_is_not_fetched_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / ".complete").write_text("ok\n")
    monkeypatch.setenv("PATH", "")  # no mvn: a fetch would raise
    fetch_closure(FILES / "pom.xml", tmp_path, lib, "4.1.0", witness="*.jar", what="the jars")


def test_without_maven_it_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "")
    with pytest.raises(
        StackError,
        match=r"Maven \(`mvn`\) is not installed; it fetches MM2's jars.*maven`\) or else\.$",
    ):
        fetch_closure(
            FILES / "pom.xml", tmp_path, tmp_path / "lib", "4.1.0",
            witness="*.jar", what="MM2's jars", instead=" or else",
        )  # fmt: skip
    assert not (tmp_path / "lib").exists()
