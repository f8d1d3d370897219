"""The lean HTTP/1.1 sender: :class:`~horae.outbound.http_sender.HttpSender`'s contract on an
asyncio protocol and httptools' response parser, without aiohttp's per-request machinery.

:class:`LeanHttpSender` keeps every guarantee of the module docstring of
:mod:`horae.outbound.http_sender` (the same :class:`~horae.outbound.http_sender.SenderConfig`,
the same :class:`~horae.outbound.results.AttemptResult` for the same exchange):

* the URL is checked by the :class:`~horae.outbound.ssrf.AddressPolicy` first; connections go
  only to the checked addresses of *this* attempt (there is no resolver in the client at all).
  Keep-alive pools are kept per pinned address (address, port, TLS server name): a pooled
  connection is reused only when its address is among the attempt's checked ones;
* ``https`` targets go over TLS with the default context (certificates verified against the
  host name, or the IP literal), the host as server name;
* 3xx is ``redirect_refused`` (nothing is followed); at most ``max_body_bytes`` of the body are
  read and a longer body drops the connection; no decompression (``Accept-Encoding: identity``
  unless the caller sets its own), no cookies, no proxy;
* ``connect_timeout_s`` bounds opening a connection *and* waiting for a pooled one;
  ``read_timeout_s`` bounds every wait for response bytes; the attempt's deadline
  (``deadline_s``, cut to ``timeout_s``) bounds the whole attempt. One timer per exchange serves
  both the read timeout and the deadline (it re-arms itself from the time of the last bytes);
* at most ``pool_per_host`` connections per pinned address (0: no cap) and ``pool_size``
  overall; an attempt finding none free waits (within its connect timeout) for one to be
  handed back. Idle connections older than ``keepalive_s`` are closed.

Responses are read as RFC 9112 has a client read them, with llhttp's leniencies that aiohttp uses
too (:data:`RESPONSE_LENIENCIES`); ``tests/unit/outbound/test_lean_vs_aiohttp.py`` compares what
both clients record over generated raw responses.

Switch: ``HORAE_DISPATCHER_HTTP_CLIENT=aiohttp`` sends with the aiohttp sender instead
(docs/performance.md, the dispatcher's speed devices).
"""

from __future__ import annotations

import asyncio
import re
import ssl
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from types import TracebackType
from typing import cast

import httptools

from horae.outbound.http_sender import SenderConfig, parse_retry_after
from horae.outbound.results import AttemptResult, SendResult
from horae.outbound.sendable import check_sendable
from horae.outbound.ssrf import AddressPolicy, AddressRefused, CheckedTarget, ResolutionError

_DEFAULT_NAMES = frozenset({"user-agent", "accept-encoding"})
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
#: what llhttp refuses by default and RFC 9112 has a client read (aiohttp reads the same):
#: a folded header line in a response, replaced by a space (5.2: a user agent MUST); a bare LF
#: ending a line (2.2: a recipient MAY); whitespace between a chunk's size and its extensions
#: (7.1.1: ``BWS`` before ``;``). ``lenient_headers`` also stops llhttp's check of the characters
#: of header values; nothing of a value but ``Retry-After`` is read.
RESPONSE_LENIENCIES = {
    "lenient_headers": True,
    "lenient_optional_cr_before_lf": True,
    "lenient_spaces_after_chunk_size": True,
}
PoolKey = tuple[str, int, str | None]  # (address, port, TLS server name or None)
#: (result, status, Retry-After, body, truncated, detail) of one exchange
Reply = tuple[SendResult, int | None, str | None, bytes, bool, str]


class _Refused(Exception):
    """No connection: the attempt ends with ``result`` (nothing was sent)."""

    def __init__(self, result: SendResult, detail: str) -> None:
        super().__init__(detail)
        self.result = result
        self.detail = detail


def _header_lines(headers: Iterable[tuple[str, str]]) -> str:
    return "".join([f"{k}: {v}\r\n" for k, v in headers])


def _status_result(status: int) -> SendResult:
    if 200 <= status < 300:
        return SendResult.OK
    if 300 <= status < 400:
        return SendResult.REDIRECT_REFUSED
    return SendResult.HTTP_ERROR


class _Pool:
    """The connections of one pinned address: idle ones (last in, first out), how many are
    open (busy, idle or connecting) and the attempts waiting for one."""

    __slots__ = ("count", "idle", "key", "waiters")

    def __init__(self, key: PoolKey) -> None:
        self.key = key
        self.idle: list[_Conn] = []
        self.count = 0
        self.waiters: deque[asyncio.Future[_Conn | None]] = deque()


