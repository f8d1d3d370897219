"""Transport details of the sender that the lean client implements itself (and aiohttp's does
too): TLS for https targets, the per-address connection cap, body framing, header safety. Each
test runs once per client and per loop (conftest)."""

from __future__ import annotations

import asyncio
import ssl
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from aiohttp import web

from horae.outbound import AttemptResult, SenderConfig, SendResult
from horae.streams.dispatcher.worker import Sender
from tests.integration.outbound.test_http_sender import raw_server, run


@asynccontextmanager
async def app_server(
    handle: Callable[[web.Request], Awaitable[web.StreamResponse]],
    tls: ssl.SSLContext | None = None,
) -> AsyncIterator[int]:
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls).start()
    try:
        yield int(runner.addresses[0][1])
    finally:
        await runner.cleanup()


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key (openssl)."""
    where = tmp_path_factory.mktemp("tls")
    cert, key = where / "cert.pem", where / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key


def tls_context(certificate: tuple[Path, Path]) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(*certificate)
    return context


async def ok(request: web.Request) -> web.Response:
    await request.read()
    return web.Response(text="ok")


def test_an_untrusted_certificate_is_a_tls_error_and_nothing_is_sent(
    certificate: tuple[Path, Path],
) -> None:
    hits: list[str] = []

    async def counted(request: web.Request) -> web.Response:
        hits.append(request.path)
        return await ok(request)

    async def go(sender: Sender) -> AttemptResult:
        async with app_server(counted, tls_context(certificate)) as port:
            return await sender.send(f"https://127.0.0.1:{port}/hook", b"{}", {})

    result = run(go)
    assert result.send_result is SendResult.TLS_ERROR, result.detail
    assert hits == []


def test_a_trusted_certificate_carries_the_request_over_tls(
    certificate: tuple[Path, Path], on_each_client: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if on_each_client != "lean":
        pytest.skip("aiohttp builds its TLS context at import: SSL_CERT_FILE is not read again")
    monkeypatch.setenv("SSL_CERT_FILE", str(certificate[0]))
    seen: list[tuple[str, bytes]] = []

    async def handle(request: web.Request) -> web.Response:
        seen.append((request.scheme, await request.read()))
        return web.Response(text="over tls")

    async def go(sender: Sender) -> list[AttemptResult]:
        async with app_server(handle, tls_context(certificate)) as port:
            url = f"https://127.0.0.1:{port}/hook"
            return [await sender.send(url, b"{}", {}) for _ in range(2)]

    results = run(go)
    assert [(r.send_result, r.body_excerpt) for r in results] == [(SendResult.OK, b"over tls")] * 2
    assert seen == [("https", b"{}")] * 2


def test_at_most_pool_per_host_connections_to_one_address() -> None:
    ports: set[int] = set()
    inside = [0, 0]  # now, most at once
    gate = asyncio.Event()  # requests are answered in pairs: two must be inside at once

    async def handle(request: web.Request) -> web.Response:
        peer = request.transport.get_extra_info("peername") if request.transport else None
        ports.add(int(peer[1]) if peer else -1)
        inside[0] += 1
        inside[1] = max(inside)
        if inside[0] == 2:
            gate.set()
        await gate.wait()
        inside[0] -= 1
        if inside[0] == 0:
            gate.clear()
        return web.Response(text="ok")

    async def go(sender: Sender) -> list[AttemptResult]:
        async with app_server(handle) as port:
            url = f"http://127.0.0.1:{port}/hook"
            return list(await asyncio.gather(*(sender.send(url, b"{}", {}) for _ in range(12))))

    results = run(go, SenderConfig(pool_size=8, pool_per_host=2))
    assert [r.send_result for r in results] == [SendResult.OK] * 12
    assert len(ports) == 2 and inside[1] == 2


def test_a_body_that_ends_with_the_connection_is_whole() -> None:
    reply = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nthe whole body"

    async def go(sender: Sender) -> AttemptResult:
        async with raw_server(reply) as base:
            return await sender.send(f"{base}/hook", b"{}", {})

    result = run(go)
    assert (result.send_result, result.status) == (SendResult.OK, 200)
    assert result.body_excerpt == b"the whole body" and result.detail == ""


def test_a_body_cut_short_keeps_the_status_and_says_so() -> None:
    reply = b"HTTP/1.1 503 Unavailable\r\nContent-Length: 100\r\nRetry-After: 7\r\n\r\nshort"

    async def go(sender: Sender) -> AttemptResult:
        async with raw_server(reply) as base:
            return await sender.send(f"{base}/hook", b"{}", {})

    result = run(go)
    assert (result.send_result, result.status) == (SendResult.HTTP_ERROR, 503)
    assert result.retry_after_s == 7.0
    assert result.detail.startswith("body read"), result.detail


def test_an_early_hint_is_not_the_answer() -> None:
    reply = b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 201 Created\r\n\r\n"

    async def go(sender: Sender) -> AttemptResult:
        async with raw_server(reply) as base:
            return await sender.send(f"{base}/hook", b"{}", {})

    result = run(go)
    assert (result.send_result, result.status) == (SendResult.OK, 201)


def test_the_callers_user_agent_replaces_the_default_and_nothing_is_doubled() -> None:
    seen: list[list[str]] = []

    async def handle(request: web.Request) -> web.Response:
        seen.append(request.headers.getall("User-Agent"))
        return web.Response(text="ok")

    async def go(sender: Sender) -> list[AttemptResult]:
        async with app_server(handle) as port:
            url = f"http://127.0.0.1:{port}/hook"
            return [
                await sender.send(url, b"{}", {"user-agent": "tenant-agent/1"}),
                await sender.send(url, b"{}", {}),
            ]

    assert all(r.send_result is SendResult.OK for r in run(go))
    assert seen[0] == ["tenant-agent/1"] and seen[1][0].startswith("Horae-Dispatcher/")


def test_a_line_break_in_a_header_never_reaches_the_wire() -> None:
    hits: list[str] = []

    async def handle(request: web.Request) -> web.Response:
        hits.append(request.path)
        return web.Response(text="ok")

    async def go(sender: Sender) -> None:
        async with app_server(handle) as port:
            url = f"http://127.0.0.1:{port}/hook"
            with pytest.raises(ValueError):
                await sender.send(url, b"{}", {"X-Tenant": "a\r\nX-Injected: 1"})

    run(go)
    assert hits == []
