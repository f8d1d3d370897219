"""Bench: rows per second projected into PostgreSQL against two figures of the same run (the
COPY ceiling and the planner's peak), and projection lag while a planner-like producer commits
5,000 fires/s in Kafka transactions.

1. throughput — pre-produce a history (fires; 20 % of them dispatched with attempts, outcome and
   schedule event), then project it from the beginning into a fresh schema (the replay path,
   the same batch code as the live projector) and divide the rows written by the time taken;
2. lag — a separate process (its own CPU, like the planner) commits fires at ``--rate`` per second
   in transactions every 100 ms for ``--seconds``; the live projector (group mode) runs alongside;
   per committed batch, lag = commit time - timestamp of the batch's oldest record. Reports p50,
   p99 and max after a 2 s warm-up; ``lag_s`` is the p99;
3. ceiling — the same history's rows (decoded beforehand, not timed) COPYed in batches of the
   same size into the same tables of another fresh schema, indexes and all, with no merge: what
   PostgreSQL takes without the merge rules (``copy_rows_per_s``; ``ratio_copy`` = rows/s over
   it, goal >= 0.4);
4. planner — ``bench/planner.py`` with ``--planner-peak`` triggers all due at once, in a
   subprocess of the same run: the fire records per second the projector must keep up with
   (``planner_fires_per_s``; ``ratio_planner`` = rows/s over it, goal >= 1). 0: skipped.

Goals: >= 50,000 rows/s, >= 40 % of the COPY ceiling, >= the planner's peak; lag p99 <= 1 s.
A calibration figure (a 10M-iteration CPython loop) is printed beside them. Needs Kafka and
PostgreSQL (HORAE_KAFKA_BOOTSTRAP / HORAE_DATABASE_URL, else the local stack). The last line
printed is JSON: ``{"rows_per_s": ..., "copy_rows_per_s": ..., "ratio_copy": ...,
"planner_fires_per_s": ..., "ratio_planner": ..., "lag_s": ..., "calibration_s": ...}``.

    .venv/bin/python bench/projection.py [--fires 100000] [--rate 5000] [--seconds 20]
        [--batch-records 5000] [--planner-peak 100000] [--only throughput|ceiling|planner|lag]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from machine import calibrate
from psycopg.types.json import Jsonb

from horae.contracts.codec import default_codec
from horae.contracts.topics import PRODUCER_DEFAULTS, Topic, events_topic, spec, topic_name
from horae.kafka.config import client_config
from horae.ports import Emit
from horae.projections import schema as pschema
from horae.projections.metrics import ProjectionMetrics
from horae.projections.projector import Projector, ProjectorConfig
from horae.projections.rebuild import end_offsets
from horae.projections.rows import PROJECTED, STAGE_COLUMNS, STAGE_TYPES, Batch, RecordMapper, Stage
from horae.projections.store import ApplyResult
from horae.projections.synthetic import HistoryProducer, history
from horae.settings import get_settings

PARTITIONS = 6
TENANTS = 10  # at least the tenants of the synthetic histories produced here
#: the read-model table each staging table's rows end in (the ceiling COPYs them there)
TABLES = {
    Stage.DEFINITIONS: "trigger_versions",
    Stage.FIRES: "fires",
    Stage.ATTEMPTS: "attempts",
    Stage.OUTCOMES: "work_outcomes",
    Stage.SCHEDULE_EVENTS: "schedule_events",
    Stage.AUDIT: "audit_entries",
    Stage.ERRORS: "projection_errors",
}


def services() -> tuple[str, str]:
    from horae.devstack.stack import LocalStack

    endpoints = LocalStack.from_settings(get_settings()).endpoints
    return endpoints.kafka_bootstrap, endpoints.database_url


def create_topics(bootstrap: str, prefix: str) -> list[str]:
    admin = AdminClient(client_config(bootstrap))
    new = [
        NewTopic(topic_name(t, prefix), PARTITIONS, 1, config=dict(spec(t).config))
        for t in PROJECTED
    ]
    # the schedule events of the synthetic history go to each tenant's own events topic (the
    # broker creates no topic on produce: without these, those records were dropped unseen)
    events = dict(spec(Topic.SCHEDULE_EVENTS).config)
    new += [
        NewTopic(events_topic(f"tenant-{t}", prefix), PARTITIONS, 1, config=events)
        for t in range(TENANTS)
    ]
    for f in admin.create_topics(new, request_timeout=30).values():
        f.result(timeout=30)
    names = [n.topic for n in new]
    deadline = time.monotonic() + 60  # creation propagates asynchronously: wait for leaders
    while time.monotonic() < deadline:
        meta = admin.list_topics(timeout=30).topics
        if all(
            (t := meta.get(n)) is not None
            and not t.error
            and len(t.partitions) == PARTITIONS
            and all(p.leader >= 0 and not p.error for p in t.partitions.values())
            for n in names
        ):
            break
        time.sleep(0.2)
    return names


def delete_topics(bootstrap: str, names: list[str]) -> None:
    admin = AdminClient(client_config(bootstrap))
    for f in admin.delete_topics(names, request_timeout=30).values():
        with contextlib.suppress(Exception):
            f.result(timeout=30)


def backend_cpu_s(pid: int) -> float | None:
    """CPU seconds (user + system) of a local process, None if it is not visible here."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def throughput(
    bootstrap: str, database_url: str, fires: int, batch_records: int
) -> dict[str, float]:
    prefix, schema = f"bench{uuid.uuid4().hex[:8]}.", f"bench_{uuid.uuid4().hex[:8]}"
    names = create_topics(bootstrap, prefix)
    try:
        producer = HistoryProducer(bootstrap, prefix)
        t0 = time.monotonic()
        records = producer.send(synthetic(fires, prefix))
        producer.flush()
        print(f"produced {records} records in {time.monotonic() - t0:.1f}s")
        ends = end_offsets(bootstrap, names)
        rows = [0]
        backend_cpu = [0.0, -1.0]  # latest reading, first reading

        def hook(batch: Batch, result: ApplyResult) -> None:
            rows[0] += result.total_rows
            cpu = backend_cpu_s(projector.store.conn.info.backend_pid)
            if cpu is not None:
                backend_cpu[0] = cpu
                if backend_cpu[1] < 0:
                    backend_cpu[1] = cpu

        config = ProjectorConfig(
            bootstrap,
            database_url,
            schema,
            prefix,
            stop_at=ends,
            batch_records=batch_records,
            batch_ms=200,
        )
        projector = Projector(config, ProjectionMetrics(), on_batch=hook)
        t0, cpu0 = time.monotonic(), time.process_time()
        projector.run(threading.Event())
        elapsed, cpu = time.monotonic() - t0, time.process_time() - cpu0
        rate = rows[0] / elapsed
        print(
            f"projected {rows[0]} rows ({projector.stats.records} records, "
            f"{projector.stats.batches} batches) in {elapsed:.1f}s: {rate:,.0f} rows/s"
        )
        out = {"rows": rows[0], "seconds": elapsed, "rows_per_s": rate}
        out["projector_cpu_us_per_row"] = cpu / rows[0] * 1e6
        if backend_cpu[1] >= 0:  # the PostgreSQL backend is local: its CPU too (first batch on)
            out["postgres_cpu_us_per_row"] = (backend_cpu[0] - backend_cpu[1]) / rows[0] * 1e6
        print("CPU per row: " + ", ".join(f"{k} {v:.1f}" for k, v in out.items() if "cpu" in k))
        return out
    finally:
        delete_topics(bootstrap, names)
        with psycopg.connect(database_url, autocommit=True) as conn:
            pschema.drop(conn, schema)


