"""Bench: the tenant-wide fire search (``GET /v1/fires``, issue 29 item 4) on a large fires table.

1. load — a fresh read-model schema (``horae migrate``'s migrations), its fires table filled in
   PostgreSQL itself (``generate_series``) with ``--fires`` rows, the way the projector leaves
   them: 10 tenants, half of the rows the largest tenant's (``t0``), 1,000 triggers each, their
   label ``team`` one of 20 values, instants over 90 days; states 96 % succeeded, 2 % failed,
   1 % exhausted, 0.5 % skipped, 0.5 % fired and not yet attempted. The fires indexes are dropped
   for the load and built again afterwards (the same definitions), then ``ANALYZE``;
2. search — through :class:`~horae.api.adapters.PostgresHistory` (the API's adapter, the reader's
   pool), ``--queries`` calls of each case on ``t0`` at random windows, a page of 100 each
   (the API's default): the tenant's fires of a week; ``state=failed`` over a week;
   ``state=failed,exhausted`` over 30 days; ``label=team:x`` over a week; that label with
   ``state=failed`` over 30 days; the next page after a cursor. p50, p99 and max per case.

Goal: p99 <= 50 ms per case on 10M fire rows. Needs PostgreSQL (``HORAE_DATABASE_URL``, else the
local stack); the schema is dropped at the end (``--keep`` keeps it). The last line printed is
JSON: ``{"fires": ..., "p99_ms": <worst case>, "cases": {...}, ...}``.

    .venv/bin/python bench/fire_search.py [--fires 10000000] [--queries 200] [--seed 7]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from psycopg import sql as pgsql

from horae.api.adapters import PostgresHistory
from horae.api.ports import Page
from horae.projections import schema as pschema
from horae.settings import get_settings

START = datetime(2026, 1, 1, tzinfo=UTC)
DAYS = 90
TENANTS = 10
TRIGGERS = 1000
TEAMS = 20
PAGE = 100

#: the fires indexes, dropped for the load and built again (their definitions read back first)
INDEXES = """SELECT indexname, indexdef FROM pg_indexes
WHERE schemaname = %s AND tablename = 'fires' AND indexname <> 'fires_pkey'"""

#: rows as the projector writes them: a decision, then (most) an attempt and an outcome
LOAD = """
INSERT INTO fires (fire_key, key_hash, tenant, trigger_id, origin, scheduled_at, sequence,
    jitter_ms, due_at, decided_at, state, trigger_version, tzdata_version, target_kind, lane,
    cause, attempt_count, first_attempt_at, last_attempt_at, outcome, outcome_at, outcome_source)
SELECT 'v1/' || tenant || '/' || trigger_id || '/' || g, md5(g::text), tenant, trigger_id,
    'scheduled', at, 0, 0, at, at + interval '40 ms',
    CASE WHEN roll < 0.005 THEN 'skipped' ELSE 'fired' END, 1, '2026a', 'webhook',
    CASE WHEN roll < 0.005 THEN NULL ELSE 'on_time' END,
    CASE WHEN roll < 0.005 THEN 'skipped: misfire policy' END,
    CASE WHEN roll < 0.01 THEN 0 ELSE 1 END,
    CASE WHEN roll < 0.01 THEN NULL ELSE at + interval '20 ms' END,
    CASE WHEN roll < 0.01 THEN NULL ELSE at + interval '20 ms' END,
    CASE WHEN roll < 0.01 THEN NULL WHEN roll < 0.02 THEN 'exhausted'
        WHEN roll < 0.04 THEN 'failed' ELSE 'succeeded' END,
    CASE WHEN roll < 0.01 THEN NULL ELSE at + interval '150 ms' END,
    CASE WHEN roll < 0.01 THEN NULL ELSE 'dispatcher' END
FROM (
    SELECT g,
        CASE WHEN h < 0.5 THEN 't0' ELSE 't' || (1 + (g %% (%(tenants)s - 1))) END AS tenant,
        'trigger-' || (g %% %(triggers)s) AS trigger_id,
        %(start)s::timestamptz + (random() * %(days)s) * interval '1 day' AS at,
        random() AS roll
    FROM (SELECT g, random() AS h FROM generate_series(%(lo)s, %(hi)s - 1) AS g) AS s
) AS f
"""
TRIGGERS_SQL = """
INSERT INTO triggers (tenant, trigger_id, version, state, recurrence, target, policies,
    authored_at, author, description, labels, first_authored_at)
SELECT 't' || t, 'trigger-' || i, 1, 'live', '{}', '{}', '{}', %(start)s, 'bench', NULL,
    jsonb_build_object('team', 'team-' || (i %% %(teams)s)), %(start)s