class _Conn(asyncio.Protocol):
    """One keep-alive connection and the exchange in progress on it (one at a time)."""

    def __init__(self, owner: LeanHttpSender, pool: _Pool) -> None:
        self.owner = owner
        self.pool = pool
        self.loop = owner.loop
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.parser.set_dangerous_leniencies(**RESPONSE_LENIENCIES)
        self.closed = False
        self.idle_since = 0.0
        self.limit = owner.config.max_body_bytes
        self.read_timeout = owner.config.read_timeout_s
        self._reset()

    def _reset(self) -> None:
        self.waiter: asyncio.Future[Reply] | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.deadline_at = 0.0
        self.last_data = 0.0
        self.status: int | None = None
        self.retry_after: str | None = None
        self.framed = False  # Content-Length or Transfer-Encoding seen (else: body until close)
        self.body = bytearray()
        self.truncated = False
        self.complete = False
        self.keep_alive = False
        self.head_only = False  # a HEAD request: the response has no body, whatever it says
        self.refusal = ""  # why a callback refused the response (else llhttp's error says)

    # --- asyncio.Protocol ---------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if self.waiter is None:  # bytes nobody asked for: this connection is not reusable
            self.close()
            return
        self.last_data = self.loop.time()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._end(SendResult.PROTOCOL_ERROR, "the target switched protocols")
            return
        except httptools.HttpParserError as exc:
            why = self.refusal or f"HttpParserError: {exc}"
            if self.status is None:
                self._end(SendResult.PROTOCOL_ERROR, why)
            else:
                self._end(_status_result(self.status), f"body read: {why}")
            return
        if self.truncated:
            self._end(_status_result(self.status or 0), "")
        elif self.complete:  # after a HEAD the parser would wait for a body: not reused
            self._end(_status_result(self.status or 0), "", reusable=not self.head_only)

    def connection_lost(self, exc: Exception | None) -> None:
        was_closed, self.closed = self.closed, True
        if self.waiter is not None:
            why = f"{type(exc).__name__}: {exc}" if exc is not None else "closed by the target"
            if self.status is None:
                self._end(SendResult.CONNECTION_LOST, f"connection lost: {why}")
            elif self.framed:
                self._end(_status_result(self.status), f"body read: connection lost: {why}")
            else:  # the body ran until the target closed: that is its end
                self._end(_status_result(self.status), "")
        if not was_closed:
            self.owner.forget(self)

    # --- httptools callbacks ------------------------------------------------------------------
    def on_header(self, name: bytes, value: bytes) -> None:
        if b"\0" in value:  # RFC 9110 5.5: reject, or replace by a space (aiohttp rejects)
            self.refusal = "a NUL in a header value"
            raise ValueError(self.refusal)  # llhttp stops with HttpParserCallbackError
        lower = name.lower()
        if lower == b"retry-after":  # a singleton field (RFC 9110 10.2.3): a repeat is ignored
            if self.retry_after is None:
                self.retry_after = value.decode("latin-1")
        elif lower == b"content-length" or lower == b"transfer-encoding":
            self.framed = True

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        if 100 <= status < 200:  # informational (103 Early Hints): the response follows
            self.retry_after, self.framed = None, False
            return
        # a status outside 100-599 is invalid, and a client SHOULD take it as a 5xx (RFC 9110 15)
        self.status = status
        if self.head_only:
            self.complete = True

    def on_body(self, body: bytes) -> None:
        if self.status is None:  # bytes after a 1xx head: not the response's (it has no body)
            return
        room = self.limit - len(self.body)
        if len(body) > room:
            self.body += body[:room]
            self.truncated = True
        elif not self.truncated:
            self.body += body

    def on_message_complete(self) -> None:
        if self.status is not None:
            self.complete = True
            self.keep_alive = self.parser.should_keep_alive()  # llhttp resets it after this

    # --- the exchange -------------------------------------------------------------------------
    def exchange(
        self, request: bytes, deadline_at: float, *, head_only: bool = False
    ) -> asyncio.Future[Reply]:
        """Write ``request``; the future gets the reply (a timeout or a lost connection included:
        it never raises)."""
        assert self.transport is not None
        self.waiter = waiter = self.loop.create_future()
        self.head_only = head_only
        self.deadline_at = deadline_at
        self.last_data = now = self.loop.time()
        self.timer = self.loop.call_at(min(deadline_at, now + self.read_timeout), self._on_timer)
        self.transport.write(request)
        return waiter

    def _on_timer(self) -> None:
        self.timer = None
        if self.waiter is None:
            return
        now = self.loop.time()
        if now >= self.deadline_at:
            late = "deadline exceeded"
        elif now - self.last_data >= self.read_timeout:
            late = f"read timeout ({self.read_timeout:g} s)"
        else:
            at = min(self.deadline_at, self.last_data + self.read_timeout)
            self.timer = self.loop.call_at(at, self._on_timer)
            return
        if self.status is None:
            self._end(SendResult.TIMEOUT_READ, f"{late} after sending")
        else:
            self._end(_status_result(self.status), f"body read: {late}")

    def _end(self, result: SendResult, detail: str, *, reusable: bool = False) -> None:
        """Hand the reply to the waiting attempt; the connection goes back to its pool when the
        response was read to its end and both sides keep it alive, else it is closed."""
        waiter = self.waiter
        reply: Reply = (
            result,
            self.status,
            self.retry_after if self.status is not None else None,  # no head, no response
            bytes(self.body),
            self.truncated,
            detail,
        )
        if self.timer is not None:
            self.timer.cancel()
        keep = reusable and self.keep_alive and not self.closed
        self._reset()
        if waiter is not None and not waiter.done():
            waiter.set_result(reply)
        if keep:
            self.owner.release(self)
        else:
            self.close()

    def abandon(self) -> None:
        """The attempt was cancelled mid-exchange: the connection cannot be reused."""
        if self.timer is not None:
            self.timer.cancel()
        self._reset()
        self.close()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            if self.transport is not None:
                self.transport.close()
            self.owner.forget(self)


