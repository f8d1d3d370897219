"""Bench: the HTTP API's history and list pages on big read models, and creates per second.

1. seed — a fresh PostgreSQL schema (the projector's own store and batch code) with one trigger
   of ``--instants`` fires (100,000: one a minute) and a tenant with ``--triggers`` triggers
   (100,000), from :mod:`horae.projections.synthetic`;
2. pages — ``horae api`` (``--workers`` processes) in a subprocess on a free port, as in
   production (``horae migrate``'s roles, a Kafka prefix thrown away), one client walking: the
   trigger's history 100 fires a page by cursor, the same from random windows, the tenant's
   trigger list 100 a page; p50/p99 of each (ms, client-side, HTTP on loopback);
3. creates — ``--creates`` event-target triggers created with ``--concurrency`` requests in flight
   (validation, platform signature, Kafka acknowledgement each);
4. the creates ceiling, in the same run: the same number of creates without the web stack (no
   HTTP, FastAPI, auth, validation or reads) — for each, the version claim (the API's one write
   statement: :meth:`PostgresState.claim`, the ``INSERT ... ON CONFLICT`` into the state schema,
   as the API role, on a thread as the service runs it) and the Kafka produce of the signed
   definition until acknowledged (:meth:`KafkaSink.put_definition`), the definitions signed
   beforehand; ``--workers`` processes (one started per API process), ``--concurrency`` in
   flight in all (``ceiling_creates_per_s``; ``ratio_ceiling`` = creates/s over it, goal >= 0.5).
   What it leaves out, besides the web stack: the create's two reads (the read model's row and
   the recent writes) and the confirm ``UPDATE`` after the acknowledgement.

Goals: p99 of a page <= 50 ms (issue 13); creates/s >= 0.5 of the ceiling, and >= 500/s with
``--workers 2`` (issue 27). Needs Kafka and PostgreSQL (HORAE_KAFKA_BOOTSTRAP /
HORAE_DATABASE_URL, else the local stack). The last line printed is JSON:
``{"history_p99_ms": ..., "list_p99_ms": ..., "creates_per_s": ..., "ceiling_creates_per_s": ...,
"ratio_ceiling": ..., "calibration_s": ..., ...}``.

    .venv/bin/python bench/api.py [--instants 100000] [--triggers 100000] [--creates 2000]
        [--workers 1] [--schema NAME]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import random
import secrets
import socket
import statistics
import subprocess
import sys
import time
import uuid
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp
import httpx
import psycopg
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from machine import calibrate

from horae.api.adapters import KafkaSink
from horae.api.auth import issue
from horae.api.ports import StoredTrigger
from horae.api.service import CLAIM_TTL_S
from horae.api.state import PostgresState, state_schema
from horae.cli.projections import database_urls, migrate_live
from horae.contracts import events as ev
from horae.contracts import signing
from horae.contracts.codec import default_codec
from horae.contracts.routing import Router
from horae.contracts.topics import Topic, topic_name
from horae.kafka.config import client_config
from horae.projections.rows import PROJECTED, Batch, RecordMapper
from horae.projections.schema import analyze
from horae.projections.store import ProjectionStore
from horae.projections.synthetic import START, attempt, definition, fire, outcome
from horae.settings import Settings, get_settings

TENANT, BIG = "bench", "big"
PREFIX = "bench-api."


def services() -> tuple[str, str]:
    from horae.devstack.stack import LocalStack

    endpoints = LocalStack.from_settings(get_settings()).endpoints
    return endpoints.kafka_bootstrap, endpoints.database_url


def seed(database_url: str, schema: str, instants: int, triggers: int) -> None:
    router = Router(PREFIX)
    mapper = RecordMapper(default_codec(), {topic_name(t, PREFIX): t for t in PROJECTED})
    names = {s: topic_name(t, PREFIX) for t, (_, s) in PROJECTED.items()}
    store = ProjectionStore(database_url, schema)
    offsets: dict[str, int] = {}

    def flush(outs: list[Any]) -> None:
        batch = Batch()
        for o in outs:
            offsets[o.topic] = offsets.get(o.topic, -1) + 1
            mapper.add(batch, o.topic, 0, offsets[o.topic], o.key, o.value, 0)
        store.apply(batch, names)

    try:
        outs: list[Any] = [router.emit(definition(TENANT, BIG), 0)]
        for i in range(instants):
            f = fire(TENANT, BIG, START + timedelta(minutes=i))
            a = attempt(f, 1, timedelta(milliseconds=random.randint(5, 500)))
            outs += [router.emit(f, 0), router.emit(a, 0), router.emit(outcome(f, [a]), 0)]
            if len(outs) >= 30_000:
                flush(outs)
                outs = []
        for k in range(triggers):
            outs.append(router.emit(definition(TENANT, f"t{k:06d}"), 0))
            if len(outs) >= 30_000:
                flush(outs)
                outs = []
        flush(outs)
    finally:
        store.close()
    # a live read model has statistics (autovacuum, or the rebuild's ANALYZE); a bulk seed not yet
    with psycopg.connect(database_url, autocommit=True) as conn:
        analyze(conn, schema)


def _exists(database_url: str, schema: str) -> bool:
    with psycopg.connect(database_url) as conn:
        found = conn.execute(
            "SELECT 1 FROM information_schema.tables WHERE table_schema = %s AND table_name = %s",
            (schema, "triggers"),
        ).fetchone()
    return found is not None


def serve(settings: Settings, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """``horae api`` in a subprocess (``env``: its settings), once it answers ``/readyz``."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "horae.cli.main", "api"], env={**os.environ, **env}
    )
    url = f"http://127.0.0.1:{settings.api.port}/readyz"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"horae api exited {proc.returncode}")
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(url, timeout=2).status_code == 200:
                return proc
        time.sleep(0.2)
    proc.terminate()
    raise SystemExit("horae api did not become ready within 60 s")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def quantiles(samples: list[float]) -> dict[str, float]:
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return {"p50_ms": round(cuts[49] * 1000, 2), "p99_ms": round(cuts[98] * 1000, 2)}


