"""The HTTP sender: one attempt of one outbound call, with the SSRF guarantees kept.

Contract of :meth:`HttpSender.send` (it never raises for a failed attempt; it returns an
:class:`AttemptResult`):

* a request that is not HTTP (a method that is not a token, a header with a line break or a NUL)
  raises :class:`~horae.outbound.sendable.Unsendable` before anything else: it is no transport
  failure, and would fail the same way on every attempt;
* the URL goes through the :class:`~horae.outbound.ssrf.AddressPolicy` first; a refusal is
  ``refused_ssrf`` and nothing is sent;
* the connection goes to one of the addresses that were checked, and only those: the connector's
  resolver answers from the checked set of *this* attempt (a context variable) and fails closed
  otherwise, so there is no second DNS lookup and DNS rebinding cannot redirect the call. Pooled
  keep-alive connections are reused; each was opened to an address checked at that time, and the
  pool key includes host, port and TLS server name;
* redirects are never followed: a 3xx is ``redirect_refused``;
* at most ``max_body_bytes`` of the response body are read (``body_truncated`` says there was
  more, which is not an error; the connection is then dropped rather than drained); responses are
  not decompressed (``Accept-Encoding: identity``);
* connect and read timeouts, and a deadline for the whole attempt (resolution included). A
  timeout *before* the connection was established is ``timeout_connect`` (outcome ``not_sent``);
  after it, the request may have reached the target: ``timeout_read`` with outcome ``unknown``;
* ``Retry-After`` (delta-seconds or HTTP-date, against the injected wall clock) is parsed.

No cookies are kept (a target cannot plant state for another tenant's call) and no proxy from
the environment is used (it would bypass the address check).
"""

from __future__ import annotations

import asyncio
import contextvars
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC
from email.utils import parsedate_to_datetime
from types import TracebackType
from typing import Any

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult

from horae.outbound.results import AttemptResult as AttemptResult
from horae.outbound.results import Outcome as Outcome
from horae.outbound.results import SendResult as SendResult
from horae.outbound.sendable import check_sendable
from horae.outbound.ssrf import AddressPolicy, AddressRefused, CheckedTarget, ResolutionError


