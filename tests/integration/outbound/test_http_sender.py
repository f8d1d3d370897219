"""The sender against real local servers (127.0.0.1, allowlisted). No timed assertions: timeouts
are short so the tests are quick, but only *which* result comes back is asserted."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import socket
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from email.utils import formatdate
from typing import TypeVar

from aiohttp import web
from standardwebhooks import Webhook, WebhookVerificationError

from horae.outbound import (
    AddressPolicy,
    AttemptResult,
    Outcome,
    SenderConfig,
    SendResult,
    SigningKeys,
    attempt_headers,
    classify,
)
from horae.outbound.signing import decode_secret
from horae.streams.dispatcher.worker import Sender
from tests.unit.senders import new_sender

T = TypeVar("T")


# --- local targets (127.0.0.1, ephemeral ports) ----------------------------------------------

NOW = 1_700_000_000.0  # the sender's injected wall clock in Retry-After tests


class Target:
    """A webhook receiver that verifies, counts and misbehaves on request."""

    def __init__(self, secrets: tuple[str, ...] = ()) -> None:
        self.secrets = secrets
        self.hits: Counter[str] = Counter()
        self.client_ports: set[int] = set()
        self.verified: list[dict[str, bool]] = []
        self.idempotency_keys: list[str] = []
        self.release = asyncio.Event()  # set on shutdown: stalled handlers finish

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/{name}", self.handle)
        return app

    async def handle(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        self.hits[name] += 1
        peer = request.transport.get_extra_info("peername") if request.transport else None
        if peer:
            self.client_ports.add(int(peer[1]))
        body = await request.read()
        handler: Callable[[web.Request, bytes], object] | None = getattr(self, f"on_{name}", None)
        if handler is None:
            return web.Response(status=404, text=f"no such hook: {name}")
        result = handler(request, body)
        if asyncio.iscoroutine(result):
            result = await result
        assert isinstance(result, web.StreamResponse)
        return result

    def on_hook(self, request: web.Request, body: bytes) -> web.Response:
        headers = dict(request.headers)
        self.idempotency_keys.append(headers.get("Idempotency-Key", ""))
        checks: dict[str, bool] = {}
        for secret in self.secrets:
            try:
                Webhook(secret).verify(body, headers, json_parse=False)
                checks[secret] = True
            except WebhookVerificationError:
                checks[secret] = False
        if self.secrets:
            mac = hmac.new(decode_secret(self.secrets[0]), body, hashlib.sha256).hexdigest()
            checks["x-signature"] = headers.get("X-Signature") == f"sha256={mac}"
        self.verified.append(checks)
        return web.Response(status=204 if all(checks.values()) else 401)

    def on_redirect(self, request: web.Request, body: bytes) -> web.Response:
        return web.Response(status=302, headers={"Location": "/target"})

    def on_redirect_abs(self, request: web.Request, body: bytes) -> web.Response:
        return web.Response(status=307, headers={"Location": f"http://{request.host}/target"})

    def on_target(self, request: web.Request, body: bytes) -> web.Response:
        return web.Response(text="you should not be here")

    async def on_huge(self, request: web.Request, body: bytes) -> web.StreamResponse:
        resp = web.StreamResponse()
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        chunk = b"x" * 65536
        try:
            for _ in range(160):  # 10 MiB, unless the client hangs up first
                await resp.write(chunk)
        except (ConnectionResetError, ConnectionError):
            pass
        return resp

    async def on_slow(self, request: web.Request, body: bytes) -> web.Response:
        await self.release.wait()
        return web.Response(text="too late")

    async def on_slow_body(self, request: web.Request, body: bytes) -> web.StreamResponse:
        resp = web.StreamResponse(status=200)
        resp.content_length = 1000
        await resp.prepare(request)
        await resp.write(b"partial...")
        await self.release.wait()
        return resp

    def on_busy(self, request: web.Request, body: bytes) -> web.Response:
        return web.Response(status=429, headers={"Retry-After": "120"})

    def on_down(self, request: web.Request, body: bytes) -> web.Response:
        return web.Response(status=503, headers={"Retry-After": formatdate(NOW + 90, usegmt=True)})


@asynccontextmanager
async def serve(target: Target, host: str = "127.0.0.1") -> AsyncIterator[str]:
    """Run ``target`` and yield its base URL; on exit, release stalled handlers and stop."""
    runner = web.AppRunner(target.app())
    await runner.setup()
    await web.TCPSite(runner, host, 0).start()
    try:
        yield f"http://{host}:{runner.addresses[0][1]}"
    finally:
        target.release.set()
        await runner.cleanup()


@asynccontextmanager
async def raw_server(reply: bytes | None) -> AsyncIterator[str]:
    """A TCP server that reads the request head, writes ``reply`` (``None``: nothing) and hangs
    up — for answers no HTTP framework would produce."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        if reply is not None:
            writer.write(reply)
            await writer.drain()
        writer.close()
        await writer.wait_closed()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        server.close()
        await server.wait_closed()


