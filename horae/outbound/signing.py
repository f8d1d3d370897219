"""Signatures and callback tokens of outbound attempts. Pure functions: time is an argument.

Headers of every attempt (:func:`attempt_headers`):

* ``X-Signature: sha256=<hex HMAC-SHA256(body)>`` keyed with the *primary* secret's bytes;
* Standard Webhooks: ``webhook-id`` (the fire key), ``webhook-timestamp`` (unix seconds),
  ``webhook-signature: v1,<base64 HMAC-SHA256("{id}.{timestamp}.{body}")>`` — during a rotation
  one ``v1,`` signature per secret, space-separated, primary first, so that a receiver holding
  either the old or the new secret verifies;
* ``Idempotency-Key: <fire key>`` (the same on every attempt of a fire);
* optionally ``Horae-Callback-Token``: a token scoped to (tenant, trigger, fire key, attempt)
  that expires; :func:`verify_token` checks it; :class:`ReplayGuard` refuses a second use.

Secrets are Standard Webhooks secrets, ``whsec_<base64 of the key bytes>``.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import heapq
import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass, field

SECRET_PREFIX = "whsec_"
TOKEN_VERSION = "h1"
CALLBACK_TOKEN_HEADER = "Horae-Callback-Token"
#: ``json.dumps(..., separators=(",", ":"), sort_keys=True)`` without building an encoder per call
_COMPACT_SORTED = json.JSONEncoder(separators=(",", ":"), sort_keys=True)


def decode_secret(secret: str) -> bytes:
    """Key bytes of a ``whsec_<base64>`` secret (the prefix is optional). Raises ``ValueError``
    on bad base64 or an empty key."""
    encoded = secret.removeprefix(SECRET_PREFIX)
    try:
        key = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
    except binascii.Error as exc:
        raise ValueError(f"webhook secret is not base64: {exc}") from None
    if not key:
        raise ValueError("webhook secret is empty")
    return key


@dataclass(frozen=True, slots=True)
class SigningKeys:
    """A trigger's signing secrets: ``primary`` signs everything; ``secondary`` (the other side
    of a rotation, old or new) adds a second Standard Webhooks signature while it is set."""

    primary: bytes
    secondary: bytes | None = None

    @classmethod
    def from_secrets(cls, primary: str, secondary: str | None = None) -> SigningKeys:
        """Keys from ``whsec_`` secrets."""
        return cls(decode_secret(primary), decode_secret(secondary) if secondary else None)


@functools.lru_cache(maxsize=1024)
def _keyed(key: bytes) -> hmac.HMAC:
    """An HMAC-SHA256 object keyed with ``key`` and fed nothing yet, made once per key;
    :func:`hmac_sha256` copies it for each message."""
    return hmac.new(key, digestmod=hashlib.sha256)


def hmac_sha256(key: bytes, msg: bytes) -> bytes:
    """HMAC-SHA256 of ``msg`` under ``key`` (equal to ``hmac.digest(key, msg, "sha256")``): a
    copy of the key's keyed object (:func:`_keyed`) fed ``msg``, so the key set-up is paid once
    per secret, not three times per attempt."""
    mac = _keyed(key).copy()
    mac.update(msg)
    return mac.digest()


def body_signature(body: bytes, key: bytes) -> str:
    """``sha256=<hex HMAC-SHA256 of the body>``, the ``X-Signature`` value."""
    return "sha256=" + hmac_sha256(key, body).hex()


def webhook_signature(msg_id: str, timestamp: int, body: bytes, keys: SigningKeys) -> str:
    """The ``webhook-signature`` value: one ``v1,<base64>`` per key, space-separated."""
    signed = b"%s.%d.%s" % (msg_id.encode(), timestamp, body)
    sigs = []
    for key in (keys.primary, keys.secondary):
        if key is not None:
            mac = hmac_sha256(key, signed)
            sigs.append("v1," + base64.b64encode(mac).decode("ascii"))
    return " ".join(sigs)


def attempt_headers(
    *,
    body: bytes,
    fire_key: str,
    keys: SigningKeys,
    now: float,
    callback_token: str | None = None,
    content_type: str | None = "application/json",
) -> dict[str, str]:
    """All Horae headers of one attempt, signed at ``now`` (unix seconds, floored); no
    ``Content-Type`` when ``content_type`` is ``None``."""
    timestamp = int(now)
    headers = {
        "Idempotency-Key": fire_key,
        "X-Signature": body_signature(body, keys.primary),
        "webhook-id": fire_key,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": webhook_signature(fire_key, timestamp, body, keys),
    }
    if content_type is not None:
        headers["Content-Type"] = content_type
    if callback_token is not None:
        headers[CALLBACK_TOKEN_HEADER] = callback_token
    return headers


# --- callback tokens -----------------------------------------------------------------------


class TokenError(Exception):
    """A callback token was refused; ``reason`` is one of ``malformed``, ``bad_signature``,
    ``expired``, ``not_yet_valid``, ``scope_mismatch``, ``replayed``."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class CallbackClaims:
    """What a callback token grants: a report about this one attempt, until ``expires_at``."""

    tenant: str
    trigger: str
    fire_key: str
    attempt: int
    issued_at: int
    expires_at: int
    token_id: str = field(default="")
    tzdata: str | None = None  # the fire's tzdata version, when the token carries it


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def issue_token(
    *,
    tenant: str,
    trigger: str,
    fire_key: str,
    attempt: int,
    now: float,
    ttl_s: int,
    secret: bytes,
    tzdata: str | None = None,
) -> str:
    """A token ``h1.<payload>.<mac>`` for attempt ``attempt`` of ``fire_key``, valid from
    ``int(now)`` for ``ttl_s`` seconds, carrying the fire's ``tzdata`` version when given.
    Deterministic: same inputs, same token (and token id)."""
    if ttl_s <= 0 or attempt < 0:
        raise ValueError("ttl_s must be positive and attempt non-negative")
    issued = int(now)
    claims = {
        "t": tenant,
        "g": trigger,
        "k": fire_key,
        "n": attempt,
        "i": issued,
        "e": issued + ttl_s,
    }
    if tzdata is not None:
        claims["z"] = tzdata
    payload = _b64url(_COMPACT_SORTED.encode(claims).encode())
    signing_input = f"{TOKEN_VERSION}.{payload}".encode()
    mac = _b64url(hmac_sha256(secret, signing_input))
    return f"{TOKEN_VERSION}.{payload}.{mac}"


