"""Outbound identity tokens: an OIDC-style JWT minted per attempt (Cloud Scheduler's
``oidcToken``), for a webhook target with ``target.oidc`` (docs/security.md, "Outbound identity").

Each attempt of such a target carries ``Authorization: Bearer <JWT>``, ES256 (ECDSA P-256,
SHA-256), header ``kid`` naming the key, claims:

* ``iss``: the issuer (``HORAE_OIDC_ISSUER``, the API's public base URL);
* ``sub``: ``<tenant>/<trigger_id>``; ``aud``: ``target.oidc.audience``, else the target URL's
  origin (:func:`default_audience`);
* ``iat``: the attempt's start (whole seconds); ``exp``: ``iat`` + the attempt's timeout (rounded
  up) + the skew (``HORAE_OIDC_SKEW_S``), so the token expires with its attempt;
* ``jti``: the attempt's id, ``<fire key>#<attempt>`` (:func:`attempt_id`); ``fire_key``,
  ``attempt`` and ``tenant``.

Keys (:class:`KeySet`): every key is published in the JWKS from the moment it is added, and signs
only from its ``activates_at`` (a rotation adds a key ``HORAE_OIDC_PUBLISH_LEAD_S`` ahead, so a
receiver's cached JWKS already holds it when it starts to sign). A key signs until the next one
activates, and stays published until every token it may have signed has expired: the next key's
``activates_at`` + :func:`max_token_lifetime_s`; then it is dropped. Pure: time is an argument.

The keys live behind the :class:`OidcKeys` port: the file adapter
(:class:`~horae.outbound.oidc_files.OidcKeyFiles`, a directory: the public set in ``keys.json``,
one private PEM per key that only the dispatcher's mount needs) and :class:`MemoryOidcKeys`. The
dispatcher signs with :class:`OidcSigner`; the API publishes :func:`jwks` of the same set.
"""

from __future__ import annotations

import base64
import math
import secrets
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlsplit

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from horae.contracts.ingress import MAX_TIMEOUT_MS

ALG = "ES256"
#: the most seconds an attempt's timeout may be (``target.timeout_ms``' ceiling)
MAX_ATTEMPT_S = math.ceil(MAX_TIMEOUT_MS / 1000)
_DEFAULT_PORTS = {"http": 80, "https": 443}


def default_audience(url: str) -> str:
    """The origin of ``url``: ``scheme://host``, with ``:port`` when not the scheme's default
    (``https://hooks.acme.example/a?b`` -> ``https://hooks.acme.example``)."""
    parts = urlsplit(url)
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    if ":" in host:  # an IPv6 literal
        host = f"[{host}]"
    port = parts.port
    if port is not None and port != _DEFAULT_PORTS.get(scheme):
        return f"{scheme}://{host}:{port}"
    return f"{scheme}://{host}"


def attempt_id(fire_key: str, attempt: int) -> str:
    """The id of attempt ``attempt`` of ``fire_key`` (the token's ``jti``)."""
    return f"{fire_key}#{attempt}"


def max_token_lifetime_s(skew_s: int) -> int:
    """The longest a token lives: the longest attempt plus the skew."""
    return MAX_ATTEMPT_S + skew_s


def claims(
    *,
    issuer: str,
    tenant: str,
    trigger_id: str,
    fire_key: str,
    attempt: int,
    audience: str,
    now: float,
    timeout_s: float,
    skew_s: int,
) -> dict[str, Any]:
    """The claims of attempt ``attempt``'s token, issued at ``now`` (see the module docstring)."""
    issued = int(now)
    return {
        "iss": issuer,
        "sub": f"{tenant}/{trigger_id}",
        "aud": audience,
        "iat": issued,
        "exp": issued + math.ceil(min(timeout_s, MAX_ATTEMPT_S)) + skew_s,
        "jti": attempt_id(fire_key, attempt),
        "tenant": tenant,
        "fire_key": fire_key,
        "attempt": attempt,
    }


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


@dataclass(frozen=True, slots=True)
class PublicKey:
    """One signing key as published: ``kid``, ``alg``, from when it signs (unix seconds) and its
    public JWK members (``kty``, ``crv``, ``x``, ``y``)."""

    kid: str
    activates_at: int
    jwk: Mapping[str, str]
    alg: str = ALG

    def published_jwk(self) -> dict[str, str]:
        """The key's JWK as the JWKS lists it (RFC 7517): its members, ``kid``, ``alg``, ``use``."""
        return {**self.jwk, "kid": self.kid, "alg": self.alg, "use": "sig"}


@dataclass(frozen=True, slots=True)
class KeySet:
    """Every key published or to be, oldest ``activates_at`` first."""

    keys: tuple[PublicKey, ...] = ()

    def signing(self, now: float) -> PublicKey | None:
        """The key that signs at ``now``: the latest whose ``activates_at`` is not after it
        (``None``: none yet)."""
        due = [k for k in self.keys if k.activates_at <= now]
        return due[-1] if due else None

    def retires_at(self, key: PublicKey, skew_s: int) -> int | None:
        """When ``key`` leaves the JWKS: the next key's activation plus the longest token's life
        (``None``: no later key, it stays)."""
        later = [k.activates_at for k in self.keys if k.activates_at > key.activates_at]
        return min(later) + max_token_lifetime_s(skew_s) if later else None

    def published(self, now: float, skew_s: int) -> tuple[PublicKey, ...]:
        """The keys the JWKS lists at ``now``: every key not yet retired (those still to sign
        included)."""
        return tuple(k for k in self.keys if (r := self.retires_at(k, skew_s)) is None or now < r)

    def with_key(self, key: PublicKey, now: float, skew_s: int) -> KeySet:
        """This set plus ``key``, less the keys retired at ``now``."""
        if any(k.kid == key.kid for k in self.keys):
            raise ValueError(f"key id {key.kid!r} is already in the set")
        grown = KeySet(tuple(sorted((*self.keys, key), key=lambda k: k.activates_at)))
        return KeySet(grown.published(now, skew_s))


