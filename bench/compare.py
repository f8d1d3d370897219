"""The fair race: Horae beside the schedulers people pick instead, each at its documented best,
the same durability on both sides, the same counted event, in one run on one machine.

    .venv/bin/python bench/compare.py [--workloads a,b,c] [--durability nosync,sync,replicated]
        [--scale 100000] [--rate 1000] [--steady-seconds 60] [--held 1000000] [--repeats 3]
        [--other-repeats 1] [--slow-scale 10000] [--sweep-scale 5000] [--sweep-final-scale 20000]
        [--sweep-durability sync|nosync|all] [--systems horae,apscheduler,...] [--cap 600]
        [--settle 2] [--plot compare.png] [--out runs.jsonl]
    .venv/bin/python bench/compare.py --report runs.jsonl [--plot compare.png]

The counted event, for every system: a delivered call, an HMAC-signed (Standard Webhooks) HTTP
POST of the task's key to one local keep-alive receiver (bench/receiver.py, started here, reset
before each run), which refuses a bad signature and keeps the first receipt of each key. Horae:
the planner decides and commits each fire, one dispatcher process POSTs it (its attempt and
outcome committed in Kafka transactions; bench/peers/horae_peer.py). The peers: the task handler
POSTs with a pooled keep-alive client of its ecosystem (Java ``java.net.http.HttpClient``,
Python ``httpx``) and returns only after the 2xx, so the task completes after the receipt
(bench/peers/). fires/s = n / (last receipt - first due instant); lateness = receipt - due.
Each system's own count of delivered calls (Horae: committed ``succeeded`` outcomes; a peer: its
handler's 2xx answers) must equal the receiver's distinct keys, else the run's status says
``MISMATCH``. Horae's decisions alone ("decided, not delivered") are a second table.

Durability, both sides alike: ``nosync`` = the dev stack's PostgreSQL (``fsync=off``) and Kafka
as it runs by default (no fsync per write); ``sync`` = a private PostgreSQL cluster started here
(``fsync`` and ``synchronous_commit`` on) and ``flush.messages=1`` on every topic of Horae's
bench prefix, set through the admin client (the broker fsyncs each write to them before it
answers); ``replicated`` = Horae alone on a private 3-broker KRaft cluster started here (RF 3,
``min.insync.replicas`` 2, ``acks=all``, Kafka's default flush: the way Kafka users get
durability), raced against the peers' ``sync`` rows (fsync is how a PostgreSQL user gets it),
on workload (a) only; the cluster runs only during those runs. The headline is ``sync``: the
one durability both sides reach by the same means.

Each peer runs at the settings ``PEER_SETTINGS`` names (docs/performance.md names the same;
tests/unit/test_compare.py checks it). db-scheduler's are swept first on the headline
durability (``--sweep-durability``; ``DBSCHEDULER_SWEEP``: threads × lock-and-fetch limits ×
pool, at ``--sweep-scale`` due at once, one run per cell; then its best three and the
documented default again at ``--sweep-final-scale``); the best of that second stage (delivered
fires/s) runs every workload on every durability. Quartz runs twice:
one clustered scheduler, and, labelled ``quartz_partitioned``, the job set partitioned over four
distinct schedulers (Quartz's own advice for thousands of short jobs). APScheduler and both
Quartz setups run (a) at ``--slow-scale`` (10,000: a 100,000 burst takes them 5-12 minutes
each here, which the 60-minute budget cannot hold; ``--slow-scale 0`` runs them at
``--scale``): their delivered fires/s is throughput-bound, so the ratio holds, and a smaller
table only helps them.

Workloads: (a) ``--scale`` due at once; (b) ``--rate``/s for ``--steady-seconds`` (fires/s at
most the rate); (c) ``--held`` held, 1,000 firing at once (start-up time, peak RSS). The contest
cells (Horae and db-scheduler on (a), ``sync``) run ``--repeats`` times, every other cell
``--other-repeats`` (the 60-minute budget), the system order rotated each time, with ``sync`` and
a ``--settle`` pause before each run; min/median/max are reported, the median run's figures in
the table. Rows are written at their final due time, then ``VACUUM ANALYZE``; the
Java peers warm the JVM up with a 2,000 burst first (bench/peers/src). A run not done ``--cap``
seconds after its due time is a timeout ((b): 30 s after its last instant).

Prints every setting, the sweep, the tables, the goals (met or MISSED, with where Horae's time
goes when missed), a calibration figure (a 10M-iteration CPython loop: machines of this kind
differ up to ~3x from one day to the next, so only the ratios of one run count) and ends with one
JSON line: ``<system>_<part><figure>_<durability>`` (part ``""`` (a), ``steady_`` (b), ``held_``
(c); figures ``FIGURES`` plus ``_min``/``_max`` of fires/s), ``ratio_<peer>_<durability>`` =
Horae's delivered fires/s on (a) over the peer's (``ratio_<peer>``: the ``sync`` one; Quartz:
its better setup), ``decided_ratio_<peer>_<durability>`` (Horae's decisions over the peer's
deliveries), ``goals``, ``settings``, ``dbscheduler_best_<durability>``,
``dbscheduler_sweep_<durability>``, ``calibration_loop_s``, ``load_avg``.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import receiver  # noqa: E402
from machine import calibrate  # noqa: E402

PEERS = BENCH / "peers"
JAR = PEERS / "target" / "peers.jar"
SYSTEMS = ("horae", "apscheduler", "dbscheduler", "quartz", "quartz_partitioned")
#: the peers whose (a) run is ``--slow-scale`` due at once (their throughput-bound rate: a
#: 100,000 burst takes them 5-12 minutes here); ``--slow-scale 0``: ``--scale`` like the others
SLOW = ("apscheduler", "quartz", "quartz_partitioned")
PEERS_OF_GOALS = ("apscheduler", "dbscheduler", "quartz")
GOAL_RATIOS = {"apscheduler": 10.0, "dbscheduler": 2.0, "quartz": 2.0}
MODES = ("nosync", "sync", "replicated")
#: Horae's rows on a 3-broker cluster (RF 3, min.insync.replicas 2, acks=all) race the peers'
#: ``sync`` rows: replication is how Kafka users get durability, fsync is how PostgreSQL's do
REPLICATED = "replicated"
PEER_MODE = {"nosync": "nosync", "sync": "sync", REPLICATED: "sync"}
HEADLINE = "sync"
CONTEST = ("horae", "dbscheduler")  # the cells the headline's closest ratio rests on

#: each peer at its documented best (docs/performance.md, "Settings", names the same values)
PEER_SETTINGS: dict[str, dict[str, Any]] = {
    "apscheduler": {"workers": 20},
    "dbscheduler": {"threads": 20, "lower": 1.0, "upper": 4.0, "pool": 30, "poll_ms": 100},
    "quartz": {"schedulers": 1, "threads": 50, "batch": 50, "idle_ms": 1000},
    "quartz_partitioned": {"schedulers": 4, "threads": 25, "batch": 25, "idle_ms": 1000},
}
#: db-scheduler's sweep: threads × pollUsingLockAndFetch(lower, upper) × pool (threads + k)
DBSCHEDULER_SWEEP: dict[str, Any] = {
    "threads": (10, 20, 50),
    "limits": ((0.5, 1.0), (1.0, 4.0), (4.0, 20.0)),
    "pool_extra": (2, 10),
    "poll_ms": 100,
}

FIGURES = (
    "fires_per_s",
    "first_ms",
    "p50_ms",
    "p99_ms",
    "max_ms",
    "peak_rss_mb",
    "cpu_s_per_1k",
    "startup_s",
)
HEADS = (
    "delivered/s (min-max)",
    "first ms",
    "p50 ms",
    "p99 ms",
    "max ms",
    "peak RSS MB",
    "CPU s/1k",
    "start-up s",
)
NAMES = {"a": "", "b": "steady_", "c": "held_"}  # a workload's part of a JSON key
SETUP_S = 900  # a run's own setup (inserts, load, cold start) on top of --cap
HELD_FIRING = 1000
JAVA = ("java", "-Xms256m", "-Xmx2g", "-jar")

Results = dict[tuple[str, str, str], dict[str, Any]]  # (workload, system, mode) -> cell


def sweep_cells() -> list[dict[str, Any]]:
    """db-scheduler's settings for each cell of its sweep."""
    s = DBSCHEDULER_SWEEP
    return [
        {"threads": t, "lower": lo, "upper": up, "pool": t + k, "poll_ms": s["poll_ms"]}
        for t in s["threads"]
        for lo, up in s["limits"]
        for k in s["pool_extra"]
    ]


