"""``horae tokens issue``: prints a token the API verifies, signed with the active kid; refuses
a missing key or an unknown tenant id."""

from __future__ import annotations

import json
from collections.abc import Iterator

import jwt
import pytest

from horae.api.auth import verify
from horae.cli.main import main
from horae.contracts.events import Role
from horae.settings import get_settings

KEYS = {"old": "o" * 32, "new": "n" * 32}


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("HORAE_API_TOKEN_KEYS", json.dumps(KEYS))
    monkeypatch.setenv("HORAE_API_TOKEN_KID", "new")
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


@pytest.mark.usefixtures("env")
def test_issue_prints_a_verifiable_token(capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "tokens",
        "issue",
        "--tenant",
        "acme",
        "--role",
        "author",
        "--role",
        "read",
        "--ttl",
        "60",
        "--subject",
        "ops",
    ]
    assert main(argv) == 0
    token = capsys.readouterr().out.strip()
    assert jwt.get_unverified_header(token)["kid"] == "new"
    who = verify(token, KEYS)
    assert (who.tenant, who.subject, who.roles) == ("acme", "ops", {Role.AUTHOR, Role.READ})


@pytest.mark.usefixtures("env")
def test_issue_refuses_bad_input(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert main(["tokens", "issue", "--tenant", "Not A Tenant", "--role", "read"]) == 2
    monkeypatch.setenv("HORAE_API_TOKEN_KID", "gone")
    get_settings.cache_clear()
    assert main(["tokens", "issue", "--tenant", "acme", "--role", "read"]) == 2
    assert "gone" in capsys.readouterr().err