FROM generate_series(0, %(tenants)s - 1) AS t, generate_series(0, %(triggers)s - 1) AS i
"""


def database_url() -> str:
    settings = get_settings()
    if settings.database_url:
        return settings.database_url
    from horae.devstack.stack import LocalStack

    return LocalStack.from_settings(settings).endpoints.database_url


def load(url: str, schema: str, fires: int) -> dict[str, float]:
    """A fresh schema with ``fires`` rows; seconds spent loading and indexing."""
    with psycopg.connect(url, autocommit=True) as conn:
        pschema.migrate(conn, schema)
        conn.execute(pgsql.SQL("SET search_path TO {}").format(pgsql.Identifier(schema)))
        indexes = conn.execute(INDEXES, (schema,)).fetchall()
        for name, _ in indexes:
            conn.execute(pgsql.SQL("DROP INDEX {}").format(pgsql.Identifier(name)))
        conn.execute(
            TRIGGERS_SQL,
            {"start": START, "teams": TEAMS, "tenants": TENANTS, "triggers": TRIGGERS},
        )
        began = time.perf_counter()
        step = 1_000_000
        for lo in range(0, fires, step):
            params = {"lo": lo, "hi": min(fires, lo + step), "tenants": TENANTS,
                      "triggers": TRIGGERS, "start": START, "days": DAYS}  # fmt: skip
            conn.execute(LOAD, params)
            print(f"  loaded {min(fires, lo + step):,} rows", flush=True)
        loaded = time.perf_counter() - began
        began = time.perf_counter()
        conn.execute("SET maintenance_work_mem TO '512MB'")
        for _, definition in indexes:
            conn.execute(definition)
        conn.execute("VACUUM ANALYZE fires")
        conn.execute("ANALYZE triggers")
        indexed = time.perf_counter() - began
    return {"load_s": round(loaded, 1), "index_s": round(indexed, 1)}


def window(rng: random.Random, days: int) -> tuple[datetime, datetime]:
    since = START + timedelta(seconds=rng.uniform(0, (DAYS - days) * 86400))
    return since, since + timedelta(days=days)


def cases(history: PostgresHistory, rng: random.Random) -> dict[str, Callable[[], Page]]:
    def team() -> tuple[str, str]:
        return ("team", f"team-{rng.randrange(TEAMS)}")

    def search(
        days: int, states: list[str] | None, label: Callable[[], tuple[str, str]] | None
    ) -> Callable[[], Page]:
        def call() -> Page:
            since, until = window(rng, days)
            picked = label() if label else None
            return history.search_fires("t0", since, until, states, picked, PAGE, None)

        return call

    def next_page() -> Page:
        since, until = window(rng, 7)
        first = history.search_fires("t0", since, until, ["failed"], None, PAGE, None)
        began = time.perf_counter()
        page = history.search_fires("t0", since, until, ["failed"], None, PAGE, first.next_cursor)
        next_page.elapsed = time.perf_counter() - began  # type: ignore[attr-defined]
        return page

    return {
        "week": search(7, None, None),
        "failed_week": search(7, ["failed"], None),
        "failed_exhausted_30d": search(30, ["failed", "exhausted"], None),
        "label_week": search(7, None, team),
        "label_failed_30d": search(30, ["failed"], team),
        "next_page_failed": next_page,
    }


def measure(call: Callable[[], Page], n: int) -> dict[str, Any]:
    for _ in range(10):  # warm-up: the pool, the plan cache, the pages read
        call()
    times, sizes = [], []
    for _ in range(n):
        began = time.perf_counter()
        page = call()
        elapsed = time.perf_counter() - began
        times.append(getattr(call, "elapsed", elapsed) * 1000)
        sizes.append(len(page.items))
    times.sort()
    return {
        "p50_ms": round(statistics.median(times), 2),
        "p99_ms": round(times[min(len(times) - 1, int(len(times) * 0.99))], 2),
        "max_ms": round(times[-1], 2),
        "rows_per_page": round(statistics.mean(sizes), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fires", type=int, default=10_000_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--keep", action="store_true", help="keep the schema afterwards")
    parser.add_argument("--schema", default=None, help="search this loaded schema (no load)")
    args = parser.parse_args()
    url = database_url()
    schema = args.schema or f"bench_search_{uuid.uuid4().hex[:8]}"
    timing: dict[str, float] = {}
    if args.schema is None:
        print(f"loading {args.fires:,} fire rows into {schema} ...", flush=True)
        timing = load(url, schema, args.fires)
        print(f"  load {timing['load_s']} s, indexes {timing['index_s']} s")
    history = PostgresHistory(url, schema, max_size=2)
    rng = random.Random(args.seed)
    results: dict[str, dict[str, Any]] = {}
    try:
        with psycopg.connect(url) as conn:
            rows = conn.execute(
                pgsql.SQL("SELECT count(*) FROM {}.fires").format(pgsql.Identifier(schema))
            ).fetchone()
        total = int(rows[0]) if rows else 0
        for name, call in cases(history, rng).items():
            results[name] = measure(call, args.queries)
            r = results[name]
            print(
                f"{name:22s} p50 {r['p50_ms']:7.2f} ms  p99 {r['p99_ms']:7.2f} ms  "
                f"max {r['max_ms']:7.2f} ms  rows/page {r['rows_per_page']}",
                flush=True,
            )
    finally:
        history.close()
        if not args.keep and args.schema is None:
            with psycopg.connect(url, autocommit=True) as conn:
                pschema.drop(conn, schema)
    worst = max(r["p99_ms"] for r in results.values())
    load1 = round(os.getloadavg()[0], 1)
    print(f"worst p99 {worst} ms over {total:,} fire rows (goal <= 50 ms on 10M); "
          f"load average {load1} on {os.cpu_count()} cores")  # fmt: skip
    summary = {"fires": total, "p99_ms": worst, "goal_met": worst <= 50.0, **timing,
               "queries": args.queries, "load_average": load1, "cases": results}  # fmt: skip
    if args.keep:
        summary["schema"] = schema
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