# --- tests ----------------------------------------------------------------------------------------

LOOPBACK = AddressPolicy(allow=["127.0.0.1/32"])
OLD = "whsec_" + base64.b64encode(b"old-secret-for-integration").decode()
NEW = "whsec_" + base64.b64encode(b"new-secret-for-integration").decode()
BODY = json.dumps({"trigger": "t-1", "scheduled_at": "2025-01-01T09:00:00Z"}).encode()


def run(
    go: Callable[[Sender], Awaitable[T]],
    config: SenderConfig | None = None,
    policy: AddressPolicy = LOOPBACK,
    clock: Callable[[], float] = time.time,
) -> T:
    async def main() -> T:
        sender = new_sender(policy, config, clock=clock)
        await sender.start()
        try:
            return await go(sender)
        finally:
            await sender.close()

    return asyncio.run(main())


FIRE_KEY = "tenant/t-1/2025-01-01T09:00:00Z/0"


def signed(keys: SigningKeys) -> dict[str, str]:
    return attempt_headers(body=BODY, fire_key=FIRE_KEY, keys=keys, now=time.time())


def test_signature_verified_by_the_reference_library_on_the_server() -> None:
    target = Target(secrets=(OLD,))

    async def go(sender: Sender) -> AttemptResult:
        async with serve(target) as base:
            return await sender.send(f"{base}/hook", BODY, signed(SigningKeys.from_secrets(OLD)))

    result = run(go)
    assert (result.send_result, result.status, result.outcome) == (
        SendResult.OK,
        204,
        Outcome.DELIVERED,
    )
    assert target.verified == [{OLD: True, "x-signature": True}]
    assert target.idempotency_keys == [FIRE_KEY]
    assert result.peer == "127.0.0.1"


def test_rotation_both_signatures_verify() -> None:
    target = Target(secrets=(NEW, OLD))

    async def go(sender: Sender) -> AttemptResult:
        async with serve(target) as base:
            keys = SigningKeys.from_secrets(NEW, OLD)
            return await sender.send(f"{base}/hook", BODY, signed(keys))

    assert run(go).status == 204
    assert target.verified == [{NEW: True, OLD: True, "x-signature": True}]


def test_wrong_secret_is_refused_by_the_server_and_not_retried() -> None:
    target = Target(secrets=(NEW,))

    async def go(sender: Sender) -> AttemptResult:
        async with serve(target) as base:
            return await sender.send(f"{base}/hook", BODY, signed(SigningKeys.from_secrets(OLD)))

    result = run(go)
    assert (result.send_result, result.status) == (SendResult.HTTP_ERROR, 401)
    assert not classify(result).retry


def test_redirects_are_not_followed() -> None:
    target = Target()

    async def go(sender: Sender) -> list[AttemptResult]:
        async with serve(target) as base:
            return [
                await sender.send(f"{base}/{p}", BODY, {}) for p in ("redirect", "redirect_abs")
            ]

    results = run(go)
    assert [(r.send_result, r.status) for r in results] == [
        (SendResult.REDIRECT_REFUSED, 302),
        (SendResult.REDIRECT_REFUSED, 307),
    ]
    assert target.hits["target"] == 0
    assert not any(classify(r).retry for r in results)


def test_huge_body_is_bounded_and_the_sender_keeps_working() -> None:
    target = Target()
    config = SenderConfig(max_body_bytes=64 * 1024)

    async def go(sender: Sender) -> list[AttemptResult]:
        async with serve(target) as base:
            return [await sender.send(f"{base}/{p}", BODY, {}) for p in ("huge", "missing")]

    huge, after = run(go, config)
    assert (huge.send_result, huge.status) == (SendResult.OK, 200)
    assert len(huge.body_excerpt) == 64 * 1024 and huge.body_truncated
    assert (after.send_result, after.status) == (SendResult.HTTP_ERROR, 404)
    assert after.body_excerpt == b"no such hook: missing" and not after.body_truncated


def test_slow_server_times_out_after_sending_outcome_unknown() -> None:
    for config in (SenderConfig(read_timeout_s=0.2), SenderConfig(deadline_s=0.2)):
        target = Target()

        async def go(sender: Sender, target: Target = target) -> AttemptResult:
            async with serve(target) as base:
                return await sender.send(f"{base}/slow", BODY, {})

        result = run(go, config)
        assert result.send_result is SendResult.TIMEOUT_READ, result.detail
        assert result.outcome is Outcome.UNKNOWN and result.status is None
        assert classify(result).retry  # same Idempotency-Key next time: safe
        assert target.hits["slow"] == 1  # the request did arrive: "unknown" is the honest answer


