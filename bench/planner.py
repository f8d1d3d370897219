"""Planner benchmark on the local broker (``horae dev up`` first, or HORAE_KAFKA_BOOTSTRAP).

    .venv/bin/python bench/planner.py [--triggers 1000000] [--peak 100000] [--partitions 12]
        [--phase all|load|coldstart --prefix P]   # load once, then time (or profile) the cold
                                              # start and the peak, as often as you like

1. load: ``--triggers`` signed definitions are produced (by two generator processes) and a first
   planner ingests them (signature, validation, state record per trigger, in transactions);
2. cold start: a fresh planner process joins, owns every partition and rebuilds its due index from
   the planner-state changelog and the definitions — timed, with its RSS growth per trigger;
3. peak: ``--peak`` of the triggers fire at the same instant (``0 0 * * *`` UTC); the planner's
   virtual clock is moved to just before the next midnight (its clock gate widened for that), and
   the time from that instant until all of them are committed is measured. Fires/s is that
   committed throughput. The others fire on a date months away, so nothing else is due.

Prints its figures; the last line is JSON:
``{"bytes_per_trigger": ..., "cold_start_s": ..., "fires_per_s": ..., "peak_100k_s": ...,
"peak_cpu_s": ..., "peak_instant": ...}`` (the process's CPU seconds during the peak, and the
peak's epoch second). bench/compare.py imports ``load`` and ``coldstart_and_peak``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import threading
import time
import uuid
from datetime import UTC, datetime

from confluent_kafka import Producer

from horae.cli.common import require_services
from horae.contracts import events as ev
from horae.contracts import signing
from horae.contracts.admin import Plan, admin_client, apply
from horae.contracts.codec import encode
from horae.contracts.topics import PRODUCER_DEFAULTS, Topic, topic_name
from horae.kafka.config import client_config
from horae.ports import WallClock
from horae.settings import get_settings
from horae.streams.planner.clock import ensure_clock_topic
from horae.streams.planner.rebuild import FreezeAfterRebuild
from horae.streams.planner.worker import Planner, PlannerConfig

TENANT, KEY_ID, SECRET = "bench", "bench-1", b"bench-secret"
ZONES = ("UTC", "Europe/Berlin", "America/New_York", "Asia/Tokyo")


def _expr(i: int, peak: int, month: int) -> tuple[str, str]:
    if i < peak:
        return "0 0 * * *", "UTC"
    j = i - peak
    return f"{j % 60} {(j // 60) % 24} 15 {month} *", ZONES[(j // 1440) % len(ZONES)]


def _recurrence(i: int, peak: int, month: int, steady: tuple[int, int] | None) -> ev.Recurrence:
    """Trigger ``i``'s recurrence: with ``steady = (base, rate)`` the first ``peak`` triggers are
    one-shot, trigger ``i`` at ``base + i // rate`` (``rate`` instants each second), else cron."""
    if steady is not None and i < peak:
        base, rate = steady
        at = datetime.fromtimestamp(base + i // rate, UTC)
        return ev.Recurrence(kind=ev.RecurrenceKind.AT, instants=(at,))
    expr, zone = _expr(i, peak, month)
    return ev.Recurrence(kind=ev.RecurrenceKind.CRON, expr=expr, zone=zone)


def _generate(args: tuple[str, str, int, int, int, int, tuple[int, int] | None]) -> int:
    bootstrap, prefix, start, stop, peak, month, steady = args
    producer = Producer(client_config(bootstrap, {**PRODUCER_DEFAULTS, "linger.ms": 50}))
    topic = topic_name(Topic.DEFINITIONS, prefix)
    now = datetime.now(UTC).replace(microsecond=0)
    for i in range(start, stop):
        d = ev.TriggerDefinition(
            tenant=TENANT,
            trigger_id=f"t{i}",
            version=1,
            state=ev.DefinitionState.LIVE,
            recurrence=_recurrence(i, peak, month, steady),
            target=ev.Target(kind=ev.TargetKind.WEBHOOK, url=f"https://hooks.example/{i % 97}"),
            authored_at=now,
            author="bench",
        )
        signed = signing.sign(d, KEY_ID, SECRET)
        while True:
            try:
                producer.produce(topic, key=f"{TENANT}/t{i}".encode(), value=encode(signed))
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    producer.flush(120)
    return stop - start


def _config(bootstrap: str, prefix: str, slot: str) -> PlannerConfig:
    return PlannerConfig(
        bootstrap,
        prefix,
        slot,
        tick_s=0.5,
        max_skew_s=1e9,
        session_timeout_ms=30_000,
        tenant_keys={TENANT: {KEY_ID: SECRET}},
    )


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _fired(planner: Planner) -> float:
    return float(planner.metrics.fires.labels("fired")._value.get())


def load(
    bootstrap: str,
    prefix: str,
    triggers: int,
    peak: int,
    partitions: int,
    steady: tuple[int, int] | None = None,
) -> None:
    """Produce ``triggers`` signed definitions and ingest them; the first ``peak`` fire at the
    next midnight UTC, or with ``steady = (base, rate)`` once each, ``rate`` per second from the
    epoch second ``base`` on; the others months away."""
    apply(admin_client(bootstrap), Plan(prefix, partitions, 1))
    ensure_clock_topic(bootstrap, prefix)
    month = (datetime.now(UTC).month + 5) % 12 + 1
    started = time.monotonic()
    chunks = [
        (bootstrap, prefix, k * triggers // 2, (k + 1) * triggers // 2, peak, month, steady)
        for k in range(2)
    ]
    with multiprocessing.Pool(2) as pool:
        produced = sum(pool.map(_generate, chunks))
    print(f"produced {produced} signed definitions in {time.monotonic() - started:.1f} s")
    planner = Planner(_config(bootstrap, prefix, "bench"), gc=FreezeAfterRebuild())
    stop = threading.Event()
    thread = threading.Thread(target=planner.run, args=(stop,))
    started = time.monotonic()
    thread.start()
    while sum(len(i) for i in planner.indexes.values()) < triggers:
        time.sleep(0.5)
    stop.set()
    thread.join()
    took = time.monotonic() - started
    print(f"ingested {triggers} definitions in {took:.1f} s ({triggers / took:,.0f}/s)")


def coldstart_and_peak(
    bootstrap: str,
    prefix: str,
    triggers: int,
    peak: int,
    curve: list[tuple[float, float]] | None = None,
) -> dict[str, float]:
    """Cold start, then the peak; ``curve``, when given, receives ``(seconds since the first
    instant, fires committed)`` every 10 ms of the peak."""
    offset = 0.0
    planner = Planner(
        _config(bootstrap, prefix, "bench"),
        clock=WallClock(lambda: time.time() + offset),
        gc=FreezeAfterRebuild(),  # as the planner process does
    )
    before = _rss()
    stop = threading.Event()
    thread = threading.Thread(target=planner.run, args=(stop,))
    started = time.monotonic()
    thread.start()
    while sum(len(i) for i in planner.indexes.values()) < triggers:
        time.sleep(0.05)
    cold = time.monotonic() - started
    per_trigger = (_rss() - before) / triggers
    print(
        f"cold start: {triggers} triggers owned and indexed in {cold:.1f} s, "
        f"{per_trigger:.0f} B/trigger (RSS growth)"
    )
    # The peak triggers' next instant is the earliest of all (the others fire months away); it
    # is the next midnight after their last decided one, so the phase can be run again.
    midnight = min(
        e.due_ts
        for index in list(planner.indexes.values())
        for e in list(index.entries.values())
        if e.due_ts is not None
    )
    offset = midnight - 1.0 - time.time()  # one second before the peak instant
    base = _fired(planner)
    cpu = time.process_time()
    real_instant = time.monotonic() + 1.0
    while (committed := _fired(planner) - base) < peak:
        if curve is not None:
            curve.append((time.monotonic() - real_instant, committed))
        time.sleep(0.01)
    peak_s = time.monotonic() - real_instant
    if curve is not None:
        curve.append((peak_s, committed))
    cpu = time.process_time() - cpu
    stop.set()
    thread.join()
    print(
        f"peak: {peak} instants due at once committed in {peak_s:.2f} s "
        f"({peak / peak_s:,.0f} fires/s)"
    )
    return {
        "bytes_per_trigger": round(per_trigger),
        "cold_start_s": round(cold, 2),
        "fires_per_s": round(peak / peak_s),
        "peak_100k_s": round(peak_s, 2),
        "peak_cpu_s": round(cpu, 2),
        "peak_instant": midnight,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--triggers", type=int, default=1_000_000)
    parser.add_argument("--peak", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument(
        "--phase",
        choices=("all", "load", "coldstart"),
        default="all",
        help="load only, or cold start and peak on a prefix loaded before (for profiling)",
    )
    parser.add_argument("--prefix", default=f"bench{uuid.uuid4().hex[:6]}.")
    args = parser.parse_args()
    bootstrap, _ = require_services(get_settings(), need_database=False)
    if args.phase == "coldstart":
        print(json.dumps(coldstart_and_peak(bootstrap, args.prefix, args.triggers, args.peak)))
        return
    print(f"planner bench: {args.triggers} triggers, peak {args.peak}, prefix {args.prefix}")
    load(bootstrap, args.prefix, args.triggers, args.peak, args.partitions)
    if args.phase == "load":
        return
    # cold start in a fresh process (the same worker slot restarting), so that its memory is the
    # planner's alone
    out = (
        subprocess.run(
            [
                sys.executable,
                __file__,
                "--phase",
                "coldstart",
                "--prefix",
                args.prefix,
                "--triggers",
                str(args.triggers),
                "--peak",
                str(args.peak),
            ],
            check=True,
            capture_output=True,
            text=True,
        )
        .stdout.strip()
        .splitlines()
    )
    print("\n".join(out[:-1]))
    print(out[-1])


if __name__ == "__main__":
    main()