def synthetic(fires: int, prefix: str) -> Iterator[Emit]:
    """The history every phase here projects (or COPYs)."""
    return history(fires, TENANTS, 100, dispatch_share=0.2, prefix=prefix, partitions=PARTITIONS)


def decoded(fires: int, prefix: str, batch_records: int) -> list[Batch]:
    """The history's records staged as the projector stages them, in batches."""
    mapper = RecordMapper(default_codec(), {topic_name(t, prefix): t for t in PROJECTED})
    offsets: dict[tuple[str, int], int] = {}
    batches = [Batch()]
    for out in synthetic(fires, prefix):
        if batches[-1].records >= batch_records:
            batches.append(Batch())
        part = out.partition or 0
        off = offsets[(out.topic, part)] = offsets.get((out.topic, part), -1) + 1
        mapper.add(batches[-1], out.topic, part, off, out.key, out.value, 0)
    return batches


def ceiling(database_url: str, fires: int, batch_records: int) -> dict[str, float]:
    """rows/s of COPYing the same rows into the same tables, one transaction per batch."""
    prefix, schema = f"bench{uuid.uuid4().hex[:8]}.", f"bench_{uuid.uuid4().hex[:8]}"
    batches = decoded(fires, prefix, batch_records)
    with psycopg.connect(database_url, autocommit=True) as conn:
        try:
            pschema.migrate(conn, schema)
            pschema.set_search_path(conn, schema)
            conn.execute("SET synchronous_commit TO off")  # as the store's connection
            plans = {stage: _copy_plan(conn, stage) for stage in Stage}
            rows, t0 = 0, time.monotonic()
            for batch in batches:
                with conn.transaction(), conn.cursor() as cur:
                    for stage, staged in batch.rows.items():
                        statement, types, picks, jsons = plans[stage]
                        with cur.copy(statement) as copy:
                            copy.set_types(types)
                            for row in staged:
                                copy.write_row(_picked(row, picks, jsons))
                        rows += len(staged)
            elapsed = time.monotonic() - t0
        finally:
            pschema.drop(conn, schema)
    rate = rows / elapsed
    print(f"COPY ceiling: {rows} rows in {elapsed:.1f}s: {rate:,.0f} rows/s (no merge)")
    return {"copy_rows": rows, "copy_rows_per_s": rate}


