"""DNS rebinding: the sender connects to the address the policy checked, never to a later answer.

Two local servers share one port: a "good" one on 127.0.0.2 (allowlisted: it plays the public
address) and a "victim" on 127.0.0.1 (not allowlisted: it plays the platform's insides). The fake
resolver answers 127.0.0.2 the first time and 127.0.0.1 ever after.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from aiohttp import web

from horae.outbound.http_sender import Outcome, SendResult
from horae.outbound.ssrf import AddressPolicy
from tests.unit.senders import new_sender


class RebindingResolver:
    def __init__(self, answers: Sequence[str], then: str) -> None:
        self.answers, self.then, self.calls = list(answers), then, 0

    async def __call__(self, host: str, port: int) -> list[str]:
        self.calls += 1
        return [self.answers.pop(0) if self.answers else self.then]


@asynccontextmanager
async def counting_server(host: str, port: int, hits: list[str]) -> AsyncIterator[int]:
    async def handle(request: web.Request) -> web.Response:
        hits.append(request.host)
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    try:
        yield int(runner.addresses[0][1])
    finally:
        await runner.cleanup()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


Outcome4 = tuple[list[str], list[str], list[SendResult], list[str | None]]


async def _scenario(first: str, allow: list[str], sends: int, ttl: float = 0.0) -> Outcome4:
    good: list[str] = []
    victim: list[str] = []
    port = _free_port()
    resolver = RebindingResolver([first], then="127.0.0.1")
    policy = AddressPolicy(allow=allow, resolver=resolver, cache_ttl_s=ttl)
    results = []
    sender = new_sender(policy)
    async with (
        counting_server("127.0.0.1", port, victim),
        counting_server("127.0.0.2", port, good),
    ):
        await sender.start()
        try:
            for _ in range(sends):
                url = f"http://rebind.example:{port}/hook"
                results.append(await sender.send(url, b"{}", {}))
        finally:
            await sender.close()
    return good, victim, [r.send_result for r in results], [r.peer for r in results]


def test_rebinding_after_the_check_cannot_redirect_the_connection() -> None:
    good, victim, results, peers = asyncio.run(_scenario("127.0.0.2", ["127.0.0.2/32"], 1))
    assert results == [SendResult.OK]
    assert peers == ["127.0.0.2"]
    assert len(good) == 1 and good[0].startswith("rebind.example:")  # Host header kept
    assert victim == []


def test_rebound_answer_is_checked_again_and_refused() -> None:
    # The second attempt re-resolves (a new check per attempt): the loopback answer is refused,
    # even though a keep-alive connection to the good address is still in the pool.
    good, victim, results, _ = asyncio.run(_scenario("127.0.0.2", ["127.0.0.2/32"], 2))
    assert results == [SendResult.OK, SendResult.REFUSED_SSRF]
    assert len(good) == 1
    assert victim == []


def test_within_the_cache_ttl_the_checked_answer_is_reused() -> None:
    # With a DNS cache the rebound answer is not even seen: the pinned, checked address is used.
    good, victim, results, peers = asyncio.run(
        _scenario("127.0.0.2", ["127.0.0.2/32"], 3, ttl=3600.0)
    )
    assert results == [SendResult.OK] * 3
    assert peers == ["127.0.0.2"] * 3 and len(good) == 3
    assert victim == []


def test_loopback_is_reached_only_when_allowlisted() -> None:
    _, victim, results, _ = asyncio.run(_scenario("127.0.0.1", [], 1))
    assert results == [SendResult.REFUSED_SSRF]
    assert victim == []
    _, victim, results, _ = asyncio.run(_scenario("127.0.0.1", ["127.0.0.1/32"], 1))
    assert results == [SendResult.OK]
    assert len(victim) == 1


def test_refusal_outcome_is_not_sent() -> None:
    async def go() -> Outcome:
        sender = new_sender(AddressPolicy())
        await sender.start()
        try:
            return (await sender.send("http://169.254.169.254/latest/", b"", {})).outcome
        finally:
            await sender.close()

    assert asyncio.run(go()) is Outcome.NOT_SENT
