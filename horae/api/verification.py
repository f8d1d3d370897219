"""Target ownership verification: before a webhook trigger may fire at a host, the tenant proves
it controls that host.

1. ``POST /v1/targets/verifications {"url": ...}`` issues a challenge token for the URL's host
   (``host`` or ``host:port``), valid ``CHALLENGE_TTL_S``;
2. the tenant serves, at ``<scheme>://<host>/.well-known/horae-verification/<token>``, the body
   :func:`expected_answer`: the lowercase hex HMAC-SHA256, keyed with one of the tenant's webhook
   signing secrets (``HORAE_DISPATCHER_WEBHOOK_SECRETS``, the secrets its receivers already use
   to verify Horae's calls), of ``horae-verification:<tenant>:<host>:<token>``;
3. ``POST /v1/targets/verifications/<host>/check`` fetches it (:class:`PinnedFetch`: the
   dispatcher's own lean sender and SSRF policy, so the connection goes to an address the policy
   approved and to no other, the host named in ``Host`` and TLS SNI; no redirects; 5 s; at most
   1 KiB) and, when it matches, records the host verified for the tenant until
   ``api.verification_ttl_s`` from now.

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

from horae.outbound.http_sender import SenderConfig
from horae.outbound.lean_http import LeanHttpSender
from horae.outbound.ssrf import AddressPolicy

CHALLENGE_TTL_S = 3600
WELL_KNOWN = "/.well-known/horae-verification/"
MAX_ANSWER_BYTES = 1024
FETCH_TIMEOUT_S = 5.0

#: GET a URL: (status, body). Raises :class:`FetchFailed` (or another error) when no answer came.
Fetch = Callable[[str], Awaitable[tuple[int, bytes]]]


class FetchFailed(Exception):
    """No HTTP answer: refused by the SSRF policy, not resolved, no connection, a timeout; the
    message is the sender's result and detail (``refused_ssrf: loopback: ...``)."""


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


#: the verification fetch's limits: 5 s in all, at most :data:`MAX_ANSWER_BYTES` read, one
#: connection (no keep-alive worth keeping for a check made now and then)
FETCH_CONFIG = SenderConfig(
    connect_timeout_s=FETCH_TIMEOUT_S,
    read_timeout_s=FETCH_TIMEOUT_S,
    deadline_s=FETCH_TIMEOUT_S,
    max_body_bytes=MAX_ANSWER_BYTES,
    pool_size=1,
    pool_per_host=1,
    user_agent="horae-verification/1",
)


@dataclass(frozen=True)
class PinnedFetch:
    """A :data:`Fetch` through the dispatcher's lean sender
    (:class:`~horae.outbound.lean_http.LeanHttpSender`) under ``policy``, the API's own
    :class:`~horae.outbound.ssrf.AddressPolicy` (the one that approved the URL). The sender
    judges the URL with the policy and connects only to the addresses of that judgement: an
    answer the policy cached (the one it just approved) or a new one judged the same way —
    never a second resolution of its own, so a name that resolves elsewhere the second time
    (DNS rebinding) cannot be fetched at the other address. ``Host`` and TLS SNI name the host;
    the certificate is verified against it; nothing is followed (a 3xx is answered as it
    is); at most :data:`MAX_ANSWER_BYTES` are read, within :data:`FETCH_TIMEOUT_S`."""

    policy: AddressPolicy
    config: SenderConfig = FETCH_CONFIG

    async def __call__(self, url: str) -> tuple[int, bytes]:
        async with LeanHttpSender(self.policy, self.config) as sender:
            result = await sender.send(url, b"", {}, method="GET")
        if result.status is None:
            raise FetchFailed(f"{result.send_result.value}: {result.detail}")
        return result.status, result.body_excerpt[:MAX_ANSWER_BYTES]
