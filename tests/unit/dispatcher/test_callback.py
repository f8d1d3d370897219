"""The outcome-callback handler on an in-memory sink and a virtual clock: what it accepts, what
it refuses and why, and what it writes where."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from horae.contracts import events as ev
from horae.contracts.codec import decode
from horae.contracts.topics import fire_partition
from horae.domain.keys import FireKey
from horae.outbound import ReplayGuard, issue_token
from horae.streams.dispatcher.callback import PATH, CallbackHandler, start_callback_server
from horae.streams.dispatcher.metrics import DispatcherMetrics

SECRET = b"unit-callback-secret"
T0 = 1_750_000_000.0
KEY = FireKey("acme", "nightly", 1_749_999_000)


@dataclass
class MemorySink:
    partitions: int = 6
    ok: bool = True
    written: list[tuple[bytes, bytes, int]] = field(default_factory=list)

    async def write(self, key: bytes, value: bytes, partition: int) -> bool:
        if self.ok:
            self.written.append((key, value, partition))
        return self.ok


@dataclass
class Env:
    sink: MemorySink
    metrics: DispatcherMetrics
    now: list[float]

    def count(self, result: str) -> float:
        value = self.metrics.registry.get_sample_value(
            "horae_dispatch_callbacks_total", {"result": result}
        )
        return value or 0.0


Post = Callable[[str | None, object], Awaitable[tuple[int, Any]]]


def run(scenario: Callable[[Env, Post], Awaitable[None]], sink: MemorySink | None = None) -> Env:
    env = Env(sink or MemorySink(), DispatcherMetrics(), [T0])
    handler = CallbackHandler(
        secret=SECRET,
        clock=lambda: env.now[0],
        replay=ReplayGuard(),
        metrics=env.metrics,
        sink=env.sink,
    )

    async def main() -> None:
        app = web.Application()
        app.router.add_post(PATH, handler.handle)
        async with TestClient(TestServer(app)) as client:

            async def post(token: str | None, body: object) -> tuple[int, Any]:
                headers = {"Horae-Callback-Token": token} if token is not None else {}
                resp = await client.post(PATH, json=body, headers=headers)
                return resp.status, await resp.json()

            await scenario(env, post)

    asyncio.run(main())
    return env


def token(attempt: int = 2, now: float = T0, secret: bytes = SECRET) -> str:
    return issue_token(
        tenant="acme",
        trigger="nightly",
        fire_key=KEY.canonical(),
        attempt=attempt,
        now=now,
        ttl_s=600,
        secret=secret,
        tzdata="2031z",
    )


def test_an_accepted_report_is_written_once_on_the_triggers_partition() -> None:
    async def scenario(env: Env, post: Post) -> None:
        env.now[0] = T0 + 30
        assert await post(token(), {"state": "failed", "error": "disk full"}) == (
            202,
            {"accepted": KEY.canonical()},
        )
        assert await post(token(), {"state": "succeeded"}) == (409, {"refused": "replayed"})

    env = run(scenario)
    ((key, value, partition),) = env.sink.written
    assert key == KEY.canonical().encode()
    assert partition == fire_partition("acme", "nightly", env.sink.partitions)
    outcome = decode(value, ev.WorkOutcome)
    assert outcome.state is ev.OutcomeState.FAILED and outcome.error == "disk full"
    assert outcome.attempts == 2 and outcome.key_hash == KEY.short_hash()
    assert outcome.decided_at == datetime.fromtimestamp(T0 + 30, UTC)
    assert outcome.source == ev.OutcomeSource.CALLBACK and outcome.tzdata_version == "2031z"
    assert env.count("accepted") == 1 and env.count("replayed") == 1


def test_refusals_write_nothing_and_are_counted_by_reason() -> None:
    async def scenario(env: Env, post: Post) -> None:
        assert await post(None, {"state": "succeeded"}) == (401, {"refused": "no_token"})
        forged = token(secret=b"another-secret")
        assert await post(forged, {"state": "succeeded"}) == (401, {"refused": "bad_signature"})
        assert await post(token(), {"state": "maybe"}) == (400, {"refused": "bad_state"})
        env.now[0] = T0 + 600  # the token's TTL has passed on the virtual clock
        assert await post(token(), {"state": "succeeded"}) == (401, {"refused": "expired"})

    env = run(scenario)
    assert env.sink.written == []
    for reason in ("no_token", "bad_signature", "bad_state", "expired"):
        assert env.count(reason) == 1, reason
    assert env.count("accepted") == 0


def test_an_unwritten_outcome_is_a_503_and_spends_the_token() -> None:
    async def scenario(env: Env, post: Post) -> None:
        assert await post(token(), {"state": "succeeded"}) == (503, {"refused": "not_written"})
        env.sink.ok = True
        assert await post(token(), {"state": "succeeded"}) == (409, {"refused": "replayed"})

    env = run(scenario, MemorySink(ok=False))
    assert env.sink.written == []
    assert env.count("not_written") == 1


def test_the_server_binds_a_free_port_when_asked_for_port_0() -> None:
    handler = CallbackHandler(
        secret=SECRET,
        clock=lambda: T0,
        replay=ReplayGuard(),
        metrics=DispatcherMetrics(),
        sink=MemorySink(),
    )

    async def main() -> int:
        runner, port = await start_callback_server(handler, "127.0.0.1", 0)
        await runner.cleanup()
        return port

    assert asyncio.run(main()) > 0
