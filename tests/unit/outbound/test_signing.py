"""Signing headers (checked against the reference ``standardwebhooks`` library) and tokens."""

from __future__ import annotations

import base64
import hashlib
import hmac
import random
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st
from standardwebhooks import Webhook, WebhookVerificationError

from horae.outbound.signing import (
    CALLBACK_TOKEN_HEADER,
    ReplayGuard,
    SigningKeys,
    TokenError,
    attempt_headers,
    body_signature,
    decode_secret,
    hmac_sha256,
    issue_token,
    verify_token,
)

OLD = "whsec_" + base64.b64encode(b"old-secret-0123456789abcdef").decode()
NEW = "whsec_" + base64.b64encode(b"new-secret-fedcba9876543210").decode()
FIRE_KEY = "t1/trig-9/2025-03-30T01:30:00Z/0"
BODY = b'{"trigger":"trig-9","scheduled_at":"2025-03-30T01:30:00Z"}'


def test_x_signature_is_hex_hmac_of_the_body_with_the_primary_secret() -> None:
    keys = SigningKeys.from_secrets(OLD, NEW)
    headers = attempt_headers(body=BODY, fire_key=FIRE_KEY, keys=keys, now=1_700_000_000.9)
    expected = hmac.new(b"old-secret-0123456789abcdef", BODY, hashlib.sha256).hexdigest()
    assert headers["X-Signature"] == f"sha256={expected}"
    assert headers["Idempotency-Key"] == headers["webhook-id"] == FIRE_KEY
    assert headers["webhook-timestamp"] == "1700000000"
    assert CALLBACK_TOKEN_HEADER not in headers