def parse_retry_after(value: str | None, now: float) -> float | None:
    """Seconds to wait per a ``Retry-After`` value: delta-seconds, or an HTTP-date compared with
    ``now`` (unix seconds; a past date gives 0). ``None`` if absent or unparseable. Pure."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(int(value))
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # RFC 9110: every HTTP-date form is GMT (asctime has no zone)
        when = when.replace(tzinfo=UTC)
    return max(0.0, when.timestamp() - now)


@dataclass(frozen=True, slots=True)
class SenderConfig:
    """Limits of the sender. ``deadline_s`` bounds a whole attempt; ``pool_size`` is the number of
    open connections overall, ``pool_per_host`` per (host, port, TLS) key (0: no per-host cap; the
    lean sender, :mod:`horae.outbound.lean_http`, counts it per pinned address of a host)."""

    connect_timeout_s: float = 5.0
    read_timeout_s: float = 10.0
    deadline_s: float = 30.0
    max_body_bytes: int = 64 * 1024
    pool_size: int = 256
    pool_per_host: int = 64
    keepalive_s: float = 15.0
    user_agent: str = "Horae-Dispatcher/0.1"


@dataclass(slots=True)
class _Attempt:
    target: CheckedTarget | None = None
    connected: bool = False
    status: int | None = None
    retry_after: str | None = None
    peer: str | None = None
    body: bytearray = field(default_factory=bytearray)
    truncated: bool = False


_ATTEMPT: contextvars.ContextVar[_Attempt] = contextvars.ContextVar("horae_dispatch_attempt")


class _PinnedResolver(AbstractResolver):
    """Answers only with the addresses checked for the current attempt; fails closed."""

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        attempt = _ATTEMPT.get(None)
        target = attempt.target if attempt is not None else None
        if target is None or target.host != host:
            raise OSError(f"no checked address for {host!r}: refusing to resolve")
        return [
            ResolveResult(
                hostname=host,
                host=str(addr),
                port=port,
                family=socket.AF_INET if addr.version == 4 else socket.AF_INET6,
                proto=socket.IPPROTO_TCP,
                flags=socket.AI_NUMERICHOST,
            )
            for addr in target.addresses
        ]

    async def close(self) -> None:
        return None


class _TrackingConnector(aiohttp.TCPConnector):
    """Marks the attempt as connected once it holds a connection (fresh or pooled), which is what
    separates 'timed out before sending' from 'timed out after sending', and notes the peer."""

    async def connect(self, req: Any, traces: Any, timeout: Any) -> Any:
        conn = await super().connect(req, traces, timeout)
        attempt = _ATTEMPT.get(None)
        if attempt is not None:
            attempt.connected = True
            transport = conn.transport
            peer = transport.get_extra_info("peername") if transport is not None else None
            attempt.peer = str(peer[0]) if peer else None
        return conn


class HttpSender:
    """Sends attempts over one pooled aiohttp session. Use ``async with HttpSender(...)`` or
    ``await start()`` / ``await close()``, inside the event loop that sends. Concurrency-safe:
    call :meth:`send` from as many tasks as you like (bounded by ``pool_size``)."""

    def __init__(
        self,
        policy: AddressPolicy,
        config: SenderConfig | None = None,
        *,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._policy = policy
        self._config = config or SenderConfig()
        self._clock = clock
        self._monotonic = monotonic
        self._session: aiohttp.ClientSession | None = None
        self._timeout = aiohttp.ClientTimeout(
            total=None,
            connect=self._config.connect_timeout_s,
            sock_connect=self._config.connect_timeout_s,
            sock_read=self._config.read_timeout_s,
        )

    async def start(self) -> None:
        """Open the connection pool (idempotent)."""
        if self._session is not None:
            return
        connector = _TrackingConnector(
            resolver=_PinnedResolver(),
            use_dns_cache=False,
            limit=self._config.pool_size,
            limit_per_host=self._config.pool_per_host,
            keepalive_timeout=self._config.keepalive_s,
        )
        self._session = aiohttp.ClientSession(
            connector=connector,
            cookie_jar=aiohttp.DummyCookieJar(),
            trust_env=False,
            auto_decompress=False,
            timeout=self._timeout,
            headers={"User-Agent": self._config.user_agent, "Accept-Encoding": "identity"},
        )

    async def close(self) -> None:
        """Close the pool; in-flight sends fail. Idempotent."""
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()

    async def __aenter__(self) -> HttpSender:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def send(
        self,
        url: str,
        body: bytes,
        headers: Mapping[str, str],
        *,
        method: str = "POST",
        timeout_s: float | None = None,
    ) -> AttemptResult:
        """Make one attempt; see the module docstring. ``headers`` are sent as given (build them
        with :func:`horae.outbound.signing.attempt_headers`). ``timeout_s`` (the target's
        ``timeout_ms``) bounds the whole attempt below ``deadline_s``."""
        if self._session is None:
            raise RuntimeError("HttpSender is not started")
        check_sendable(method, headers)  # raises Unsendable: nothing resolved, nothing sent
        started = self._monotonic()
        attempt = _Attempt()
        reset = _ATTEMPT.set(attempt)
        try:
            limit = self._config.deadline_s
            async with asyncio.timeout(limit if timeout_s is None else min(limit, timeout_s)):
                result, detail = await self._exchange(
                    self._session, attempt, url, body, headers, method
                )
        except TimeoutError:
            result, detail = self._timed_out(attempt)
        finally:
            _ATTEMPT.reset(reset)
        retry_after = None
        if attempt.retry_after is not None:
            retry_after = parse_retry_after(attempt.retry_after, self._clock())
        return AttemptResult(
            send_result=result,
            status=attempt.status,
            duration_s=self._monotonic() - started,
            retry_after_s=retry_after,
            body_excerpt=bytes(attempt.body),
            body_truncated=attempt.truncated,
            detail=detail,
            peer=attempt.peer,
        )

    async def _exchange(
        self,
        session: aiohttp.ClientSession,
        attempt: _Attempt,
        url: str,
        body: bytes,
        headers: Mapping[str, str],
        method: str,
    ) -> tuple[SendResult, str]:
        try:
            attempt.target = await self._policy.check(url)
        except AddressRefused as exc:
            return SendResult.REFUSED_SSRF, str(exc)
        except ResolutionError as exc:
            return SendResult.DNS_ERROR, str(exc)
        try:
            resp = await session.request(
                method, attempt.target.url, data=body, headers=headers, allow_redirects=False
            )
        except aiohttp.ClientError as exc:
            return _client_error(exc, attempt.connected), f"{type(exc).__name__}: {exc}"
        try:
            attempt.status = resp.status
            attempt.retry_after = resp.headers.get("Retry-After")
            detail = ""
            try:
                await self._read_bounded(resp, attempt)
            except (aiohttp.ClientError, TimeoutError) as exc:
                detail = f"body read: {type(exc).__name__}: {exc}"
        finally:
            if attempt.truncated or not resp.content.at_eof():
                resp.close()  # never drain an unbounded or stalled body into the pool
            else:
                resp.release()
        return _status_result(resp.status), detail

    async def _read_bounded(self, resp: aiohttp.ClientResponse, attempt: _Attempt) -> None:
        limit = self._config.max_body_bytes
        while len(attempt.body) < limit:
            chunk = await resp.content.read(limit - len(attempt.body))
            if not chunk:
                return
            attempt.body += chunk
        attempt.truncated = not resp.content.at_eof()

    @staticmethod
    def _timed_out(attempt: _Attempt) -> tuple[SendResult, str]:
        if attempt.status is not None:  # the answer came; only the body was late
            return _status_result(attempt.status), "body read: deadline exceeded"
        if attempt.target is None:
            return SendResult.DNS_ERROR, "deadline exceeded while resolving"
        if attempt.connected:
            return SendResult.TIMEOUT_READ, "deadline exceeded after sending"
        return SendResult.TIMEOUT_CONNECT, "deadline exceeded while connecting"


def _status_result(status: int) -> SendResult:
    if 200 <= status < 300:
        return SendResult.OK
    if 300 <= status < 400:
        return SendResult.REDIRECT_REFUSED
    return SendResult.HTTP_ERROR


def _client_error(exc: aiohttp.ClientError, connected: bool) -> SendResult:
    """Map an aiohttp error raised before a response arrived."""
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return SendResult.TIMEOUT_CONNECT
    if isinstance(exc, aiohttp.ServerTimeoutError):
        return SendResult.TIMEOUT_READ if connected else SendResult.TIMEOUT_CONNECT
    if isinstance(exc, aiohttp.ClientSSLError | aiohttp.ServerFingerprintMismatch):
        return SendResult.TLS_ERROR
    if isinstance(exc, aiohttp.ClientResponseError):
        return SendResult.PROTOCOL_ERROR
    if connected:
        return SendResult.CONNECTION_LOST
    return SendResult.CONNECTION_ERROR
