"""The one receiver of bench/compare.py: every system's delivered call ends here.

    python bench/receiver.py [--port 18471]     # prints its port; stops when stdin closes

A local keep-alive HTTP/1.1 server (aiohttp). ``POST /hook`` is the counted event: the call must
carry a valid Standard Webhooks signature (``webhook-id``, ``webhook-timestamp``,
``webhook-signature: v1,<base64 HMAC-SHA256(key, id.timestamp.body)>`` with the bench secret
``SECRET``, the one Horae's dispatcher signs with and the peers' handlers sign with), else it is
answered 401 and not counted. Each call's key is its ``Idempotency-Key`` header (Horae: the fire
key; a peer: ``<system>:<task id>``); the first receipt of each key is kept with the call's due
instant, read from the body: Horae's envelope's ``data.due_at``, a peer's ``due_ms``. ``POST
/warm`` checks the signature the same way and counts nothing (the peers' warm-up burst).

``GET /stats?shift_ms=S`` sums up (``S`` is added to each receipt: Horae's virtual clock runs
ahead of the wall clock): ``distinct`` keys, ``posts``, ``refused`` (bad signatures),
``lateness_ms`` quantiles 0..100 (receipt + S - due), ``first_ms`` (the first delivery's: a
burst's earliest receipt), ``p50_ms``/``p99_ms``/``max_ms`` and
``span_s`` (from the earliest due instant to the last receipt). ``POST /reset`` forgets
everything (one receiver serves every run of a comparison).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import hmac
import json
import sys
import time
import urllib.request
from datetime import datetime
from typing import Any

from aiohttp import web

SECRET = "whsec_" + base64.b64encode(b"bench-secret-0123456789").decode()  # bench/dispatch.py's
PORT = 18471  # bench/peers/horae_peer.py's definitions name it


def secret_key(secret: str = SECRET) -> bytes:
    return base64.b64decode(secret.removeprefix("whsec_"))


def sign(key: bytes, msg_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` value of a call (Standard Webhooks, ``v1``)."""
    mac = hmac.new(key, f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode()


def verified(key: bytes, headers: Any, body: bytes) -> bool:
    msg_id, ts = headers.get("webhook-id"), headers.get("webhook-timestamp")
    if not msg_id or not ts:
        return False
    expected = sign(key, msg_id, int(ts), body)
    return any(
        hmac.compare_digest(expected, s) for s in headers.get("webhook-signature", "").split()
    )


def due_ms(body: bytes) -> float:
    """The due instant of a call: Horae's envelope's ``data.due_at``, else the body's ``due_ms``."""
    doc = json.loads(body)
    data = doc.get("data")
    if isinstance(data, dict) and "due_at" in data:
        return datetime.fromisoformat(data["due_at"]).timestamp() * 1000
    return float(doc["due_ms"])


class Receipts:
    """The receiver's state: first receipt and due instant per key, counts."""

    def __init__(self, key: bytes) -> None:
        self.key = key
        self.reset()

    def reset(self) -> None:
        self.first: dict[str, tuple[float, float]] = {}
        self.posts = 0
        self.refused = 0

    def take(self, headers: Any, body: bytes, counted: bool) -> int:
        """The status to answer a call with, recording it when ``counted``."""
        now = time.time()
        if not verified(self.key, headers, body):
            self.refused += 1
            return 401
        if counted:
            self.posts += 1
            key = headers.get("Idempotency-Key", "")
            if key not in self.first:
                self.first[key] = (now, due_ms(body))
        return 200

    def stats(self, shift_ms: float = 0.0) -> dict[str, Any]:
        rows = list(self.first.values())
        late = sorted(max(0.0, t * 1000 + shift_ms - due) for t, due in rows)
        out: dict[str, Any] = {
            "distinct": len(rows),
            "posts": self.posts,
            "refused": self.refused,
        }
        if late:
            last = max(t for t, _ in rows) * 1000 + shift_ms
            first_due = min(due for _, due in rows)
            out["span_s"] = round(max(0.001, (last - first_due) / 1000), 3)

            def q(p: float) -> int:
                return round(late[min(len(late) - 1, int(p * (len(late) - 1)))])

            out["first_ms"] = round(late[0])
            out["p50_ms"], out["p99_ms"], out["max_ms"] = q(0.5), q(0.99), round(late[-1])
            out["lateness_ms"] = [q(p / 100) for p in range(101)]
        return out


def app(receipts: Receipts) -> web.Application:
    async def hook(request: web.Request) -> web.Response:
        status = receipts.take(request.headers, await request.read(), True)
        return web.Response(status=status, text="ok" if status == 200 else "bad signature")

    async def warm(request: web.Request) -> web.Response:
        status = receipts.take(request.headers, await request.read(), False)
        return web.Response(status=status)

    async def stats(request: web.Request) -> web.Response:
        return web.json_response(receipts.stats(float(request.query.get("shift_ms", "0"))))

    async def reset(request: web.Request) -> web.Response:
        receipts.reset()
        return web.json_response({"reset": True})

    application = web.Application()
    application.router.add_post("/hook", hook)
    application.router.add_post("/warm", warm)
    application.router.add_get("/stats", stats)
    application.router.add_post("/reset", reset)
    return application


async def serve(port: int, stopped: asyncio.Future[None] | None = None) -> None:
    """Serve until stdin closes (or ``stopped`` is done), printing the port first."""
    runner = web.AppRunner(app(Receipts(secret_key())), access_log=None, keepalive_timeout=600)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port, backlog=4096).start()
    print(runner.addresses[0][1], flush=True)
    if stopped is None:
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    else:
        await stopped
    await runner.cleanup()


def call(port: int, path: str, method: str = "GET") -> dict[str, Any]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method)
    with urllib.request.urlopen(request, timeout=60) as r:
        out: dict[str, Any] = json.loads(r.read())
        return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=PORT)
    asyncio.run(serve(parser.parse_args().port))


if __name__ == "__main__":
    main()
