"""Identity tokens (:mod:`horae.outbound.oidc`): their claims, the keys' rotation, and
verification with PyJWT as a target that knows nothing of Horae would do it: the JWKS the API
publishes, the issuer and its own audience. A token meant for another target, an expired one and
one whose key left the JWKS are refused."""

from __future__ import annotations

import json
import stat
import time
from pathlib import Path
from typing import Any

import jwt
import pytest

from horae.outbound.oidc import (
    ALG,
    MAX_ATTEMPT_S,
    KeySet,
    MemoryOidcKeys,
    OidcSigner,
    attempt_id,
    claims,
    default_audience,
    discovery,
    jwks,
    max_token_lifetime_s,
    new_key,
)
from horae.outbound.oidc_files import SET_FILE, OidcKeyFiles

ISSUER = "https://horae.example"
FIRE_KEY = "acme/nightly/2026-12-02T05:00:00Z/0/scheduled"
SKEW = 30


def mint(signer: OidcSigner, now: float, audience: str = "https://a.example", **kw: Any) -> str:
    token = signer.token(
        tenant="acme",
        trigger_id="nightly",
        fire_key=FIRE_KEY,
        attempt=kw.pop("attempt", 2),
        audience=audience,
        now=now,
        timeout_s=kw.pop("timeout_s", 10.0),
    )
    assert token is not None
    return token


def verify(token: str, published: dict[str, Any], audience: str) -> dict[str, Any]:
    """What a target does with any JWT library: the key named by the token's kid in the JWKS it
    fetched, the algorithm it expects, its issuer and its own audience."""
    key_set = jwt.PyJWKSet.from_dict(published)
    kid = jwt.get_unverified_header(token)["kid"]
    key = key_set[kid]  # KeyError: the key is not (or no longer) published
    decoded: dict[str, Any] = jwt.decode(
        token, key.key, algorithms=["ES256"], audience=audience, issuer=ISSUER
    )
    return decoded


def keys_signing_since(at: int) -> MemoryOidcKeys:
    store = MemoryOidcKeys()
    store.rotate(at, 0, SKEW)
    return store


def test_the_claims_name_the_attempt_and_expire_with_it() -> None:
    c = claims(
        issuer=ISSUER,
        tenant="acme",
        trigger_id="nightly",
        fire_key=FIRE_KEY,
        attempt=3,
        audience="https://a.example",
        now=1_800_000_000.7,
        timeout_s=2.5,
        skew_s=SKEW,
    )
    assert c == {
        "iss": ISSUER,
        "sub": "acme/nightly",
        "aud": "https://a.example",
        "iat": 1_800_000_000,
        "exp": 1_800_000_000 + 3 + SKEW,
        "jti": f"{FIRE_KEY}#3",
        "tenant": "acme",
        "fire_key": FIRE_KEY,
        "attempt": 3,
    }
    assert attempt_id(FIRE_KEY, 1) != attempt_id(FIRE_KEY, 2)
    longest = claims(**{**_args(), "timeout_s": 10_000.0})
    assert longest["exp"] - longest["iat"] == MAX_ATTEMPT_S + SKEW == max_token_lifetime_s(SKEW)


def _args() -> dict[str, Any]:
    return {
        "issuer": ISSUER,
        "tenant": "acme",
        "trigger_id": "t",
        "fire_key": FIRE_KEY,
        "attempt": 1,
        "audience": "x",
        "now": 0.0,
        "timeout_s": 1.0,
        "skew_s": SKEW,
    }


@pytest.mark.parametrize(
    ("url", "origin"),
    [
        ("https://Hooks.Acme.example/nightly?x=1", "https://hooks.acme.example"),
        ("https://hooks.acme.example:443/a", "https://hooks.acme.example"),
        ("https://hooks.acme.example:8443/a", "https://hooks.acme.example:8443"),
        ("http://127.0.0.1:8080/hook", "http://127.0.0.1:8080"),
        ("http://[::1]:81/h", "http://[::1]:81"),
    ],
)
def test_the_default_audience_is_the_url_origin(url: str, origin: str) -> None:
    assert default_audience(url) == origin