def test_standard_webhooks_reference_library_verifies_our_headers() -> None:
    now = time.time()  # the reference library checks the timestamp against its own clock
    headers = attempt_headers(
        body=BODY, fire_key=FIRE_KEY, keys=SigningKeys.from_secrets(OLD), now=now
    )
    assert Webhook(OLD).verify(BODY, headers) == {
        "trigger": "trig-9",
        "scheduled_at": "2025-03-30T01:30:00Z",
    }
    with pytest.raises(WebhookVerificationError):
        Webhook(NEW).verify(BODY, headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(OLD).verify(BODY + b" ", headers)


def test_rotation_signs_with_both_secrets_and_each_verifies() -> None:
    headers = attempt_headers(
        body=BODY, fire_key=FIRE_KEY, keys=SigningKeys.from_secrets(NEW, OLD), now=time.time()
    )
    sigs = headers["webhook-signature"].split(" ")
    assert len(sigs) == 2 and all(s.startswith("v1,") for s in sigs)
    for secret in (OLD, NEW):
        Webhook(secret).verify(BODY, headers)
    assert headers["X-Signature"] == body_signature(BODY, decode_secret(NEW))


@given(
    body=st.text(max_size=200).map(str.encode),  # the reference reads the body as UTF-8
    key=st.binary(min_size=1, max_size=64),
)
def test_any_body_and_key_verify_with_the_reference(body: bytes, key: bytes) -> None:
    secret = "whsec_" + base64.b64encode(key).decode()
    headers = attempt_headers(
        body=body, fire_key="k", keys=SigningKeys.from_secrets(secret), now=time.time()
    )
    Webhook(secret).verify(body, headers, json_parse=False)


def test_secret_decoding() -> None:
    assert decode_secret("whsec_" + base64.b64encode(b"abc").decode()) == b"abc"
    assert decode_secret(base64.b64encode(b"abcd").decode().rstrip("=")) == b"abcd"
    for bad in ("whsec_", "whsec_not*base64", ""):
        with pytest.raises(ValueError):
            decode_secret(bad)


# --- callback tokens -----------------------------------------------------------------------

SECRET = b"callback-secret"
NOW = 1_700_000_000.0


def _token(**over: object) -> str:
    args: dict[str, object] = dict(
        tenant="t1", trigger="trig-9", fire_key=FIRE_KEY, attempt=3, now=NOW, ttl_s=600
    )
    args.update(over)
    return issue_token(secret=SECRET, **args)  # type: ignore[arg-type]


def test_token_round_trip_and_headers() -> None:
    token = _token()
    claims = verify_token(token, NOW + 10, SECRET, expect={"tenant": "t1", "attempt": 3})
    assert (claims.tenant, claims.trigger, claims.fire_key, claims.attempt) == (
        "t1",
        "trig-9",
        FIRE_KEY,
        3,
    )
    assert (claims.issued_at, claims.expires_at) == (int(NOW), int(NOW) + 600)
    assert claims.token_id and _token() == token  # deterministic
    assert claims.tzdata is None
    assert verify_token(_token(tzdata="2025b"), NOW + 10, SECRET).tzdata == "2025b"
    keys = SigningKeys.from_secrets(OLD)
    headers = attempt_headers(body=b"", fire_key="k", keys=keys, now=NOW, callback_token=token)
    assert headers[CALLBACK_TOKEN_HEADER] == token


@pytest.mark.parametrize(
    ("token", "now", "secret", "reason"),
    [
        (lambda: _token(), NOW + 600, SECRET, "expired"),
        (lambda: _token(), NOW + 10_000, SECRET, "expired"),
        (lambda: _token(now=NOW + 3600), NOW, SECRET, "not_yet_valid"),
        (lambda: _token(), NOW, b"other-secret", "bad_signature"),
        (lambda: _token().replace("h1.", "h2.", 1), NOW, SECRET, "malformed"),
        (lambda: "h1.only-two", NOW, SECRET, "malformed"),
        (lambda: "h1.!!!.???", NOW, SECRET, "malformed"),
        (lambda: _swap_payload(_token(), _token(attempt=4)), NOW, SECRET, "bad_signature"),
    ],
    ids=["at-expiry", "long-expired", "future", "wrong-secret", "version", "parts", "b64", "swap"],
)
def test_token_refusals(token: object, now: float, secret: bytes, reason: str) -> None:
    assert callable(token)
    with pytest.raises(TokenError) as info:
        verify_token(token(), now, secret)
    assert info.value.reason == reason


def _swap_payload(a: str, b: str) -> str:
    """The payload of ``b`` under the MAC of ``a``: a scope escalation attempt."""
    return ".".join([a.split(".")[0], b.split(".")[1], a.split(".")[2]])


def test_token_scope_mismatch() -> None:
    with pytest.raises(TokenError, match="scope_mismatch"):
        verify_token(_token(), NOW, SECRET, expect={"tenant": "t2"})
    with pytest.raises(TokenError, match="scope_mismatch"):
        verify_token(_token(), NOW, SECRET, expect={"attempt": 2})


def test_replay_guard_refuses_a_second_use_and_forgets_expired_ids() -> None:
    guard = ReplayGuard()
    first = verify_token(_token(), NOW, SECRET)
    guard.use(first, NOW)
    with pytest.raises(TokenError, match="replayed"):
        guard.use(verify_token(_token(), NOW + 1, SECRET), NOW + 1)
    guard.use(verify_token(_token(attempt=4), NOW, SECRET), NOW + 2)  # another attempt: fine
    assert len(guard) == 2
    later = verify_token(_token(now=NOW + 700), NOW + 700, SECRET)
    guard.use(later, NOW + 700)
    assert len(guard) == 1  # the first two expired at NOW + 600 and were dropped


def test_issue_token_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        _token(ttl_s=0)
    with pytest.raises(ValueError):
        _token(attempt=-1)


@pytest.mark.parametrize("key_len", [1, 16, 32, 63, 64, 65, 200])
def test_hmac_from_a_keyed_copy_equals_the_standard_library(key_len: int) -> None:
    rng = random.Random(key_len)
    key = rng.randbytes(key_len)
    for msg_len in (0, 1, 55, 64, 65, 1000):
        msg = rng.randbytes(msg_len)
        assert hmac_sha256(key, msg) == hmac.digest(key, msg, "sha256")
        assert hmac_sha256(key, msg) == hmac_sha256(key, msg)  # the keyed object is copied


# --- the signatures are those of the hand-rolled HMAC the dispatcher signed with before ------

_IPAD = bytes(x ^ 0x36 for x in range(256))
_OPAD = bytes(x ^ 0x5C for x in range(256))


def _hand_rolled_hmac(key: bytes, msg: bytes) -> bytes:
    """RFC 2104 over SHA-256 as ``horae.outbound.signing`` computed it until the standard
    library's keyed copy replaced it: the key padded to the block, XOR ipad and XOR opad."""
    if len(key) > 64:
        key = hashlib.sha256(key).digest()
    key = key.ljust(64, b"\0")
    inner = hashlib.sha256(key.translate(_IPAD) + msg).digest()
    return hashlib.sha256(key.translate(_OPAD) + inner).digest()


def _hand_rolled_headers(body: bytes, fire_key: str, keys: SigningKeys, now: float) -> list[str]:
    """``X-Signature`` and ``webhook-signature`` of the old implementation."""
    signed = b"%s.%d.%s" % (fire_key.encode(), int(now), body)
    sigs = [
        "v1," + base64.b64encode(_hand_rolled_hmac(key, signed)).decode()
        for key in (keys.primary, keys.secondary)
        if key is not None
    ]
    return ["sha256=" + _hand_rolled_hmac(keys.primary, body).hex(), " ".join(sigs)]


@given(
    body=st.binary(max_size=300),
    fire_key=st.text(max_size=60),
    primary=st.binary(min_size=1, max_size=130),
    secondary=st.none() | st.binary(min_size=1, max_size=130),
    now=st.floats(min_value=0, max_value=4e9),
)
def test_signatures_are_byte_identical_to_the_hand_rolled_ones(
    body: bytes, fire_key: str, primary: bytes, secondary: bytes | None, now: float
) -> None:
    keys = SigningKeys(primary, secondary)
    headers = attempt_headers(body=body, fire_key=fire_key, keys=keys, now=now)
    assert [headers["X-Signature"], headers["webhook-signature"]] == _hand_rolled_headers(
        body, fire_key, keys, now
    )
    assert hmac_sha256(primary, body) == _hand_rolled_hmac(primary, body)


@given(secret=st.binary(min_size=1, max_size=130), attempt=st.integers(0, 1000))
def test_callback_tokens_are_byte_identical_to_the_hand_rolled_ones(
    secret: bytes, attempt: int
) -> None:
    token = issue_token(
        tenant="t1", trigger="g", fire_key="k", attempt=attempt, now=NOW, ttl_s=60, secret=secret
    )
    version, payload, mac = token.split(".")
    old = _hand_rolled_hmac(secret, f"{version}.{payload}".encode())
    assert mac == base64.urlsafe_b64encode(old).rstrip(b"=").decode()
    assert verify_token(token, NOW, secret).attempt == attempt