@dataclass(frozen=True)
class Workload:
    key: str  # "a", "b", "c"
    title: str
    n: int  # firing
    rate: int  # due per second (n: all at once)
    held: int  # never firing during the run
    seconds: int = 0  # a steady run's length


def workloads(args: argparse.Namespace) -> list[Workload]:
    every = {
        "a": Workload("a", f"(a) {args.scale:,} due at once", args.scale, args.scale, 0),
        "b": Workload(
            "b",
            f"(b) {args.rate:,}/s for {args.steady_seconds} s",
            args.rate * args.steady_seconds,
            args.rate,
            0,
            args.steady_seconds,
        ),
        "c": Workload(
            "c",
            f"(c) {args.held:,} held, {HELD_FIRING:,} firing",
            HELD_FIRING,
            HELD_FIRING,
            args.held,
        ),
    }
    return [every[k] for k in args.workloads.split(",")]


def scaled(wl: Workload, system: str, slow_scale: int) -> Workload:
    """The workload ``system`` runs: (a) at ``slow_scale`` for the slow peers (when set)."""
    if wl.key != "a" or system not in SLOW or not slow_scale or slow_scale >= wl.n:
        return wl
    return Workload("a", f"(a) {slow_scale:,} due at once", slow_scale, slow_scale, 0)


def cap_of(wl: Workload, cap: int) -> int:
    """A run's cap: (b) ends 30 s after its last due instant (a system 30 s behind at the end
    of a steady run cannot keep up with the rate: a timeout, its figures what it did)."""
    return min(cap, wl.seconds + 30) if wl.key == "b" else cap


def repeats_of(wl: Workload, system: str, mode: str, args: argparse.Namespace) -> int:
    """How often ``system`` runs ``wl`` on ``mode``: the contest cells (Horae and db-scheduler
    on (a), headline durability) ``--repeats`` times, every other cell ``--other-repeats``."""
    if wl.key == "a" and system in CONTEST and mode == HEADLINE:
        return int(args.repeats)
    return int(args.other_repeats)


def rotated(items: list[str], k: int) -> list[str]:
    k %= max(1, len(items))
    return items[k:] + items[:k]