def test_a_stranger_verifies_a_token_with_pyjwt_and_the_published_jwks() -> None:
    now = time.time()
    store = keys_signing_since(int(now) - 60)
    signer = OidcSigner(ISSUER, store, SKEW)
    token = mint(signer, now)
    published = json.loads(json.dumps(jwks(store.key_set(), now, SKEW)))  # as served
    header = jwt.get_unverified_header(token)
    assert header["alg"] == ALG and header["kid"] == store.key_set().keys[0].kid
    got = verify(token, published, "https://a.example")
    assert got["sub"] == "acme/nightly" and got["jti"] == f"{FIRE_KEY}#2"
    assert got["fire_key"] == FIRE_KEY and got["exp"] == int(now) + 10 + SKEW
    (entry,) = published["keys"]
    assert set(entry) == {"kty", "crv", "x", "y", "kid", "alg", "use"}  # no private member
    assert discovery(ISSUER)["jwks_uri"] == f"{ISSUER}/.well-known/jwks.json"


def test_a_token_for_target_a_is_refused_by_target_b() -> None:
    now = time.time()
    store = keys_signing_since(int(now) - 60)
    token = mint(OidcSigner(ISSUER, store, SKEW), now, audience="https://a.example")
    published = jwks(store.key_set(), now, SKEW)
    assert verify(token, published, "https://a.example")["aud"] == "https://a.example"
    with pytest.raises(jwt.InvalidAudienceError):
        verify(token, published, "https://b.example")


def test_an_expired_token_is_refused() -> None:
    now = time.time()
    store = keys_signing_since(int(now) - 3600)
    signer = OidcSigner(ISSUER, store, SKEW)
    old = mint(signer, now - 100, timeout_s=10.0)  # expired at now - 100 + 10 + 30
    with pytest.raises(jwt.ExpiredSignatureError):
        verify(old, jwks(store.key_set(), now, SKEW), "https://a.example")


def test_a_forged_token_is_refused() -> None:
    now = time.time()
    store = keys_signing_since(int(now) - 60)
    other = keys_signing_since(int(now) - 60)
    forged = mint(OidcSigner(ISSUER, other, SKEW), now)
    published = jwks(store.key_set(), now, SKEW)
    with pytest.raises(KeyError):  # its kid is not published
        verify(forged, published, "https://a.example")
    header = jwt.get_unverified_header(forged)
    key = jwt.PyJWKSet.from_dict(published).keys[0]
    assert header["kid"] != key.key_id
    with pytest.raises(jwt.InvalidSignatureError):  # signed by a key that is not ours
        jwt.decode(forged, key.key, algorithms=["ES256"], audience="https://a.example")