def _picked(row: tuple[Any, ...], picks: list[int], jsons: list[int]) -> list[Any]:
    picked = [row[i] for i in picks]
    for j in jsons:
        picked[j] = None if picked[j] is None else Jsonb(json.loads(picked[j]))
    return picked


def _copy_plan(
    conn: psycopg.Connection[Any], stage: Stage
) -> tuple[str, list[str], list[int], list[int]]:
    """The COPY of ``stage``'s rows into its table: the statement, the binary types, which of
    the staged columns the table has, and which of those are jsonb there (text when staged)."""
    table = TABLES[stage]
    kinds = dict(
        conn.execute(
            "SELECT column_name, data_type FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND table_name = %s",
            (table,),
        ).fetchall()
    )
    picks = [i for i, c in enumerate(STAGE_COLUMNS[stage]) if c in kinds]
    names = [STAGE_COLUMNS[stage][i] for i in picks]
    types = [
        "jsonb" if kinds[n] == "jsonb" else STAGE_TYPES[stage][i]
        for i, n in zip(picks, names, strict=True)
    ]
    jsons = [j for j, n in enumerate(names) if kinds[n] == "jsonb"]
    cols = ", ".join(f'"{n}"' for n in names)
    return f"COPY {table} ({cols}) FROM STDIN (FORMAT BINARY)", types, picks, jsons


def planner_peak(peak: int) -> dict[str, float]:
    """bench/planner.py with ``peak`` triggers all due at once (a process of its own)."""
    here = os.path.dirname(os.path.abspath(__file__))
    command = [sys.executable, os.path.join(here, "planner.py"), "--triggers", str(peak)]
    run = subprocess.run(
        [*command, "--peak", str(peak)], check=True, capture_output=True, text=True
    )
    figures = json.loads(run.stdout.strip().splitlines()[-1])
    rate = float(figures["fires_per_s"])
    print(f"planner peak: {peak} due at once, {rate:,.0f} fire records/s")
    return {"planner_fires_per_s": rate}