def walk(client: httpx.Client, path: str, pages: int) -> list[float]:
    took: list[float] = []
    cursor: str | None = None
    for _ in range(pages):
        url = path + (f"&cursor={cursor}" if cursor else "")
        started = time.perf_counter()
        r = client.get(url)
        took.append(time.perf_counter() - started)
        assert r.status_code == 200, r.text
        cursor = r.json()["next_cursor"]  # None: start again from the first page
    return took


def timed(client: httpx.Client, path: str, times: int) -> list[float]:
    took: list[float] = []
    for _ in range(times):
        started = time.perf_counter()
        r = client.get(path)
        took.append(time.perf_counter() - started)
        assert r.status_code == 200, r.text
    return took


async def creates(url: str, headers: dict[str, str], n: int, concurrency: int) -> float:
    limit = asyncio.Semaphore(concurrency)
    run = uuid.uuid4().hex[:6]

    async def one(session: aiohttp.ClientSession, i: int) -> None:
        body = {
            "trigger_id": f"c{run}-{i}",
            "recurrence": {"kind": "cron", "expr": "0 * * * *"},
            "target": {"kind": "event", "topic": f"events.{TENANT}"},
        }
        async with limit, session.post(f"{url}/v1/schedules", json=body) as r:
            text = await r.text()
            assert r.status == 201, text

    connector = aiohttp.TCPConnector(limit=concurrency)
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(headers=headers, connector=connector, timeout=timeout) as s:
        await one(s, -1)  # warm-up
        started = time.perf_counter()
        await asyncio.gather(*(one(s, i) for i in range(n)))
        return n / (time.perf_counter() - started)


def ceiling_process(
    bootstrap: str,
    prefix: str,
    api_url: str,
    schema: str,
    key: tuple[str, bytes],
    name: str,
    n: int,
    concurrency: int,
    barrier: Any,
    results: Any,
) -> None:
    """One ceiling process (see the module docstring): ``n`` creates, ``concurrency`` in flight,
    started with the others at ``barrier``; puts (first start, its end) wall times on
    ``results``."""
    sink = KafkaSink(bootstrap, prefix)
    state = PostgresState(api_url, state_schema(schema))
    now = datetime.now(UTC).replace(microsecond=0)
    todo: list[tuple[ev.TriggerDefinition, StoredTrigger]] = []
    for i in range(n + 1):  # the first: the warm-up
        d = ev.TriggerDefinition(
            tenant=TENANT,
            trigger_id=f"{name}-{i}",
            version=1,
            state=ev.DefinitionState.LIVE,
            recurrence=ev.Recurrence(kind=ev.RecurrenceKind.CRON, expr="0 * * * *"),
            target=ev.Target(kind=ev.TargetKind.EVENT, topic=f"events.{TENANT}"),
            authored_at=now,
            author="bench",
            role=ev.Role.AUTHOR,
        )
        signed = signing.sign(d, key[0], key[1])
        todo.append((signed, StoredTrigger(signed, now, now)))

    async def one(limit: asyncio.Semaphore, d: ev.TriggerDefinition, s: StoredTrigger) -> None:
        async with limit:
            at = datetime.now(UTC)
            until = at + timedelta(seconds=CLAIM_TTL_S)
            if not await asyncio.to_thread(state.claim, s, at, until):
                raise RuntimeError(f"claim of {d.trigger_id} refused")
            await sink.put_definition(d)

    async def run() -> tuple[float, float]:
        limit = asyncio.Semaphore(concurrency)
        await one(limit, *todo[0])
        await asyncio.to_thread(barrier.wait)
        started = time.time()
        await asyncio.gather(*(one(limit, d, s) for d, s in todo[1:]))
        return started, time.time()

    try:
        results.put(asyncio.run(run()))
    finally:
        sink.close()
        state.close()