# --- the databases -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Database:
    """A PostgreSQL cluster: ``url`` any database in it, to create and drop the peers' own."""

    url: str
    label: str

    def _with_db(self, name: str) -> str:
        parts = urlsplit(self.url)
        return urlunsplit(parts._replace(path=f"/{name}"))

    def settings(self) -> str:
        with psycopg.connect(self.url, autocommit=True) as conn:
            rows = conn.execute(
                "select name, setting from pg_settings where name in ('fsync',"
                " 'synchronous_commit', 'full_page_writes', 'wal_sync_method', 'shared_buffers')"
                " order by name"
            ).fetchall()
        return ", ".join(f"{k}={v}" for k, v in rows)

    def create(self, name: str) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'drop database if exists "{name}" with (force)')
            conn.execute(f'create database "{name}"')

    def drop(self, name: str) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'drop database if exists "{name}" with (force)')

    def jdbc(self, name: str) -> tuple[str, str]:
        parts = urlsplit(self.url)
        return f"jdbc:postgresql://{parts.hostname}:{parts.port or 5432}/{name}", (
            parts.username or "postgres"
        )

    def sqlalchemy(self, name: str) -> str:
        return self._with_db(name).replace("postgresql://", "postgresql+psycopg://", 1)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def sync_cluster() -> Iterator[Database]:
    """A private PostgreSQL cluster with production durability, stopped and removed after."""
    from horae.devstack.postgres import PostgresCluster

    home = Path(tempfile.mkdtemp(prefix="horae-bench-pg-"))
    cluster = PostgresCluster(home, _free_port(), fsync=True)
    try:
        cluster.start()
        yield Database(cluster.url, "sync")
    finally:
        cluster.stop()
        shutil.rmtree(home, ignore_errors=True)


@contextlib.contextmanager
def replicated_kafka() -> Iterator[dict[str, str]]:
    """A private 3-broker KRaft cluster (every node also a controller; Horae's topics on it get
    replication factor 3 and ``min.insync.replicas`` 2, its producers ``acks=all``): the
    environment a Horae process needs to use it as its admin. Stopped and removed after."""
    from horae.devstack.private import private_cluster

    with private_cluster("horae-bench-3b-") as kafka:
        admin = kafka.admin
        assert admin is not None
        yield dict(
            os.environ,
            HORAE_KAFKA_BOOTSTRAP=kafka.bootstrap,
            HORAE_KAFKA_USERNAME=admin.username,
            HORAE_KAFKA_PASSWORD=admin.password,
            HORAE_KAFKA_SECURITY_PROTOCOL=kafka.connection().security_protocol,
            HORAE_TOPIC_REPLICATION_FACTOR="3",
        )


@contextlib.contextmanager
def receiving() -> Iterator[int]:
    """bench/receiver.py on ``receiver.PORT`` for the whole comparison."""
    proc = subprocess.Popen(
        [sys.executable, str(BENCH / "receiver.py"), "--port", str(receiver.PORT)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        yield int(proc.stdout.readline())
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(30)


# --- the runs ----------------------------------------------------------------------------------
def ensure_python_peers() -> None:
    """The ``bench`` extra of pyproject.toml (APScheduler, SQLAlchemy, matplotlib), installed at
    the versions of requirements.lock when one is missing."""
    missing = [m for m in ("apscheduler", "sqlalchemy", "matplotlib") if not find_spec(m)]
    if missing:
        root = BENCH.parent
        extra = tomllib.loads((root / "pyproject.toml").read_text())["project"][
            "optional-dependencies"
        ]["bench"]
        print(f"installing the bench extra ({', '.join(missing)} missing) ...", flush=True)
        pip = [sys.executable, "-m", "pip", "install", "-q", "-c", str(root / "requirements.lock")]
        subprocess.run([*pip, *extra], check=True)


def ensure_jar() -> None:
    sources = [PEERS / "pom.xml", *(PEERS / "src").rglob("*.java")]
    if not JAR.exists() or max(p.stat().st_mtime for p in sources) > JAR.stat().st_mtime:
        print("building the Java peers (bench/peers/build) ...", flush=True)
        subprocess.run([str(PEERS / "build")], check=True)


def _last_json(out: str) -> dict[str, Any]:
    lines = [line for line in out.strip().splitlines() if line.startswith("{")]
    if not lines:
        raise RuntimeError("no JSON line in the output")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def _run(
    system: str, cmd: list[str], timeout_s: float, env: dict[str, str] | None = None
) -> dict[str, Any]:
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout_s, check=False, env=env
        )
    except subprocess.TimeoutExpired:
        return {"system": system, "timeout": True, "error": "killed at the cap"}
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout)[-1500:]
        return {"system": system, "timeout": False, "error": f"exit {proc.returncode}: {tail}"}
    try:
        return _last_json(proc.stdout)
    except RuntimeError as e:
        return {"system": system, "timeout": False, "error": f"{e}: {proc.stderr[-1500:]}"}