class LeanHttpSender:
    """Sends attempts over keep-alive pools per pinned address (module docstring). Use
    ``async with LeanHttpSender(...)`` or ``await start()`` / ``await close()`` inside the event
    loop that sends; call :meth:`send` from as many tasks as you like."""

    def __init__(
        self,
        policy: AddressPolicy,
        config: SenderConfig | None = None,
        *,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.policy = policy
        self.config = config or SenderConfig()
        self._clock = clock
        self._monotonic = monotonic
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pools: dict[PoolKey, _Pool] = {}
        self._conns: set[_Conn] = set()  # open, all pools
        self._opening = 0  # connections being opened, all pools
        self._tls: ssl.SSLContext | None = None
        self._heads: dict[tuple[str, str], bytes] = {}  # (url, method) -> request line and Host
        self._defaults = _header_lines(self._default_headers(()))
        self._next_sweep = 0.0

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        assert self._loop is not None, "LeanHttpSender is not started"
        return self._loop

    async def start(self) -> None:
        """Bind to the running loop (idempotent)."""
        if self._loop is None:
            self._loop = asyncio.get_running_loop()

    async def close(self) -> None:
        """Close every connection; attempts in flight end ``connection_lost``. Idempotent."""
        for pool in self._pools.values():
            while pool.waiters:
                fut = pool.waiters.popleft()
                if not fut.done():
                    fut.set_exception(ConnectionAbortedError("the sender was closed"))
        for conn in list(self._conns):
            conn.close()
        self._pools.clear()
        self._loop = None

    async def __aenter__(self) -> LeanHttpSender:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # --- one attempt ------------------------------------------------------------------------
    async def send(
        self,
        url: str,
        body: bytes,
        headers: Mapping[str, str],
        *,
        method: str = "POST",
        timeout_s: float | None = None,
    ) -> AttemptResult:
        """Make one attempt (see :meth:`horae.outbound.http_sender.HttpSender.send`)."""
        loop = self._loop
        if loop is None:
            raise RuntimeError("LeanHttpSender is not started")
        check_sendable(method, headers)  # raises Unsendable: nothing resolved, nothing sent
        started = self._monotonic()
        limit = self.config.deadline_s
        deadline_at = loop.time() + (limit if timeout_s is None else min(limit, timeout_s))
        try:
            target = self.policy.check_now(url)
            if target is None:
                async with asyncio.timeout_at(deadline_at):
                    target = await self.policy.check(url)
        except AddressRefused as exc:
            return self._failed(SendResult.REFUSED_SSRF, str(exc), started)
        except ResolutionError as exc:
            return self._failed(SendResult.DNS_ERROR, str(exc), started)
        except TimeoutError:
            return self._failed(SendResult.DNS_ERROR, "deadline exceeded while resolving", started)
        head = self._heads.get((url, method)) or self._head(url, target, method)
        request = self._request(head, headers, body)
        try:
            conn = await self._acquire(target, deadline_at)
        except _Refused as exc:
            return self._failed(exc.result, exc.detail, started)
        try:
            result, status, retry_raw, excerpt, truncated, detail = await conn.exchange(
                request, deadline_at, head_only=method == "HEAD"
            )
        except asyncio.CancelledError:
            conn.abandon()
            raise
        retry_after = None
        if retry_raw is not None:
            retry_after = parse_retry_after(retry_raw, self._clock())
        return AttemptResult(
            send_result=result,
            status=status,
            duration_s=self._monotonic() - started,
            retry_after_s=retry_after,
            body_excerpt=excerpt,
            body_truncated=truncated,
            detail=detail,
            peer=conn.pool.key[0],
        )

    def _failed(self, result: SendResult, detail: str, started: float) -> AttemptResult:
        return AttemptResult(result, duration_s=self._monotonic() - started, detail=detail)

    def _request(self, head: bytes, headers: Mapping[str, str], body: bytes) -> bytes:
        """The request's bytes: ``head`` (request line, ``Host``), the sender's defaults unless
        the caller sets them, ``Content-Length``, the caller's headers, the body. A line break in
        a header raises ``ValueError`` (as aiohttp does): it would split the request."""
        lines = _header_lines(headers.items())
        if lines.count("\n") != len(headers) or lines.count("\r") != len(headers):
            raise ValueError("a line break in an HTTP header name or value")
        defaults = self._defaults
        for name in headers:
            if name.lower() in _DEFAULT_NAMES:
                defaults = _header_lines(self._default_headers(headers))
                break
        return b"".join(
            (head, f"{defaults}Content-Length: {len(body)}\r\n{lines}\r\n".encode(), body)
        )

    def _head(self, url: str, target: CheckedTarget, method: str) -> bytes:
        """The request line and ``Host`` of ``url`` (cached per URL and method)."""
        if not _TOKEN.fullmatch(method):
            raise ValueError(f"the HTTP method {method!r} is not a token")
        parsed = target.url
        default_port = 443 if parsed.scheme == "https" else 80
        host = f"[{target.host}]" if ":" in target.host else target.host
        if target.port != default_port:
            host = f"{host}:{target.port}"
        head = f"{method} {parsed.raw_path_qs or '/'} HTTP/1.1\r\nHost: {host}\r\n".encode()
        if len(self._heads) >= 4096:
            self._heads.clear()
        self._heads[(url, method)] = head
        return head

    def _default_headers(self, given: Mapping[str, str] | tuple[()]) -> list[tuple[str, str]]:
        """The sender's own headers the caller does not set (compared case-insensitively)."""
        taken = {name.lower() for name in given}
        return [
            (k, v)
            for k, v in (("User-Agent", self.config.user_agent), ("Accept-Encoding", "identity"))
            if k.lower() not in taken
        ]

    # --- the pools ---------------------------------------------------------------------------
    async def _acquire(self, target: CheckedTarget, deadline_at: float) -> _Conn:
        """A connection to one of the target's checked addresses: an idle pooled one, else a new
        one (addresses in order), else the next one handed back (within the connect timeout)."""
        loop = self.loop
        now = loop.time()
        tls = target.host if target.url.scheme == "https" else None
        pools = []
        for addr in target.addresses:
            key = (str(addr), target.port, tls)
            pool = self._pools.get(key)
            if pool is None:
                pool = self._pools[key] = _Pool(key)
            pools.append(pool)
            conn = self._idle(pool, now)
            if conn is not None:
                return conn
        connect_by = min(deadline_at, now + self.config.connect_timeout_s)
        while True:
            errors: list[str] = []
            for pool in pools:
                if self._may_open(pool):
                    try:
                        return await self._connect(pool, connect_by, deadline_at)
                    except OSError as exc:  # refused, unreachable: the next checked address
                        errors.append(f"{pool.key[0]}: {type(exc).__name__}: {exc}")
            if errors:
                raise _Refused(SendResult.CONNECTION_ERROR, "; ".join(errors))
            conn = await self._wait(pools[0], connect_by, deadline_at)
            if conn is not None and not conn.closed:  # closed by the target since handed back
                return conn

    def _idle(self, pool: _Pool, now: float) -> _Conn | None:
        idle = pool.idle
        while idle:
            conn = idle.pop()
            if conn.closed:
                continue
            if now - conn.idle_since < self.config.keepalive_s:
                return conn
            conn.close()
        return None

    def _may_open(self, pool: _Pool) -> bool:
        per_host = self.config.pool_per_host
        if len(self._conns) + self._opening >= self.config.pool_size:
            return False
        return per_host <= 0 or pool.count < per_host

    async def _connect(self, pool: _Pool, connect_by: float, deadline_at: float) -> _Conn:
        address, port, server_name = pool.key
        if server_name is not None and self._tls is None:
            self._tls = ssl.create_default_context()
        pool.count += 1
        self._opening += 1
        try:
            async with asyncio.timeout_at(connect_by):
                transport, conn = await self.loop.create_connection(
                    lambda: _Conn(self, pool),
                    address,
                    port,
                    ssl=self._tls if server_name is not None else None,
                    server_hostname=server_name,
                )
        except TimeoutError:
            self._closed(pool)
            late = "deadline exceeded" if connect_by >= deadline_at else "timeout"
            raise _Refused(SendResult.TIMEOUT_CONNECT, f"{late} while connecting") from None
        except ssl.SSLError as exc:  # certificate or handshake (SSLCertVerificationError too)
            self._closed(pool)
            raise _Refused(SendResult.TLS_ERROR, f"{type(exc).__name__}: {exc}") from None
        except BaseException:
            self._closed(pool)
            raise
        finally:
            self._opening -= 1
        conn.transport = transport  # uvloop may call connection_made after this returns
        self._conns.add(conn)
        return conn

    async def _wait(self, pool: _Pool, connect_by: float, deadline_at: float) -> _Conn | None:
        """The next connection handed back to ``pool`` (None: a slot was freed, try again)."""
        loop = self.loop
        if loop.time() >= connect_by:
            late = "deadline exceeded" if connect_by >= deadline_at else "timeout"
            raise _Refused(SendResult.TIMEOUT_CONNECT, f"{late} waiting for a pooled connection")
        fut: asyncio.Future[_Conn | None] = loop.create_future()
        pool.waiters.append(fut)
        timer = loop.call_at(connect_by, _expire, fut)
        try:
            return await fut
        except asyncio.CancelledError:  # a connection handed over meanwhile goes on
            if fut.done() and not fut.cancelled() and fut.exception() is None:
                handed = fut.result()
                if handed is not None:
                    self.release(handed)
            raise
        except TimeoutError:
            late = "deadline exceeded" if connect_by >= deadline_at else "timeout"
            raise _Refused(
                SendResult.TIMEOUT_CONNECT, f"{late} waiting for a pooled connection"
            ) from None
        finally:
            timer.cancel()

    def release(self, conn: _Conn) -> None:
        """A connection whose response was read to its end: to the next waiter, else idle."""
        pool = conn.pool
        while pool.waiters:
            fut = pool.waiters.popleft()
            if not fut.done():
                fut.set_result(conn)
                return
        conn.idle_since = now = self.loop.time()
        pool.idle.append(conn)
        if now >= self._next_sweep:
            self._sweep(now)

    def forget(self, conn: _Conn) -> None:
        """A connection closed: its slot is free (a waiter of its pool, else of any pool, is
        woken to open one)."""
        pool = conn.pool
        self._conns.discard(conn)
        self._closed(pool)
        if conn in pool.idle:
            pool.idle.remove(conn)

    def _closed(self, pool: _Pool) -> None:
        pool.count -= 1
        for waiting in (pool, *self._pools.values()):
            while waiting.waiters:
                fut = waiting.waiters.popleft()
                if not fut.done():
                    fut.set_result(None)
                    return

    def _sweep(self, now: float) -> None:
        """Close idle connections older than ``keepalive_s`` (at most twice per period)."""
        keep = self.config.keepalive_s
        self._next_sweep = now + keep / 2
        for pool in list(self._pools.values()):
            for conn in [c for c in pool.idle if now - c.idle_since >= keep]:
                conn.close()
            if not pool.count and not pool.waiters:
                del self._pools[pool.key]


def _expire(fut: asyncio.Future[_Conn | None]) -> None:
    if not fut.done():
        fut.set_exception(TimeoutError())