def creates_ceiling(
    bootstrap: str,
    prefix: str,
    api_url: str,
    schema: str,
    key: tuple[str, bytes],
    n: int,
    concurrency: int,
    procs: int,
) -> dict[str, float]:
    """The creates ceiling: ``procs`` processes of :func:`ceiling_process`, ``n`` creates and
    ``concurrency`` in flight in all; creates/s from the common start to the last end."""
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(procs), ctx.Queue()
    run = uuid.uuid4().hex[:6]
    workers = [
        ctx.Process(
            target=ceiling_process,
            args=(
                bootstrap,
                prefix,
                api_url,
                schema,
                key,
                f"k{run}{w}",
                n // procs,
                max(1, concurrency // procs),
                barrier,
                results,
            ),
        )
        for w in range(procs)
    ]
    for w in workers:
        w.start()
    spans = [results.get(timeout=600) for _ in workers]
    for w in workers:
        w.join(60)
    took = max(end for _, end in spans) - min(start for start, _ in spans)
    done = n // procs * procs
    return {"ceiling_creates_per_s": round(done / took, 1), "ceiling_procs": procs}


def client(args: argparse.Namespace, url: str, headers: dict[str, str]) -> dict[str, Any]:
    """The user's side, in its own process (never sharing the server's interpreter): the page
    walks one request at a time (latency), then the creates ``--concurrency`` at once."""
    end = (START + timedelta(minutes=args.instants)).isoformat().replace("+00:00", "Z")
    begin = START.isoformat().replace("+00:00", "Z")
    with httpx.Client(base_url=url, headers=headers, timeout=30) as c:
        walk(c, f"/v1/schedules/{BIG}/history?from={begin}&to={end}&limit=100", 5)
        walk(c, "/v1/schedules?limit=100", 5)
        history_pages = walk(
            c, f"/v1/schedules/{BIG}/history?from={begin}&to={end}&limit=100", args.pages
        )
        windows: list[float] = []
        for _ in range(args.pages):
            at = START + timedelta(minutes=random.randrange(args.instants))
            since = at.isoformat().replace("+00:00", "Z")
            windows += walk(c, f"/v1/schedules/{BIG}/history?from={since}&to={end}&limit=100", 1)
        list_pages = walk(c, "/v1/schedules?limit=100", args.pages)
        gets = timed(c, f"/v1/schedules/{BIG}", args.pages)
    rate = asyncio.run(creates(url, headers, args.creates, args.concurrency))
    return {"history": history_pages, "windows": windows, "list": list_pages, "gets": gets,
            "rate": rate}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instants", type=int, default=100_000)
    parser.add_argument("--triggers", type=int, default=100_000)
    parser.add_argument("--pages", type=int, default=300)
    parser.add_argument("--creates", type=int, default=2_000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--workers", type=int, default=1, help="API processes (api.workers)")
    parser.add_argument(
        "--schema",
        help="seed this schema once and keep it (reruns reuse it: sizes must match); "
        "default: a fresh schema, dropped at the end",
    )
    args = parser.parse_args()
    calibration = calibrate()
    print(f"calibration: a 10M-iteration CPython loop takes {calibration} s", flush=True)
    bootstrap, database_url = services()
    schema = args.schema or f"bench_api_{uuid.uuid4().hex[:8]}"
    prefix = f"{PREFIX}{uuid.uuid4().hex[:6]}."
    admin = AdminClient(client_config(bootstrap))
    topic = topic_name(Topic.DEFINITIONS, prefix)
    for f in admin.create_topics([NewTopic(topic, 6, 1)], request_timeout=30).values():
        f.result(timeout=30)
    port = free_port()
    token_key = secrets.token_hex(32)
    tenant_keys = {TENANT: {"bench-1": secrets.token_hex(16)}}
    platform_key = secrets.token_hex(16)
    env = {
        "HORAE_KAFKA_BOOTSTRAP": bootstrap,
        "HORAE_DATABASE_URL": database_url,
        "HORAE_TOPIC_PREFIX": prefix,
        "HORAE_PROJECTION_SCHEMA": schema,
        "HORAE_TENANT_KEYS": json.dumps(tenant_keys),
        "HORAE_PLATFORM_KEY": platform_key,
        "HORAE_API_TOKEN_KEYS": json.dumps({"b": token_key}),
        "HORAE_API_PORT": str(port),
        "HORAE_API_RATE_PER_S": "1e9",
        "HORAE_API_BURST": str(10**9),
        "HORAE_API_WORKERS": str(args.workers),
        "HORAE_LOG_LEVEL": "WARNING",
    }
    settings = Settings.model_validate(
        {
            "tenant_keys": tenant_keys,
            "platform_key": platform_key,
            "projection_schema": schema,
            "api": {
                "token_keys": {"b": token_key},
                "port": port,
                "rate_per_s": 1e9,
                "burst": 10**9,
                "workers": args.workers,
            },
        }
    )
    server: subprocess.Popen[bytes] | None = None
    try:
        started = time.perf_counter()
        if not (args.schema and _exists(database_url, schema)):
            seed(database_url, schema, args.instants, args.triggers)
        migrate_live(settings, database_url)  # the API role's grants and its state schema
        seed_s = time.perf_counter() - started
        server = serve(settings, env)
        token = issue(
            {"b": token_key},
            "b",
            tenant=TENANT,
            roles=[ev.Role.AUTHOR],
            subject="bench",
            ttl_s=3600,
        )
        headers = {"Authorization": f"Bearer {token}"}
        url = f"http://127.0.0.1:{port}"
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
            got = pool.submit(client, args, url, headers).result()
        rate = got["rate"]
        history_pages, windows, list_pages, gets = (
            got[k] for k in ("history", "windows", "list", "gets")
        )
        h, w, lp, g = (quantiles(x) for x in (history_pages, windows, list_pages, gets))
        print(f"seeded {args.instants} fires + {args.triggers} triggers in {seed_s:.1f} s")
        print(f"history page (cursor walk): {h}; from a random window: {w}")
        print(f"trigger list page: {lp}; one trigger: {g}; creates: {rate:.0f}/s", flush=True)
        api_url = database_urls(settings, database_url).api
        key = (settings.platform_key_id, platform_key.encode())
        top = creates_ceiling(
            bootstrap, prefix, api_url, schema, key, args.creates, args.concurrency, args.workers
        )
        ratio = round(rate / top["ceiling_creates_per_s"], 3)
        print(
            f"creates ceiling (the claim statement + the Kafka produce, no web stack, "
            f"{args.workers} process(es)): {top['ceiling_creates_per_s']:.0f}/s",
            flush=True,
        )
        print(
            f"goal creates/s over the ceiling >= 0.5: {ratio} "
            f"({'met' if ratio >= 0.5 else 'MISSED'})"
        )
        if args.workers == 2:
            print(f"goal creates/s with --workers 2 >= 500: {rate:.0f} "
                  f"({'met' if rate >= 500 else 'MISSED'})")  # fmt: skip
        print(
            json.dumps(
                {
                    "history_p99_ms": max(h["p99_ms"], w["p99_ms"]),
                    "history_p50_ms": h["p50_ms"],
                    "list_p99_ms": lp["p99_ms"],
                    "get_p99_ms": g["p99_ms"],
                    "creates_per_s": round(rate, 1),
                    **top,
                    "ratio_ceiling": ratio,
                    "workers": args.workers,
                    "instants": args.instants,
                    "triggers": args.triggers,
                    "cores": os.cpu_count() or 0,
                    "load_avg_1m": round(os.getloadavg()[0], 2),
                    "calibration_s": calibration,
                }
            )
        )
    finally:
        if server is not None:
            server.terminate()  # uvicorn's graceful shutdown of every worker
            server.wait(60)
        for f in admin.delete_topics([topic], request_timeout=30).values():
            with contextlib.suppress(Exception):
                f.result(timeout=30)
        if not args.schema:
            with psycopg.connect(database_url, autocommit=True) as conn:
                for name in (schema, state_schema(schema)):  # the state: migrate_live's
                    conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


if __name__ == "__main__":
    main()