def peer_command(
    system: str, wl: Workload, db: Database, name: str, cap: int, settings: dict[str, Any]
) -> list[str]:
    """The command line of one peer run (its settings as ``key=value`` arguments)."""
    n, rate = wl.n, wl.rate
    url = f"http://127.0.0.1:{receiver.PORT}/hook"
    secret = receiver.SECRET.removeprefix("whsec_")
    tail = [str(n), str(rate), str(cap), str(wl.held), url, secret]
    tail += [f"{k}={v}" for k, v in settings.items()]
    if system.startswith("apscheduler"):
        return [sys.executable, str(PEERS / "apscheduler_peer.py"), db.sqlalchemy(name), *tail]
    jdbc, user = db.jdbc(name)
    return [*JAVA, str(JAR), system.removesuffix("_partitioned"), jdbc, user, *tail]


def run_peer(
    system: str, wl: Workload, db: Database, cap: int, settings: dict[str, Any]
) -> dict[str, Any]:
    name = f"bench_{system}"
    db.create(name)
    try:
        cmd = peer_command(system, wl, db, name, cap, settings)
        result = _run(system, cmd, cap + SETUP_S)
    finally:
        db.drop(name)
    stats = receiver.call(receiver.PORT, "/stats")
    return with_receipts(result, stats)


def with_receipts(result: dict[str, Any], stats: dict[str, Any]) -> dict[str, Any]:
    """A peer's result with the receiver's figures: ``received`` (distinct keys), lateness
    (receipt - due; ``first_ms``: the first delivery's) and fires/s over the span from the first due
    instant to the last receipt."""
    r = dict(result)
    r["received"] = stats["distinct"]
    r["posts"], r["refused"] = stats["posts"], stats["refused"]
    span = stats.get("span_s")
    r["span_s"] = span
    r["fires_per_s"] = round(stats["distinct"] / span, 1) if span else None
    for k in ("first_ms", "p50_ms", "p99_ms", "max_ms"):
        r[k] = stats.get(k)
    r["quantiles_ms"] = stats.get("lateness_ms")
    return r


class Horae:
    """Horae's runs. A burst's prefix ((a), (c)) is loaded once and measured again at each next
    midnight; a steady run's one-shot instants are spent, so (b) loads again for each run."""

    def __init__(self) -> None:
        self.loaded: dict[tuple[str, bool], str] = {}  # by workload and cluster
        self.prefixes: list[str] = []  # on the dev stack's broker (the private one is removed)
        self.replicated: dict[str, str] | None = None  # the 3-broker cluster's environment

    def _horae(self, *args: str, timeout_s: float, replicated: bool = False) -> dict[str, Any]:
        cmd = [sys.executable, str(PEERS / "horae_peer.py"), *args]
        return _run("horae", cmd, timeout_s, self.replicated if replicated else None)

    def run(self, wl: Workload, mode: str, cap: int) -> dict[str, Any]:
        on3 = mode == REPLICATED
        run = functools.partial(self._horae, replicated=on3)
        prefix = self.loaded.get((wl.key, on3))
        if prefix is None:
            prefix = f"bcmp{uuid.uuid4().hex[:6]}."
            if not on3:
                self.prefixes.append(prefix)
            print(f"horae: loading {wl.n + wl.held:,} definitions under {prefix}", flush=True)
            started = time.monotonic()
            setup_s = SETUP_S + (wl.n + wl.held) // 250
            loaded = run("load", prefix, str(wl.n), str(wl.rate), str(wl.held), timeout_s=setup_s)
            if "error" in loaded:
                return loaded
            print(f"horae: loaded in {time.monotonic() - started:.0f} s", flush=True)
            if wl.rate == wl.n:
                self.loaded[(wl.key, on3)] = prefix  # the next midnight fires the same set again
        n, rate, held = str(wl.n), str(wl.rate), str(wl.held)
        return run("measure", prefix, n, rate, held, mode, timeout_s=cap + SETUP_S)

    def cleanup(self) -> None:
        for prefix in self.prefixes:
            self._horae("drop", prefix, timeout_s=300)


# --- figures -----------------------------------------------------------------------------------
def normalize(wl: Workload, result: dict[str, Any]) -> dict[str, Any]:
    """``result`` with the figures every system reports the same way: ``n``; a steady run's
    fires/s at most its rate (it lasts its seconds however early the last call comes); the
    check that the system's own count of delivered calls equals the receiver's distinct keys
    (``count_ok``)."""
    r = dict(result)
    r.setdefault("n", wl.n)
    if wl.rate < wl.n and r.get("fires_per_s"):
        r["fires_per_s"] = min(float(wl.rate), float(r["fires_per_s"]))
    if "error" not in r:
        r["count_ok"] = r.get("delivered") == r.get("received") and not r.get("refused")
    return r


def status(result: dict[str, Any]) -> str:
    if result.get("error") and not result.get("timeout"):
        return "error"
    received = result.get("received")
    if result.get("timeout"):
        return f"TIMEOUT ({received:,}/{result['n']:,})" if received is not None else "TIMEOUT"
    if not result.get("count_ok", True):
        return (
            f"MISMATCH (own count {result.get('delivered')}, receiver {received}, refused "
            f"{result.get('refused')})"
        )
    dup = result.get("duplicates", 0)
    late_setup = result.get("written_before_due") is False
    return (
        "ok"
        + (f", {dup} duplicates" if dup else "")
        + (", setup overran due" if late_setup else "")
    )