def jwks(keys: KeySet, now: float, skew_s: int) -> dict[str, list[dict[str, str]]]:
    """The JSON Web Key Set (RFC 7517) the API publishes at ``now``."""
    return {"keys": [k.published_jwk() for k in keys.published(now, skew_s)]}


def new_key(activates_at: int, kid: str | None = None) -> tuple[PublicKey, bytes]:
    """A fresh P-256 key signing from ``activates_at``: its public form and its private key as
    an unencrypted PKCS#8 PEM."""
    private = ec.generate_private_key(ec.SECP256R1())
    numbers = private.public_key().public_numbers()
    jwk = {
        "kty": "EC",
        "crv": "P-256",
        "x": _b64url(numbers.x.to_bytes(32, "big")),
        "y": _b64url(numbers.y.to_bytes(32, "big")),
    }
    pem = private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return PublicKey(kid or f"k{activates_at}-{secrets.token_hex(4)}", activates_at, jwk), pem


class OidcKeys(Protocol):
    """Where the signing keys are held (file adapter:
    :class:`~horae.outbound.oidc_files.OidcKeyFiles`; in memory: :class:`MemoryOidcKeys`)."""

    def key_set(self) -> KeySet:
        """Every key published or to be (a rotation made elsewhere shows here within a second)."""
        ...

    def private_key(self, kid: str) -> bytes | None:
        """The private PEM of ``kid``; ``None`` when this store holds none for it (the API's
        mount holds no private key at all)."""
        ...

    def rotate(self, now: float, lead_s: int, skew_s: int) -> PublicKey:
        """Add a new key that signs from ``now + lead_s`` (published at once) and drop the keys
        retired at ``now``; return the new key."""
        ...


@dataclass
class MemoryOidcKeys:
    """:class:`OidcKeys` in memory (tests, a single process)."""

    keys: KeySet = field(default_factory=KeySet)
    pems: dict[str, bytes] = field(default_factory=dict)

    def key_set(self) -> KeySet:
        return self.keys

    def private_key(self, kid: str) -> bytes | None:
        return self.pems.get(kid)

    def rotate(self, now: float, lead_s: int, skew_s: int) -> PublicKey:
        key, pem = new_key(int(now) + lead_s)
        self.keys = self.keys.with_key(key, now, skew_s)
        held = {**self.pems, key.kid: pem}
        self.pems = {k.kid: held[k.kid] for k in self.keys.keys if k.kid in held}
        return key


class OidcSigner:
    """Mints the attempts' tokens with the key that signs at the attempt's start (the dispatcher;
    safe from any thread). The private keys are parsed once per key id."""

    def __init__(self, issuer: str, keys: OidcKeys, skew_s: int = 30) -> None:
        if not issuer:
            raise ValueError("an OIDC issuer is needed to mint identity tokens")
        self.issuer, self.keys, self.skew_s = issuer, keys, skew_s
        self._parsed: dict[str, ec.EllipticCurvePrivateKey] = {}
        self._lock = threading.Lock()

    def _private(self, kid: str) -> ec.EllipticCurvePrivateKey | None:
        with self._lock:
            found = self._parsed.get(kid)
        if found is not None:
            return found
        pem = self.keys.private_key(kid)
        if pem is None:
            return None
        key = serialization.load_pem_private_key(pem, password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise ValueError(f"OIDC key {kid!r} is not an EC private key")
        with self._lock:
            self._parsed[kid] = key
        return key

    def token(
        self,
        *,
        tenant: str,
        trigger_id: str,
        fire_key: str,
        attempt: int,
        audience: str,
        now: float,
        timeout_s: float,
    ) -> str | None:
        """The token of one attempt started at ``now``; ``None`` when no key signs at ``now``
        (none yet, or this store holds no private key for it)."""
        key = self.keys.key_set().signing(now)
        private = None if key is None else self._private(key.kid)
        if key is None or private is None:
            return None
        body = claims(
            issuer=self.issuer,
            tenant=tenant,
            trigger_id=trigger_id,
            fire_key=fire_key,
            attempt=attempt,
            audience=audience,
            now=now,
            timeout_s=timeout_s,
            skew_s=self.skew_s,
        )
        return jwt.encode(body, private, algorithm=ALG, headers={"kid": key.kid})


def discovery(issuer: str) -> dict[str, Any]:
    """The OpenID Provider metadata the API serves (``/.well-known/openid-configuration``): the
    issuer, where its JWKS is, what it signs with."""
    base = issuer.rstrip("/")
    return {
        "issuer": issuer,
        "jwks_uri": f"{base}/.well-known/jwks.json",
        "id_token_signing_alg_values_supported": [ALG],
        "subject_types_supported": ["public"],
        "response_types_supported": ["id_token"],
        "claims_supported": [
            "iss",
            "sub",
            "aud",
            "iat",
            "exp",
            "jti",
            "tenant",
            "fire_key",
            "attempt",
        ],
    }
