"""Target ownership verification: before a webhook trigger may fire at a host, the tenant proves
it controls that host.

1. ``POST /v1/targets/verifications {"url": ...}`` issues a challenge token for the URL's host
   (``host`` or ``host:port``), valid ``CHALLENGE_TTL_S``;
2. the tenant serves, at ``<scheme>://<host>/.well-known/horae-verification/<token>``, the body
   :func:`expected_answer`: the lowercase hex HMAC-SHA256, keyed with one of the tenant's webhook
   signing secrets (``HORAE_DISPATCHER_WEBHOOK_SECRETS``, the secrets its receivers already use
   to verify Horae's calls), of ``horae-verification:<tenant>:<host>:<token>``;
3. ``POST /v1/targets/verifications/<host>/check`` fetches it (after the dispatcher's SSRF policy
   allowed the address; no redirects; 5 s; at most 1 KiB) and, when it matches, records the host
   verified for the tenant until ``api.verification_ttl_s`` from now.

Creating or amending a webhook trigger whose host is not verified (or whose verification expired)
is refused with a message saying how to verify. The records live in a :class:`VerificationStore`:
``horae api`` keeps them in PostgreSQL, in the API's state schema
(:class:`horae.api.state.PostgresState`: tables ``target_challenges`` and ``verified_hosts``), so
every API process knows them and a restart keeps them; :class:`MemoryVerifications` is the
in-process twin of the tests.

A host is the URL's lower-case name without a final dot, an IPv6 literal in brackets in its
compressed form (``[2606:4700::1]``), and ``:port`` when the URL gives one.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol
from urllib.parse import urlsplit

import httpx

CHALLENGE_TTL_S = 3600
WELL_KNOWN = "/.well-known/horae-verification/"
MAX_ANSWER_BYTES = 1024

#: GET a URL: (status, body). Raises on transport errors.
Fetch = Callable[[str], Awaitable[tuple[int, bytes]]]


@dataclass(frozen=True)
class Challenge:
    tenant: str
    host: str
    token: str
    well_known_url: str
    expires_at: datetime


class VerificationStore(Protocol):
    """Challenges issued and hosts verified, per tenant."""

    def put_challenge(self, challenge: Challenge) -> None: ...

    def challenge(self, tenant: str, host: str) -> Challenge | None: ...

    def verified(self, tenant: str, host: str, until: datetime) -> None: ...

    def verified_until(self, tenant: str, host: str) -> datetime | None: ...


@dataclass
class MemoryVerifications:
    """A :class:`VerificationStore` in this process."""

    challenges: dict[tuple[str, str], Challenge] = field(default_factory=dict)
    hosts: dict[tuple[str, str], datetime] = field(default_factory=dict)

    def put_challenge(self, challenge: Challenge) -> None:
        self.challenges[(challenge.tenant, challenge.host)] = challenge

    def challenge(self, tenant: str, host: str) -> Challenge | None:
        return self.challenges.get((tenant, host))

    def verified(self, tenant: str, host: str, until: datetime) -> None:
        self.hosts[(tenant, host)] = until

    def verified_until(self, tenant: str, host: str) -> datetime | None:
        return self.hosts.get((tenant, host))


def host_of(url: str) -> tuple[str, str]:
    """``(host, origin)`` of an http(s) URL: ``host`` is the lower-case name (an IPv6 literal
    in brackets, compressed) with ``:port`` when one is given; ValueError for anything else."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("expected an http(s) URL with a host")
    host = parts.hostname.lower().rstrip(".")
    if ":" in host:  # urlsplit drops an IPv6 literal's brackets; the URL needs them back
        try:
            host = f"[{ipaddress.IPv6Address(host.partition('%')[0]).compressed}]"
        except ValueError:
            raise ValueError(f"{host!r} is not an IPv6 address") from None
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return host, f"{parts.scheme}://{host}"


def expected_answer(secret: str, tenant: str, host: str, token: str) -> str:
    """What the host must serve at the well-known path."""
    message = f"horae-verification:{tenant}:{host}:{token}".encode()
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def matches(body: bytes, secrets: Iterable[str], tenant: str, host: str, token: str) -> bool:
    answer = body.strip().decode("ascii", "replace").lower()
    return any(
        hmac.compare_digest(answer, expected_answer(s, tenant, host, token)) for s in secrets
    )


def how_to_verify(host: str, url: str) -> str:
    return (
        f"host {host!r} is not verified for this tenant: POST /v1/targets/verifications "
        f'{{"url": "{url}"}}, serve the answer at {WELL_KNOWN}<challenge> on that host, then '
        f"POST /v1/targets/verifications/{host}/check (see docs/api.md)"
    )


async def http_fetch(url: str) -> tuple[int, bytes]:
    """GET without redirects, 5 s, at most :data:`MAX_ANSWER_BYTES` read."""
    async with (
        httpx.AsyncClient(timeout=5.0, follow_redirects=False) as client,
        client.stream("GET", url) as response,
    ):
        body = b""
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) > MAX_ANSWER_BYTES:
                break
        return response.status_code, body[:MAX_ANSWER_BYTES]
