"""API tokens: HS256 JWTs with a ``kid`` header, verified against every configured key.

Claims: ``sub`` (the acting subject), ``tenant``, ``roles`` (``read``, ``author``, ``policy``,
``platform``), ``iat``, ``exp``, ``jti``. The tenant comes from the token only. Key rotation:
``HORAE_API_TOKEN_KEYS`` maps kids to secrets; :func:`issue` signs with ``token_kid`` and
:func:`verify` accepts a token signed by any configured kid.

Which role a route needs (:data:`SATISFIES`): ``read`` is satisfied by ``read``, ``author`` and
``policy``; ``author`` only by ``author``; ``policy`` only by ``policy``; ``platform`` only by
``platform``.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import jwt

from horae.contracts.events import Role

ALGORITHM = "HS256"

#: role a route needs -> the token roles that satisfy it
SATISFIES: Mapping[Role, frozenset[Role]] = {
    Role.READ: frozenset({Role.READ, Role.AUTHOR, Role.POLICY}),
    Role.AUTHOR: frozenset({Role.AUTHOR}),
    Role.POLICY: frozenset({Role.POLICY}),
    Role.PLATFORM: frozenset({Role.PLATFORM}),
}


class TokenError(Exception):
    """A token that does not authenticate anyone (the message says why)."""


@dataclass(frozen=True)
class Principal:
    """Who acts: the token's subject, tenant and roles."""

    subject: str
    tenant: str
    roles: frozenset[Role]
    token_id: str

    def may(self, needed: Role) -> bool:
        return bool(self.roles & SATISFIES[needed])

    @property
    def actor(self) -> str:
        """What definitions, commands and audit details record as the actor: subject and roles."""
        return f"{self.subject} (api; roles {','.join(sorted(r.value for r in self.roles))})"


def signing_key(keys: Mapping[str, str], kid: str | None) -> tuple[str, str]:
    """``(kid, secret)`` to sign with: ``kid``, or the only key; ValueError otherwise."""
    if kid is None:
        if len(keys) != 1:
            raise ValueError("HORAE_API_TOKEN_KID must name one of HORAE_API_TOKEN_KEYS")
        kid = next(iter(keys))
    if kid not in keys:
        raise ValueError(f"token kid {kid!r} is not in HORAE_API_TOKEN_KEYS")
    return kid, keys[kid]


def issue(
    keys: Mapping[str, str],
    kid: str | None,
    *,
    tenant: str,
    roles: Sequence[Role],
    subject: str,
    ttl_s: int,
    now: datetime | None = None,
) -> str:
    """A signed token (ValueError for no key, an empty role list or a non-positive ttl)."""
    kid, secret = signing_key(keys, kid)
    if not roles:
        raise ValueError("a token needs at least one role")
    if ttl_s <= 0:
        raise ValueError("ttl must be positive")
    at = now or datetime.now(UTC)
    claims = {
        "sub": subject,
        "tenant": tenant,
        "roles": sorted({Role(r).value for r in roles}),
        "iat": int(at.timestamp()),
        "exp": int((at + timedelta(seconds=ttl_s)).timestamp()),
        "jti": uuid.uuid4().hex,
    }
    return jwt.encode(claims, secret, algorithm=ALGORITHM, headers={"kid": kid})


class Verifier:
    """:func:`verify` with the tokens already verified remembered (at most ``size``, the oldest
    forgotten first): a token's signature and claims are checked once per process, its expiry on
    every use. The keys are fixed for the verifier's life (rotation restarts the API)."""

    def __init__(self, keys: Mapping[str, str], size: int = 10_000) -> None:
        self.keys, self.size = dict(keys), size
        self._seen: dict[str, tuple[Principal, float]] = {}

    def __call__(self, token: str, now: datetime | None = None) -> Principal:
        at = (now or datetime.now(UTC)).timestamp()
        held = self._seen.get(token)
        if held is None:
            who = verify(token, self.keys, now)
            held = (who, float(jwt.decode(token, options={"verify_signature": False})["exp"]))
            if len(self._seen) >= self.size:
                self._seen.pop(next(iter(self._seen)))
            self._seen[token] = held
        if held[1] <= at:
            raise TokenError("token expired")
        return held[0]


def verify(token: str, keys: Mapping[str, str], now: datetime | None = None) -> Principal:
    """The principal of a valid token; :class:`TokenError` otherwise."""
    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError as exc:
        raise TokenError(f"malformed token: {exc}") from None
    kid = header.get("kid")
    if not isinstance(kid, str) or kid not in keys:
        raise TokenError("unknown key id (kid)")
    try:
        claims = jwt.decode(
            token,
            keys[kid],
            algorithms=[ALGORITHM],
            options={"require": ["exp", "iat", "sub", "jti"], "verify_exp": False},
        )
    except jwt.PyJWTError as exc:
        raise TokenError(f"invalid token: {exc}") from None
    at = now or datetime.now(UTC)
    if not isinstance(claims["exp"], int | float) or claims["exp"] <= at.timestamp():
        raise TokenError("token expired")
    tenant, roles, subject = claims.get("tenant"), claims.get("roles"), claims.get("sub")
    if not isinstance(tenant, str) or not tenant:
        raise TokenError("token has no tenant")
    if not isinstance(subject, str) or not subject:
        raise TokenError("token has no subject")
    if not isinstance(roles, list) or not roles:
        raise TokenError("token has no roles")
    try:
        granted = frozenset(Role(r) for r in roles)
    except ValueError:
        raise TokenError(f"unknown role in {roles!r}") from None
    return Principal(subject, tenant, granted, str(claims["jti"]))
