"""Bench: signed POSTs per second through the full sender (address policy + signing + bounded
read) against a local aiohttp target running in a subprocess (its own CPU), at concurrency 64.
``--client`` picks the sender: ``lean`` (the dispatcher's default,
:class:`~horae.outbound.lean_http.LeanHttpSender`) or ``aiohttp``.

For scale, the same run measures raw aiohttp (one session, pre-built headers, no policy, no
signing) against the same target, alternating short windows of each (the machine's load drifts;
alternating keeps the comparison fair) and reporting medians. Client CPU time per POST is
reported too: on a shared machine it moves less than POSTs/s. The last line printed is JSON:
``{"posts_per_s": ..., "concurrency": 64, "raw_aiohttp_posts_per_s": ..., ...}``.

    .venv/bin/python bench/dispatch_http.py [--seconds 10] [--rounds 5] [--concurrency 64]
        [--loop uvloop|asyncio] [--client lean|aiohttp]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable

import aiohttp
from aiohttp import web

from horae.outbound import (
    AddressPolicy,
    SenderConfig,
    SendResult,
    SigningKeys,
    attempt_headers,
)
from horae.streams.dispatcher.worker import loop_factory, make_sender

SECRET = "whsec_" + base64.b64encode(b"bench-secret-0123456789").decode()
BODY = json.dumps({"tenant": "t", "trigger": "bench", "scheduled_at": "2025-01-01T00:00:00Z"})


def serve() -> None:
    """Target process: answer every POST with 200 after reading the body; print the port; stop
    when stdin closes."""

    async def handle(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(text="ok")

    async def run() -> None:
        app = web.Application()
        app.router.add_post("/hook", handle)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0, backlog=1024).start()
        print(runner.addresses[0][1], flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)  # until EOF
        await runner.cleanup()

    asyncio.run(run())


class Driver:
    """``concurrency`` workers calling ``op`` in a loop; counts completions while measuring."""

    def __init__(self, op: Callable[[int], Awaitable[bool]], concurrency: int) -> None:
        self.op, self.concurrency = op, concurrency
        self.done = 0
        self.measuring = self.stopping = False

    async def _worker(self) -> None:
        n = 0
        while not self.stopping:
            n += 1
            if not await self.op(n):
                raise RuntimeError("a bench request failed")
            if self.measuring:
                self.done += 1

    async def window(self, seconds: float) -> tuple[float, float]:
        """Warm up for 0.5 s, then measure ``seconds``: (POSTs/s, client CPU µs per POST)."""
        tasks = [asyncio.create_task(self._worker()) for _ in range(self.concurrency)]
        await asyncio.sleep(0.5)
        self.measuring, wall, cpu = True, time.perf_counter(), time.process_time()
        await asyncio.sleep(seconds)
        self.measuring = False
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        self.stopping = True
        await asyncio.gather(*tasks)
        return self.done / wall, cpu / max(self.done, 1) * 1e6


async def bench(
    port: int, concurrency: int, seconds: float, rounds: int, client: str
) -> dict[str, float]:
    """``rounds`` alternations of a raw window and a full-sender window; medians of each."""
    url = f"http://127.0.0.1:{port}/hook"
    body = BODY.encode()
    keys = SigningKeys.from_secrets(SECRET)
    fixed = attempt_headers(body=body, fire_key="k", keys=keys, now=time.time())
    policy = AddressPolicy(allow=["127.0.0.1/32"])
    config = SenderConfig(pool_size=concurrency, pool_per_host=concurrency)
    connector = aiohttp.TCPConnector(limit=concurrency)
    sender = make_sender(client, policy, config, time.time)
    await sender.start()
    async with aiohttp.ClientSession(connector=connector) as session:

        async def raw(n: int) -> bool:
            async with session.post(url, data=body, headers=fixed) as resp:
                await resp.read()
                return resp.status == 200

        async def full(n: int) -> bool:
            headers = attempt_headers(
                body=body, fire_key=f"t/bench/{n}", keys=keys, now=time.time()
            )
            result = await sender.send(url, body, headers)
            return result.send_result is SendResult.OK

        raw_runs, full_runs = [], []
        for _ in range(rounds):
            raw_runs.append(await Driver(raw, concurrency).window(seconds / rounds))
            full_runs.append(await Driver(full, concurrency).window(seconds / rounds))
    await sender.close()

    rate = statistics.median(r for r, _ in full_runs)
    raw_rate = statistics.median(r for r, _ in raw_runs)
    return {
        "posts_per_s": round(rate),
        "concurrency": concurrency,
        "raw_aiohttp_posts_per_s": round(raw_rate),
        "ratio_to_raw": round(rate / raw_rate, 3),
        "client_cpu_us_per_post": round(statistics.median(c for _, c in full_runs)),
        "raw_client_cpu_us_per_post": round(statistics.median(c for _, c in raw_runs)),
        "cpus": os.cpu_count() or 0,
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="signed POSTs/s through horae.outbound")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--seconds", type=float, default=10.0, help="measured, per variant")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument(
        "--loop", choices=("uvloop", "asyncio"), default="uvloop", help="the client's event loop"
    )
    parser.add_argument("--client", choices=("lean", "aiohttp"), default="lean", help="sender")
    args = parser.parse_args()
    if args.serve:
        serve()
        return
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        with asyncio.Runner(loop_factory=loop_factory(args.loop)) as runner:
            result = runner.run(
                bench(port, args.concurrency, args.seconds, args.rounds, args.client)
            )
        result["loop"] = args.loop
        result["client"] = args.client
    finally:
        if server.stdin is not None:
            server.stdin.close()
        server.wait(timeout=30)
    print(
        f"full sender: {result['posts_per_s']} POST/s ({result['client_cpu_us_per_post']} µs CPU"
        f" each); raw aiohttp: {result['raw_aiohttp_posts_per_s']} POST/s"
        f" ({result['raw_client_cpu_us_per_post']} µs CPU each); load {result['load_avg_1m']}"
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