def verify_token(
    token: str,
    now: float,
    secret: bytes,
    *,
    expect: Mapping[str, str | int] | None = None,
    leeway_s: int = 60,
) -> CallbackClaims:
    """Claims of a valid token, or :class:`TokenError`. Checks the MAC (constant time), expiry
    (``now >= expires_at`` is expired), issue time (not more than ``leeway_s`` in the future)
    and, if given, ``expect`` (e.g. ``{"tenant": "t1", "trigger": "g"}``) against the claims.
    Does NOT check replay: pass the claims to a :class:`ReplayGuard`."""
    parts = token.split(".")
    if len(parts) != 3 or parts[0] != TOKEN_VERSION:
        raise TokenError("malformed")
    signing_input = f"{parts[0]}.{parts[1]}".encode()
    expected = hmac.new(secret, signing_input, hashlib.sha256).digest()
    try:
        given = _unb64url(parts[2])
        raw = json.loads(_unb64url(parts[1]))
    except (ValueError, binascii.Error):
        raise TokenError("malformed") from None
    if not hmac.compare_digest(expected, given):
        raise TokenError("bad_signature")
    try:
        claims = CallbackClaims(
            tenant=str(raw["t"]),
            trigger=str(raw["g"]),
            fire_key=str(raw["k"]),
            attempt=int(raw["n"]),
            issued_at=int(raw["i"]),
            expires_at=int(raw["e"]),
            token_id=hashlib.sha256(signing_input).hexdigest()[:32],
            tzdata=None if raw.get("z") is None else str(raw["z"]),
        )
    except (KeyError, TypeError, ValueError):
        raise TokenError("malformed") from None
    if now >= claims.expires_at:
        raise TokenError("expired")
    if claims.issued_at > now + leeway_s:
        raise TokenError("not_yet_valid")
    for name, value in (expect or {}).items():
        if getattr(claims, name, None) != value:
            raise TokenError("scope_mismatch")
    return claims


class ReplayGuard:
    """Remembers used token ids until they expire; a second use raises ``TokenError("replayed")``.

    In-memory and per process: the caller that needs replay protection across processes keys a
    shared store by ``claims.token_id`` with the same expiry. Memory is bounded by the tokens
    live at once (expired ids are dropped on each call). Not thread-safe; fine in one event loop.
    """

    def __init__(self) -> None:
        self._seen: set[str] = set()
        self._expiry: list[tuple[int, str]] = []  # heap of (expires_at, token_id)

    def use(self, claims: CallbackClaims, now: float) -> None:
        """Record a use of ``claims`` at ``now``; raise if the token was used before."""
        while self._expiry and self._expiry[0][0] <= now:
            self._seen.discard(heapq.heappop(self._expiry)[1])
        if claims.token_id in self._seen:
            raise TokenError("replayed")
        self._seen.add(claims.token_id)
        heapq.heappush(self._expiry, (claims.expires_at, claims.token_id))

    def __len__(self) -> int:
        return len(self._seen)
