"""Local target servers for the sender's integration tests (127.0.0.1, ephemeral ports)."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from email.utils import formatdate

from aiohttp import web
from standardwebhooks import Webhook, WebhookVerificationError

from horae.dispatch.signing import decode_secret

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