def test_rotation_publishes_before_signing_and_keeps_the_old_key_until_its_tokens_expired() -> None:
    now = time.time()
    lead = 600
    store = keys_signing_since(int(now) - 5000)
    old = store.key_set().keys[0]
    signer = OidcSigner(ISSUER, store, SKEW)
    new = store.rotate(now - 700, lead, SKEW)  # signs from now - 100
    assert new.activates_at == int(now - 700) + lead
    ring = store.key_set()
    # published at once, signing only from its activation
    before = now - 300
    assert {k.kid for k in ring.published(before, SKEW)} == {old.kid, new.kid}
    assert ring.signing(before) == old and ring.signing(now) == new
    by_old = mint(signer, now - 120, timeout_s=300.0)  # exp = now - 120 + 330 = now + 210
    assert jwt.get_unverified_header(by_old)["kid"] == old.kid
    by_new = mint(signer, now)
    assert jwt.get_unverified_header(by_new)["kid"] == new.kid
    # in the window: both verify against the JWKS of now
    published = jwks(ring, now, SKEW)
    assert verify(by_old, published, "https://a.example")["iss"] == ISSUER
    assert verify(by_new, published, "https://a.example")["iss"] == ISSUER
    # once every token the old key signed expired, the old key leaves the JWKS and is refused
    retired = ring.retires_at(old, SKEW)
    assert retired == new.activates_at + MAX_ATTEMPT_S + SKEW
    assert {k.kid for k in ring.published(retired - 1, SKEW)} == {old.kid, new.kid}
    after = jwks(ring, retired, SKEW)
    assert [k["kid"] for k in after["keys"]] == [new.kid]
    with pytest.raises(KeyError):
        jwt.PyJWKSet.from_dict(after)[old.kid]
    # the next rotation drops it from the store, private key included
    store.rotate(retired, lead, SKEW)
    assert old.kid not in {k.kid for k in store.key_set().keys}
    assert store.private_key(old.kid) is None and store.private_key(new.kid) is not None


def test_no_key_signs_before_the_first_activation() -> None:
    store = MemoryOidcKeys()
    signer = OidcSigner(ISSUER, store, SKEW)
    assert (
        signer.token(
            tenant="acme",
            trigger_id="t",
            fire_key=FIRE_KEY,
            attempt=1,
            audience="a",
            now=1000.0,
            timeout_s=1.0,
        )
        is None
    )
    store.rotate(1000.0, 600, SKEW)
    assert store.key_set().signing(1599.0) is None and store.key_set().signing(1600.0)
    assert [k["kid"] for k in jwks(store.key_set(), 1000.0, SKEW)["keys"]]  # published already


def test_a_key_id_is_added_once() -> None:
    key, _ = new_key(10, kid="k")
    with pytest.raises(ValueError, match="already"):
        KeySet((key,)).with_key(new_key(20, kid="k")[0], 0, SKEW)


def test_the_file_adapter_keeps_private_keys_apart_and_sees_a_rotation(tmp_path: Path) -> None:
    clock = [0.0]
    dispatcher = OidcKeyFiles(tmp_path / "keys", monotonic=lambda: clock[0])
    assert dispatcher.key_set() == KeySet()
    now = time.time()
    first = dispatcher.rotate(now - 100, 0, SKEW)
    private = tmp_path / "keys" / f"{first.kid}.pem"
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    public = json.loads((tmp_path / "keys" / SET_FILE).read_text())
    assert "PRIVATE" not in json.dumps(public) and "d" not in public["keys"][0]["jwk"]
    # the API's mount: the public set alone (a link to the dispatcher's, which rotations replace)
    api_dir = tmp_path / "api"
    api_dir.mkdir()
    (api_dir / SET_FILE).symlink_to(tmp_path / "keys" / SET_FILE)
    api = OidcKeyFiles(api_dir, monotonic=lambda: clock[0])
    assert [k.kid for k in api.key_set().keys] == [first.kid]
    assert api.private_key(first.kid) is None
    assert (
        OidcSigner(ISSUER, api, SKEW).token(
            tenant="acme",
            trigger_id="t",
            fire_key=FIRE_KEY,
            attempt=1,
            audience="a",
            now=now,
            timeout_s=1.0,
        )
        is None
    )  # the API cannot sign
    token = mint(OidcSigner(ISSUER, dispatcher, SKEW), now)
    assert verify(token, jwks(api.key_set(), now, SKEW), "https://a.example")["sub"]
    # a rotation elsewhere reaches a reader within a second
    second = OidcKeyFiles(tmp_path / "keys").rotate(now, 600, SKEW)
    assert [k.kid for k in api.key_set().keys] == [first.kid]  # checked less than a second ago
    clock[0] += 1.0
    assert [k.kid for k in api.key_set().keys] == [first.kid, second.kid]
    assert api.private_key("../keys/" + first.kid) is None