def planner_like(bootstrap: str, prefix: str, rate: int, seconds: float, out: mp.Queue) -> None:  # type: ignore[type-arg]
    """Commit ``rate`` fire records per second, one transaction per 100 ms."""
    n = int(rate * seconds)
    fires = history(
        n, 10, 500, dispatch_share=0, with_definitions=False, prefix=prefix, partitions=PARTITIONS
    )
    pre = [(r.key, r.value, r.partition) for r in fires if r.partition is not None]
    name = topic_name(Topic.FIRES, prefix)
    producer = Producer(
        client_config(
            bootstrap,
            {
                **PRODUCER_DEFAULTS,
                "transactional.id": f"bench-planner-{prefix}",
                "linger.ms": 5,
            },
        )
    )
    producer.init_transactions(30)
    per_tick = max(1, rate // 10)
    t0 = time.monotonic()
    sent = 0
    for i in range(0, n, per_tick):
        target = t0 + i / rate
        delay = target - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        producer.begin_transaction()
        for key, value, partition in pre[i : i + per_tick]:
            producer.produce(name, value, key, partition=partition)
        producer.commit_transaction(30)
        sent += len(pre[i : i + per_tick])
    out.put({"sent": sent, "seconds": time.monotonic() - t0})


def lag(bootstrap: str, database_url: str, rate: int, seconds: float) -> dict[str, float]:
    prefix, schema = f"bench{uuid.uuid4().hex[:8]}.", f"bench_{uuid.uuid4().hex[:8]}"
    names = create_topics(bootstrap, prefix)
    samples: list[tuple[float, float]] = []
    rows = [0]

    def hook(batch: Batch, result: ApplyResult) -> None:
        now = time.time()
        rows[0] += result.total_rows
        if batch.min_timestamp_ms is not None:
            samples.append((now, now - batch.min_timestamp_ms / 1000))

    config = ProjectorConfig(
        bootstrap, database_url, schema, prefix, batch_records=10_000, batch_ms=100
    )
    projector = Projector(config, ProjectionMetrics(), on_batch=hook)
    stop = threading.Event()
    thread = threading.Thread(target=projector.run, args=(stop,), daemon=True)
    try:
        thread.start()
        time.sleep(3)  # group join
        ctx = mp.get_context("spawn")
        out: mp.Queue = ctx.Queue()  # type: ignore[type-arg]
        proc = ctx.Process(target=planner_like, args=(bootstrap, prefix, rate, seconds, out))
        started = time.time()
        proc.start()
        produced = out.get(timeout=seconds * 4 + 120)
        proc.join(30)
        ends = end_offsets(bootstrap, names)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if all(projector.positions.get(tp, 0) >= e for tp, e in ends.items() if e):
                break
            time.sleep(0.1)
        steady = sorted(lag for at, lag in samples if at - started > 2.0 + 5.0)
        # (+5 s: the producer process spends its first seconds encoding)
        if not steady:
            steady = sorted(lag for _, lag in samples)
        p50 = statistics.median(steady)
        p99 = steady[min(len(steady) - 1, int(len(steady) * 0.99))]
        achieved = produced["sent"] / produced["seconds"]
        print(
            f"planner-like producer: {produced['sent']} fires in {produced['seconds']:.1f}s "
            f"({achieved:,.0f}/s); projector lag p50 {p50:.2f}s p99 {p99:.2f}s "
            f"max {steady[-1]:.2f}s over {len(steady)} batches"
        )
        return {
            "lag_p50_s": p50,
            "lag_p99_s": p99,
            "lag_max_s": steady[-1],
            "produced_per_s": achieved,
        }
    finally:
        stop.set()
        thread.join(30)
        delete_topics(bootstrap, names)
        with psycopg.connect(database_url, autocommit=True) as conn:
            pschema.drop(conn, schema)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fires", type=int, default=100_000)
    parser.add_argument("--rate", type=int, default=5_000)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--batch-records", type=int, default=5000)
    parser.add_argument("--planner-peak", type=int, default=100_000)
    parser.add_argument("--only", choices=["throughput", "ceiling", "planner", "lag"], default=None)
    args = parser.parse_args()
    bootstrap, database_url = services()
    calibration = calibrate()
    print(f"calibration: a 10M-iteration CPython loop takes {calibration} s")
    tp: dict[str, float] = {}
    cl: dict[str, float] = {}
    pl: dict[str, float] = {}
    lg: dict[str, float] = {}
    if args.only in (None, "throughput"):
        tp = throughput(bootstrap, database_url, args.fires, args.batch_records)
    if args.only in (None, "ceiling"):
        cl = ceiling(database_url, args.fires, args.batch_records)
    if args.only in (None, "planner") and args.planner_peak > 0:
        pl = planner_peak(args.planner_peak)
    if args.only in (None, "lag"):
        lg = lag(bootstrap, database_url, args.rate, args.seconds)

    def r(d: dict[str, float], key: str, digits: int = 0) -> float | None:
        return round(d[key], digits) if key in d else None

    def ratio(over: dict[str, float], key: str) -> float | None:
        if "rows_per_s" not in tp or key not in over:
            return None
        return round(tp["rows_per_s"] / over[key], 3)

    summary = {
        "rows_per_s": r(tp, "rows_per_s"),
        "copy_rows_per_s": r(cl, "copy_rows_per_s"),
        "ratio_copy": ratio(cl, "copy_rows_per_s"),
        "planner_fires_per_s": r(pl, "planner_fires_per_s"),
        "ratio_planner": ratio(pl, "planner_fires_per_s"),
        "lag_s": r(lg, "lag_p99_s", 3),
        "lag_p50_s": r(lg, "lag_p50_s", 3),
        "lag_max_s": r(lg, "lag_max_s", 3),
        "lag_producer_fires_per_s": r(lg, "produced_per_s"),
        "rows": r(tp, "rows"),
        "projector_cpu_us_per_row": r(tp, "projector_cpu_us_per_row", 1),
        "postgres_cpu_us_per_row": r(tp, "postgres_cpu_us_per_row", 1),
        "calibration_s": calibration,
    }
    for name, got, goal in (
        ("rows/s", summary["rows_per_s"], 50_000),
        ("rows/s over the COPY ceiling", summary["ratio_copy"], 0.4),
        ("rows/s over the planner's peak", summary["ratio_planner"], 1.0),
    ):
        if got is not None:
            print(f"goal {name} >= {goal}: {got} ({'met' if got >= goal else 'MISSED'})")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
