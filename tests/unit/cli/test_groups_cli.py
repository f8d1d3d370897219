"""``horae triggers ... --selector``: the policies a group amend's ``--set`` flags make, and the
usage errors refused before any call (:mod:`horae.cli.groups`)."""

from __future__ import annotations

import pytest

from horae.cli.groups import policies_of
from horae.cli.main import main


def test_set_flags_become_nested_policies() -> None:
    assert policies_of(["policies.misfire=skip", "policies.retry.max_attempts=3"]) == {
        "misfire": "skip",
        "retry": {"max_attempts": 3},
    }


@pytest.mark.parametrize("flag", ["misfire=skip", "policies=3", "policies.=x", "labels.a=b"])
def test_only_policies_paths(flag: str) -> None:
    with pytest.raises(ValueError, match=r"only policies\.PATH=VALUE"):
        policies_of([flag])


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["triggers", "pause", "nightly", "--selector", "env=prod"], "not both"),
        (["triggers", "pause", "--selector", "env!=prod"], "only equality"),
        (["triggers", "pause"], "give an ID or --selector"),
        (["triggers", "amend", "--selector", "env=prod", "--set", "labels.a=b"], "policies"),
        (["triggers", "amend", "--selector", "env=prod"], "with --selector give --set"),
        (["dead-letters", "redrive", "--state", "dead"], "name them"),
    ],
)
def test_usage_errors_call_nothing(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*argv, "--api-url", "http://127.0.0.1:9"]) == 2
    assert says in capsys.readouterr().err