def aggregate(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One cell from its repeats: the median run (by fires/s) with ``fires_per_s_min``/``_max``,
    ``repeats`` and each run's status; a failed repeat makes the cell's status its own."""
    good = [r for r in runs if r.get("fires_per_s") is not None and status(r).startswith("ok")]
    if not good:
        cell = dict(runs[-1])
        cell["repeats"] = len(runs)
        return cell
    ordered = sorted(good, key=lambda r: float(r["fires_per_s"]))
    cell = dict(ordered[(len(ordered) - 1) // 2])
    rates = [float(r["fires_per_s"]) for r in ordered]
    cell["fires_per_s"] = round(statistics.median(rates), 1)
    cell["fires_per_s_min"], cell["fires_per_s_max"] = rates[0], rates[-1]
    cell["repeats"] = len(runs)
    bad = [status(r) for r in runs if r not in good]
    if bad:
        cell["failed_repeats"] = bad
    return cell


def _cell(result: dict[str, Any], figure: str) -> str:
    value = result.get(figure)
    if value is None:
        return "-"
    if figure == "fires_per_s":
        lo, hi = result.get("fires_per_s_min"), result.get("fires_per_s_max")
        spread = f" ({lo:,.0f}-{hi:,.0f})" if lo is not None and hi is not None and lo != hi else ""
        return f"{value:,.0f}{spread}"
    if figure.endswith("_ms"):
        return f"{value:,}"
    return f"{value:,.3f}" if figure == "cpu_s_per_1k" else f"{value:,.1f}"


def _markdown(rows: list[list[str]], numeric_from: int) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    rule = ["-" * w for w in widths]
    for i in range(numeric_from, len(widths) - 1):
        rule[i] = rule[i][:-1] + ":"
    rows = [rows[0], rule, *rows[1:]]
    lines = (" | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows)
    return "\n".join(f"| {line} |" for line in lines)


def table(results: Results, wls: list[Workload]) -> str:
    """The delivered-call table: a row per workload, system and durability that was run."""
    rows = [["workload", "system", "durability", *HEADS, "runs", "status"]]
    for wl in wls:
        for mode in MODES:
            for system in SYSTEMS:
                r = results.get((wl.key, system, mode))
                if r is not None:
                    cells = [_cell(r, f) for f in FIGURES]
                    runs = str(r.get("repeats", 1))
                    title = str(r.get("title", wl.title))
                    rows.append([title, system, mode, *cells, runs, status(r)])
    return _markdown(rows, 3)


def decided_table(results: Results, wls: list[Workload]) -> str:
    """Horae's decisions alone, "decided, not delivered": decided/s and decision lateness."""
    heads = ["decided/s", "first ms", "decided p50 ms", "decided p99 ms", "last ms", "status"]
    rows = [["workload", "durability", *heads]]
    for wl in wls:
        for mode in MODES:
            r = results.get((wl.key, "horae", mode))
            if r is not None:
                rows.append(
                    [
                        wl.title,
                        mode,
                        _cell({"fires_per_s": r.get("decided_per_s")}, "fires_per_s"),
                        _cell(r, "decided_first_ms"),
                        _cell(r, "decided_p50_ms"),
                        _cell(r, "decided_p99_ms"),
                        _cell(r, "decided_p100_ms"),
                        "decided, not delivered",
                    ]
                )
    return _markdown(rows, 2)


def best_quartz(results: Results, wl: str, mode: str) -> tuple[str, float | None]:
    """The Quartz setup with the higher delivered fires/s on ``wl`` (its name, its figure)."""
    best: tuple[str, float | None] = ("quartz", None)
    for system in ("quartz", "quartz_partitioned"):
        v = results.get((wl, system, mode), {}).get("fires_per_s")
        if v is not None and (best[1] is None or v > best[1]):
            best = (system, float(v))
    return best


def peer_figure(results: Results, peer: str, mode: str) -> tuple[str, float | None]:
    if peer == "quartz":
        return best_quartz(results, "a", mode)
    return peer, results.get(("a", peer, mode), {}).get("fires_per_s")


def summary(results: Results) -> dict[str, Any]:
    """The last JSON line's figures (see the module docstring)."""
    out: dict[str, Any] = {}
    for (wl, system, mode), r in sorted(results.items()):
        part = f"{system}_{NAMES[wl]}"
        extra: tuple[str, ...] = ("fires_per_s_min", "fires_per_s_max")
        if system == "horae":
            extra += ("decided_per_s", "decided_first_ms", "decided_p50_ms", "decided_p99_ms")
            extra += ("decided_p100_ms",)
        for f in (*FIGURES, *extra):
            out[f"{part}{f}_{mode}"] = r.get(f)
        out[f"{part}status_{mode}"] = status(r)
    for mode in MODES:
        mine = results.get(("a", "horae", mode), {})
        for peer in PEERS_OF_GOALS:
            name, theirs = peer_figure(results, peer, PEER_MODE[mode])
            if theirs:
                if mine.get("fires_per_s"):
                    out[f"ratio_{peer}_{mode}"] = round(mine["fires_per_s"] / theirs, 2)
                if mine.get("decided_per_s"):
                    out[f"decided_ratio_{peer}_{mode}"] = round(mine["decided_per_s"] / theirs, 2)
                if peer == "quartz":
                    out[f"ratio_quartz_setup_{mode}"] = name
    for peer in PEERS_OF_GOALS:
        if f"ratio_{peer}_sync" in out:
            out[f"ratio_{peer}"] = out[f"ratio_{peer}_sync"]
    return out


def goals(results: Results) -> list[tuple[str, bool]]:
    """Issue 26's goals against this run, one ``(line, met)`` per goal, peer and durability run:
    (a) Horae's delivered fires/s at least ``GOAL_RATIOS`` times each peer's; (b) Horae's p99
    due-to-receipt lower than every peer's (a peer's capped or failed run counts as beaten); (c)
    Horae's start-up and peak RSS within 2x of the best peer's."""
    s = summary(results)
    out: list[tuple[str, bool]] = []
    for mode in MODES:
        for peer, goal in GOAL_RATIOS.items():
            ratio = s.get(f"ratio_{peer}_{mode}")
            if ratio is not None:
                label = peer if peer != "quartz" else s[f"ratio_quartz_setup_{mode}"]
                met = ratio >= goal
                out.append((f"goal (a) {mode}: {ratio}x {label} (>= {goal:g}x)", met))
        mine = results.get(("b", "horae", mode), {}).get("p99_ms")
        for peer in ("apscheduler", "dbscheduler", "quartz", "quartz_partitioned"):
            r = results.get(("b", peer, PEER_MODE[mode]))
            if mine is None or r is None:
                continue
            theirs = r.get("p99_ms")
            failed = bool(r.get("timeout") or r.get("error"))
            met = failed or (theirs is not None and mine < theirs)
            out.append((f"goal (b) {mode}: p99 {mine:,} ms vs {peer} {theirs} ms", met))
        horae = results.get(("c", "horae", mode))
        peers = [
            r
            for (wl, system, m), r in results.items()
            if wl == "c" and m == PEER_MODE[mode] and system != "horae" and not r.get("error")
        ]
        if horae is not None and peers:
            for figure, label in (("startup_s", "start-up"), ("peak_rss_mb", "peak RSS")):
                best = min(
                    (r for r in peers if r.get(figure) is not None),
                    key=lambda r: float(r[figure]),
                    default=None,
                )
                if best is None or horae.get(figure) is None:
                    continue
                ratio = round(float(horae[figure]) / max(1e-9, float(best[figure])), 2)
                out.append(
                    (
                        f"goal (c) {mode}: {label} {horae[figure]} vs best {best['system']} "
                        f"{best[figure]} ({ratio}x, <= 2x)",
                        ratio <= 2.0,
                    )
                )
    return out


def where_time_goes(results: Results) -> list[str]:
    """Horae's median (a) run taken apart: deciding against delivering, each process's CPU."""
    lines = []
    for mode in MODES:
        r = results.get(("a", "horae", mode))
        if r is None or r.get("error"):
            continue
        lines.append(
            f"horae (a) {mode}: every decision committed {r.get('decided_span_s')} s after the "
            f"due instant ({r.get('decided_per_s')}/s), the last call received after "
            f"{r.get('span_s')} s; CPU planner {r.get('planner_cpu_s')} s, dispatcher "
            f"{r.get('dispatcher_cpu_s')} s ({r.get('cpu_s_per_1k')} s per 1k calls); start-up "
            f"{r.get('startup_s')} s; RSS planner {r.get('planner_rss_mb')} MB + dispatcher "
            f"{r.get('dispatcher_rss_mb')} MB"
        )
    return lines


def plot(results: Results, wls: list[Workload], path: str) -> str:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "no plot: matplotlib is not installed (the bench extra of pyproject.toml)"
    fig, axes = plt.subplots(len(wls), 2, figsize=(13, 4 * len(wls)), squeeze=False)
    for row, wl in zip(axes, wls, strict=True):
        bars, dists = row
        x = range(len(SYSTEMS))
        for k, mode in enumerate(MODES):
            values = [results.get((wl.key, s, mode), {}).get("fires_per_s") or 0 for s in SYSTEMS]
            bars.bar([i + 0.27 * k for i in x], values, width=0.27, label=mode)
        bars.set_xticks([i + 0.27 for i in x], SYSTEMS, rotation=20, fontsize="small")
        bars.set_yscale("log")
        bars.set_ylabel("delivered calls/s (log)")
        bars.set_title(f"{wl.title}: throughput")
        bars.legend()
        for k, s in enumerate(SYSTEMS):
            for mode, style in (("nosync", ":"), ("sync", "-"), (REPLICATED, "-.")):
                r = results.get((wl.key, s, mode), {})
                q = r.get("quantiles_ms")
                if q:
                    dists.plot(q, range(len(q)), style, color=f"C{k}", label=f"{s} ({mode})")
                d = r.get("decided_quantiles_ms")
                if d:
                    dists.plot(
                        d,
                        range(len(d)),
                        "--",
                        color=f"C{k}",
                        alpha=0.5,
                        label=f"{s} decided ({mode})",
                    )
        dists.set_xscale("symlog")
        dists.set_xlabel("lateness, ms (symlog): due to receipt; dashed: due to decision")
        dists.set_ylabel("percentile")
        dists.set_title(f"{wl.title}: lateness distribution")
        dists.legend(fontsize="x-small")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    return f"plot: {path}"


# --- main --------------------------------------------------------------------------------------
def cells(runs: list[dict[str, Any]], wls: list[Workload]) -> Results:
    """Each (workload, system, durability) cell from its runs (``workload``/``mode`` keys)."""
    by_key = {wl.key: wl for wl in wls}
    grouped: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for r in runs:
        if r.get("kind", "run") == "run" and (wl := by_key.get(r["workload"])) is not None:
            key = (wl.key, r["system"], r["mode"])
            grouped.setdefault(key, []).append(normalize(wl, r))
    return {key: aggregate(group) for key, group in grouped.items()}


def report(
    runs: list[dict[str, Any]], wls: list[Workload], plot_path: str, extra: dict[str, Any]
) -> None:
    """The end of a run: settings, the tables, goals, the profile, the plot and the JSON line."""
    results = cells(runs, wls)
    wls = [wl for wl in wls if any(key[0] == wl.key for key in results)]
    print()
    tunings: dict[str, str] = {}
    for (_, system, mode), r in sorted(results.items()):
        if r.get("tuning"):
            tunings[f"{system} ({mode})"] = r["tuning"]
    for name, tuning in tunings.items():
        print(f"settings {name}: {tuning}")
    print(
        "counted event: a signed POST received by bench/receiver.py (first receipt per key); "
        "delivered/s = n / (last receipt - first due); lateness = receipt - due; median of the "
        "repeats (min-max). CPU and RSS: the system's processes (Horae: planner + dispatcher), "
        "not PostgreSQL's, Kafka's or the receiver's."
    )
    print(table(results, wls))
    print()
    print(decided_table(results, wls))
    lines = goals(results)
    for line, met in lines:
        print(f"{line}: {'met' if met else 'MISSED'}")
    if not all(met for _, met in lines):
        for line in where_time_goes(results):
            print(f"where Horae's time goes: {line}")
    print(plot(results, wls, plot_path))
    s = summary(results)
    s["goals"] = {line: met for line, met in lines}
    s["settings"] = {**PEER_SETTINGS, "dbscheduler_sweep": DBSCHEDULER_SWEEP}
    for r in runs:
        if r.get("kind") == "sweep-best":
            s[f"dbscheduler_best_{r['mode']}"] = r["settings"]
            s[f"dbscheduler_sweep_{r['mode']}"] = r["sweep"]
    s.update(extra)
    print(json.dumps(s))


def sweep(
    db: Database, mode: str, scale: int, final_scale: int, cap: int, settle: float
) -> dict[str, Any]:
    """db-scheduler's sweep on ``db``, in two stages (one run of a small burst is mostly its
    ramp and the machine's noise): every cell once at ``scale`` due at once; then the best
    three of those and the documented default (``PEER_SETTINGS``) once more at ``final_scale``.
    The best of the second stage is chosen."""
    rows: list[dict[str, Any]] = []

    def once(settings: dict[str, Any], n: int, stage: int) -> float | None:
        wl = Workload("a", f"sweep {n:,}", n, n, 0)
        settled()
        time.sleep(settle)
        receiver.call(receiver.PORT, "/reset", "POST")
        r = normalize(
            wl, {**run_peer("dbscheduler", wl, db, cap, settings), "system": "dbscheduler"}
        )
        fires = r.get("fires_per_s") if status(r).startswith("ok") else None
        rows.append({**settings, "n": n, "stage": stage, "fires_per_s": fires, "status": status(r)})
        print(
            f"sweep dbscheduler {mode} (stage {stage}, {n:,}): {settings} -> {fires} "
            f"delivered/s ({status(r)})",
            flush=True,
        )
        return None if fires is None else float(fires)

    first = [(once(cell, scale, 1), cell) for cell in sweep_cells()]
    ranked = [cell for fires, cell in sorted(first, key=lambda fc: -(fc[0] or -1.0))]
    finalists = ranked[:3]
    if PEER_SETTINGS["dbscheduler"] not in finalists:
        finalists.append(PEER_SETTINGS["dbscheduler"])
    second = [(once(cell, final_scale, 2), cell) for cell in finalists]
    done = [(fires, cell) for fires, cell in second if fires is not None]
    chosen = max(done, key=lambda fc: fc[0])[1] if done else PEER_SETTINGS["dbscheduler"]
    return {"kind": "sweep-best", "mode": mode, "settings": chosen, "sweep": rows}


def settled() -> None:
    """Dirty pages written out before a run (the previous run's writeback is not the next's)."""
    os.sync()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=int, default=100_000, help="workload (a): due at once")
    parser.add_argument("--steady-seconds", type=int, default=60, help="workload (b): duration")
    parser.add_argument("--rate", type=int, default=1000, help="workload (b): fires per second")
    parser.add_argument("--held", type=int, default=1_000_000, help="workload (c): held triggers")
    parser.add_argument("--workloads", default="a,b,c")
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--durability", default="nosync,sync", help="nosync, sync or both")
    parser.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="runs of the contest cells: Horae and db-scheduler on (a), sync",
    )
    parser.add_argument("--other-repeats", type=int, default=1, help="runs of every other cell")
    parser.add_argument(
        "--sweep-scale", type=int, default=5_000, help="db-scheduler's sweep (0: no sweep)"
    )
    parser.add_argument(
        "--sweep-final-scale",
        type=int,
        default=20_000,
        help="db-scheduler's sweep, second stage: its best three cells and the default again",
    )
    parser.add_argument(
        "--sweep-durability",
        choices=("sync", "nosync", "all"),
        default="sync",
        help="where db-scheduler is swept (its best cell runs every durability)",
    )
    parser.add_argument(
        "--slow-scale",
        type=int,
        default=10_000,
        help="workload (a) for APScheduler and Quartz (0: --scale)",
    )
    parser.add_argument("--cap", type=int, default=600, help="seconds a run may take (timeout)")
    parser.add_argument("--settle", type=float, default=2.0, help="seconds of rest before a run")
    parser.add_argument("--plot", default="compare.png")
    parser.add_argument("--out", help="append each run's result to this JSON-lines file")
    parser.add_argument("--report", help="no run: the tables, plot and JSON of an --out file")
    args = parser.parse_args()
    wls = workloads(args)
    if args.report:
        lines = Path(args.report).read_text().splitlines()
        report([json.loads(line) for line in lines if line], wls, args.plot, {})
        return
    from horae.cli.common import require_services
    from horae.settings import get_settings

    systems = [s for s in args.systems.split(",") if s]
    modes = [m for m in MODES if m in args.durability.split(",")]
    _, dev_url = require_services(get_settings())
    ensure_python_peers()
    if any(s.startswith(("dbscheduler", "quartz")) for s in systems):
        ensure_jar()
    calibration = calibrate()
    load0 = os.getloadavg()
    began = time.monotonic()
    print("compare:", " ".join(sys.argv[1:]) or "(defaults)")
    print(
        f"compare: {os.cpu_count()} cores, load average {load0[0]:.2f} {load0[1]:.2f} "
        f"{load0[2]:.2f} at the start; calibration: a 10M-iteration CPython loop takes "
        f"{calibration} s",
        flush=True,
    )
    for system, settings in PEER_SETTINGS.items():
        print(f"settings {system}: {settings}")
    runs: list[dict[str, Any]] = []

    def keep(record: dict[str, Any]) -> None:
        runs.append(record)
        if args.out:
            with open(args.out, "a") as f:
                f.write(json.dumps(record) + "\n")

    horae = Horae()
    with contextlib.ExitStack() as stack:
        stack.enter_context(receiving())
        dbs: dict[str, Database] = {}
        if "nosync" in modes:
            dbs["nosync"] = Database(dev_url, "nosync")
        if "sync" in modes:
            dbs["sync"] = stack.enter_context(sync_cluster())
        for mode, db in dbs.items():
            print(f"postgresql {mode}: {db.settings()}", flush=True)
        if REPLICATED in modes:  # Horae alone; the peers' rows it races are the sync ones
            dbs[REPLICATED] = dbs.get("sync") or dbs.get("nosync") or Database(dev_url, "nosync")
        stack.callback(horae.cleanup)
        turn = 0
        swept: dict[str, Any] | None = None
        for mode, db in sorted(dbs.items(), key=lambda item: item[0] != args.sweep_durability):
            settings = {k: dict(v) for k, v in PEER_SETTINGS.items()}
            sweeps = args.sweep_durability in (mode, "all") and mode != REPLICATED
            if "dbscheduler" in systems and args.sweep_scale > 0 and sweeps:
                best = sweep(
                    db, mode, args.sweep_scale, args.sweep_final_scale, args.cap, args.settle
                )
                keep(best)
                swept = best["settings"]
                print(f"sweep dbscheduler {mode}: best {swept}", flush=True)
            if swept is not None:
                settings["dbscheduler"] = swept
            on_mode = contextlib.ExitStack()
            stack.enter_context(on_mode)
            if mode == REPLICATED:
                print("horae replicated: starting a private 3-broker cluster", flush=True)
                horae.replicated = on_mode.enter_context(replicated_kafka())
            of_mode = [s for s in systems if mode != REPLICATED or s == "horae"]
            for wl in wls if mode != REPLICATED else [w for w in wls if w.key == "a"]:
                most = max((repeats_of(wl, system, mode, args) for system in of_mode), default=0)
                for k in range(most):
                    due = [s for s in of_mode if k < repeats_of(wl, s, mode, args)]
                    for system in rotated(due, turn):
                        run_wl = scaled(wl, system, args.slow_scale)
                        settled()
                        time.sleep(args.settle)
                        receiver.call(receiver.PORT, "/reset", "POST")
                        started = time.monotonic()
                        if system == "horae":
                            raw = horae.run(run_wl, mode, cap_of(wl, args.cap))
                        else:
                            raw = run_peer(
                                system, run_wl, db, cap_of(wl, args.cap), settings[system]
                            )
                        r = normalize(run_wl, {**raw, "system": system})
                        brief = {
                            k: v
                            for k, v in r.items()
                            if k not in ("quantiles_ms", "decided_quantiles_ms", "tuning")
                        }
                        print(
                            f"{run_wl.title} | {system} | {mode} | run {k + 1}: "
                            f"{json.dumps(brief)} "
                            f"({time.monotonic() - started:.0f} s, load average "
                            f"{os.getloadavg()[0]:.2f})",
                            flush=True,
                        )
                        keep(
                            {
                                "kind": "run",
                                "title": run_wl.title,
                                "workload": wl.key,
                                "mode": mode,
                                "repeat": k,
                                "at": time.time(),
                                **r,
                            }
                        )
                    turn += 1
            on_mode.close()  # the 3-broker cluster is not left to load the next runs
            horae.replicated = None
    load1 = os.getloadavg()
    took = time.monotonic() - began
    print(f"compare: {took / 60:.1f} min, load average {load1[0]:.2f} at the end")
    extra = {
        "calibration_loop_s": calibration,
        "load_avg": [round(load0[0], 2), round(load1[0], 2)],
        "minutes": round(took / 60, 1),
        "cores": os.cpu_count(),
    }
    report(runs, wls, args.plot, extra)


if __name__ == "__main__":
    main()