def test_the_targets_timeout_cuts_an_attempt_below_the_senders_deadline() -> None:
    """``timeout_s`` (the target's ``timeout_ms``) bounds the whole attempt; the sender's own
    deadline still applies when it is lower."""

    async def go(sender: Sender) -> list[AttemptResult]:
        async with serve(Target()) as base:
            return [
                await sender.send(f"{base}/slow", BODY, {}, timeout_s=0.2),
                await sender.send(f"{base}/slow", BODY, {}, timeout_s=60.0),
            ]

    short, long = run(go, SenderConfig(read_timeout_s=30.0, deadline_s=0.5))
    assert short.send_result is SendResult.TIMEOUT_READ and short.duration_s < 0.45
    assert long.send_result is SendResult.TIMEOUT_READ and 0.45 <= long.duration_s < 5


def test_stalled_body_keeps_the_status() -> None:
    async def go(sender: Sender) -> AttemptResult:
        async with serve(Target()) as base:
            return await sender.send(f"{base}/slow_body", BODY, {})

    result = run(go, SenderConfig(read_timeout_s=0.2))
    assert (result.send_result, result.status) == (SendResult.OK, 200)
    assert result.body_excerpt == b"partial..." and result.detail.startswith("body read")


def test_retry_after_is_reported() -> None:
    async def go(sender: Sender) -> list[AttemptResult]:
        async with serve(Target()) as base:
            return [await sender.send(f"{base}/{p}", BODY, {}) for p in ("busy", "down")]

    busy, down = run(go, clock=lambda: NOW)
    assert (busy.status, busy.retry_after_s) == (429, 120.0)
    assert (down.status, down.retry_after_s) == (503, 90.0)
    assert classify(busy).retry and classify(busy).retry_after_s == 120.0
    assert classify(down).retry and classify(down).retry_after_s == 90.0


def test_connections_are_reused() -> None:
    target = Target()

    async def go(sender: Sender) -> list[AttemptResult]:
        async with serve(target) as base:
            return [await sender.send(f"{base}/missing", BODY, {}) for _ in range(20)]

    assert all(r.status == 404 for r in run(go))
    assert len(target.client_ports) == 1


def test_not_allowlisted_loopback_is_never_contacted() -> None:
    target = Target()

    async def go(sender: Sender) -> AttemptResult:
        async with serve(target) as base:
            return await sender.send(f"{base}/hook", BODY, {})

    result = run(go, policy=AddressPolicy())
    assert result.send_result is SendResult.REFUSED_SSRF
    assert "loopback" in result.detail and sum(target.hits.values()) == 0


def test_connection_refused_is_not_sent() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: connections are refused

        async def go(sender: Sender) -> AttemptResult:
            return await sender.send(f"http://127.0.0.1:{port}/hook", BODY, {})

        result = run(go)
    assert result.send_result is SendResult.CONNECTION_ERROR
    assert result.outcome is Outcome.NOT_SENT and classify(result).retry


def test_hang_up_after_the_request_is_unknown() -> None:
    async def go(sender: Sender) -> AttemptResult:
        async with raw_server(None) as base:
            return await sender.send(f"{base}/hook", BODY, {})

    result = run(go)
    assert result.send_result is SendResult.CONNECTION_LOST, result.detail
    assert result.outcome is Outcome.UNKNOWN


def test_garbage_answer_is_a_protocol_error() -> None:
    async def go(sender: Sender) -> AttemptResult:
        async with raw_server(b"SPDY/9 banana\r\n\r\n") as base:
            return await sender.send(f"{base}/hook", BODY, {})

    result = run(go)
    assert result.send_result is SendResult.PROTOCOL_ERROR, result.detail
    assert result.outcome is Outcome.UNKNOWN


def test_connect_timeout_when_the_accept_queue_is_full() -> None:
    """A listener that never accepts, with its backlog filled: the SYN goes unanswered."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        fillers = []
        for _ in range(4):
            filler = socket.socket()
            filler.setblocking(False)
            filler.connect_ex(("127.0.0.1", port))
            fillers.append(filler)

        async def go(sender: Sender) -> AttemptResult:
            return await sender.send(f"http://127.0.0.1:{port}/hook", BODY, {})

        try:
            result = run(go, SenderConfig(connect_timeout_s=0.3))
        finally:
            for filler in fillers:
                filler.close()
    assert result.send_result is SendResult.TIMEOUT_CONNECT, result.detail
    assert result.outcome is Outcome.NOT_SENT
