"""The API's token verifier remembers verified tokens but checks expiry on every use, and never
remembers a token it refused."""

from __future__ import annotations

from datetime import timedelta

import pytest

from horae.api.auth import TokenError, Verifier, issue
from horae.contracts.events import Role
from tests.unit.api.support import KEYS, NOW


def test_a_remembered_token_still_expires() -> None:
    verifier = Verifier(KEYS)
    token = issue(KEYS, "k1", tenant="acme", roles=[Role.READ], subject="s", ttl_s=60, now=NOW)
    assert verifier(token, NOW).tenant == "acme"
    assert verifier(token, NOW + timedelta(seconds=59)).subject == "s"
    with pytest.raises(TokenError, match="expired"):
        verifier(token, NOW + timedelta(seconds=60))


def test_a_refused_token_is_refused_every_time_and_the_memory_is_bounded() -> None:
    verifier = Verifier(KEYS, size=2)
    forged = issue({"k1": "another-key-of-at-least-32-bytes!!"}, "k1", tenant="acme",
                   roles=[Role.AUTHOR], subject="s", ttl_s=60, now=NOW)  # fmt: skip
    for _ in range(2):
        with pytest.raises(TokenError, match="invalid"):
            verifier(forged, NOW)
    tokens = [
        issue(KEYS, "k2", tenant=t, roles=[Role.READ], subject="s", ttl_s=60, now=NOW)
        for t in ("a", "b", "c")
    ]
    assert [verifier(t, NOW).tenant for t in tokens] == ["a", "b", "c"]
    assert len(verifier._seen) == 2
