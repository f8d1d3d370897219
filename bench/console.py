"""Bench: the console's pages on big read models (page load, server-rendered HTML, p50/p99).

1. seed — the read models of ``bench/api.py`` (the projector's own store and batch code): one
   trigger with ``--instants`` fires (100,000, one a minute) in a tenant of ``--triggers``
   triggers (100,000);
2. ``horae api`` in a subprocess on a free port (the console is part of it), a client signed in
   through the login form, one request at a time: the schedules page walked by its "Next page"
   link (50 rows, the API's keyset pages), the page's last-runs fragment, a schedule's page (its
   definition, next 10 instants, audit), the big trigger's history walked 100 instants a page
   and from random windows, the history's lateness fragment over all its instants (loaded after
   the page); p50/p99 of each (ms, client-side, HTTP on loopback).

Goal (issue 28): p99 of a page load <= 300 ms for the schedules page of a tenant with 100,000
triggers and the history of a trigger with 100,000 instants. The last line printed is JSON:
``{"schedules_p99_ms": ..., "history_p99_ms": ..., ...}``.

    .venv/bin/python bench/console.py [--instants 100000] [--triggers 100000] [--pages 200]
        [--schema NAME]
"""

from __future__ import annotations

import argparse
import contextlib
import html
import json
import random
import re
import secrets
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path

import httpx
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))

from api import BIG, PREFIX, TENANT, _exists, free_port, quantiles, seed, serve, services

from horae.api.auth import issue
from horae.cli.projections import migrate_live
from horae.contracts import events as ev
from horae.projections.synthetic import START
from horae.settings import Settings

NEXT = re.compile(r'<a href="([^"]+)" rel="next">')
LAST_RUNS = re.compile(r'hx-get="(/console/last-runs[^"]+)"')


def sign_in(c: httpx.Client, token: str) -> None:
    page = c.get("/console/login")
    nonce = re.search(r'name="nonce" value="([^"]+)"', page.text)
    assert nonce is not None, page.text
    done = c.post("/console/login", data={"nonce": nonce[1], "token": token})
    assert done.status_code == 200 and "Schedules" in done.text, done.text[:500]


def load(c: httpx.Client, path: str) -> tuple[float, str]:
    started = time.perf_counter()
    r = c.get(path)
    took = time.perf_counter() - started
    assert r.status_code == 200, (path, r.status_code, r.text[:500])
    return took, r.text


def walk(c: httpx.Client, first: str, pages: int, base: str = "") -> list[float]:
    """``pages`` loads following each page's "Next page" link (from ``first`` again at the end)."""
    took: list[float] = []
    path = first
    for _ in range(pages):
        t, text = load(c, path)
        took.append(t)
        found = NEXT.search(text)
        path = base + html.unescape(found[1]) if found else first
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instants", type=int, default=100_000)
    parser.add_argument("--triggers", type=int, default=100_000)
    parser.add_argument("--pages", type=int, default=200)
    parser.add_argument(
        "--schema",
        help="seed this schema once and keep it (reruns reuse it: sizes must match); "
        "default: a fresh schema, dropped at the end",
    )
    args = parser.parse_args()
    _, database_url = services()
    bootstrap, _ = services()
    schema = args.schema or f"bench_console_{uuid.uuid4().hex[:8]}"
    prefix = f"{PREFIX}{uuid.uuid4().hex[:6]}."
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
            },
        }
    )
    server = None
    try:
        started = time.perf_counter()
        if not (args.schema and _exists(database_url, schema)):
            seed(database_url, schema, args.instants, args.triggers)
        migrate_live(settings, database_url)
        seed_s = time.perf_counter() - started
        server = serve(settings, env)
        token = issue({"b": token_key}, "b", tenant=TENANT, roles=[ev.Role.AUTHOR],
                      subject="bench", ttl_s=3600)  # fmt: skip
        begin = START.isoformat().replace("+00:00", "Z")
        end = (START + timedelta(minutes=args.instants)).isoformat().replace("+00:00", "Z")
        history = f"/console/schedules/{BIG}/history?from={begin}&to={end}"
        with httpx.Client(
            base_url=f"http://127.0.0.1:{port}", timeout=60, follow_redirects=True
        ) as c:
            sign_in(c, token)
            walk(c, "/console/schedules", 5)  # warm-up
            walk(c, history, 5, f"/console/schedules/{BIG}/history")
            schedules = walk(c, "/console/schedules", args.pages)
            _, page = load(c, "/console/schedules")
            found = LAST_RUNS.search(page)
            assert found is not None
            fragment = html.unescape(found[1])
            last_runs = [load(c, fragment)[0] for _ in range(max(10, args.pages // 10))]
            summary = f"/console/schedules/{BIG}/lateness-summary?from={begin}&to={end}"
            lateness = [load(c, summary)[0] for _ in range(max(10, args.pages // 10))]
            detail = [load(c, f"/console/schedules/{BIG}")[0] for _ in range(args.pages // 2)]
            history_pages = walk(c, history, args.pages, f"/console/schedules/{BIG}/history")
            windows = []
            for _ in range(args.pages):
                at = START + timedelta(minutes=random.randrange(args.instants))
                since = at.isoformat().replace("+00:00", "Z")
                windows.append(
                    load(c, f"/console/schedules/{BIG}/history?from={since}&to={end}")[0]
                )
        s, lr, d, h, w, la = (
            quantiles(x) for x in (schedules, last_runs, detail, history_pages, windows, lateness)
        )
        print(f"seeded {args.instants} fires + {args.triggers} triggers in {seed_s:.1f} s")
        print(f"schedules page (walked by Next page): {s}; its last-runs fragment: {lr}")
        print(f"a schedule's page: {d}")
        print(f"history page (walked): {h}; from a random window: {w}")
        print(f"the history's lateness fragment (all {args.instants} instants): {la}")
        print(
            json.dumps(
                {
                    "schedules_p99_ms": s["p99_ms"],
                    "schedules_p50_ms": s["p50_ms"],
                    "last_runs_p99_ms": lr["p99_ms"],
                    "schedule_p99_ms": d["p99_ms"],
                    "history_p99_ms": max(h["p99_ms"], w["p99_ms"]),
                    "history_p50_ms": h["p50_ms"],
                    "history_lateness_p99_ms": la["p99_ms"],
                    "instants": args.instants,
                    "triggers": args.triggers,
                }
            )
        )
    finally:
        if server is not None:
            server.terminate()
            server.wait(60)
        if not args.schema:
            with (
                contextlib.suppress(Exception),
                psycopg.connect(database_url, autocommit=True) as conn,
            ):
                for name in (schema, f"{schema}_api"):  # the read models, the API's state
                    conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


if __name__ == "__main__":
    main()
