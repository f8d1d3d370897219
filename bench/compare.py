"""Horae side by side with the schedulers people pick instead, on the same machine, in one run.

    .venv/bin/python bench/compare.py [--scale 100000] [--steady-seconds 60] [--rate 1000]
        [--held 1000000] [--workloads a,b,c] [--systems horae,apscheduler,dbscheduler,quartz]
        [--durability both|dev|durable] [--cap 600] [--plot compare.png] [--out results.jsonl]
    .venv/bin/python bench/compare.py --report results.jsonl [--plot compare.png]

Systems (each run as its own process, figures of that process):

- ``horae``: the planner (bench/peers/horae_peer.py, through bench/planner.py's ``load`` and
  ``coldstart_and_peak``): decisions committed in Kafka transactions; on workload (b) also one
  dispatcher process delivering the fires as signed webhooks to a local receiver (bench/dispatch.py
  ``serve``);
- ``apscheduler``: APScheduler 3.11 with its SQLAlchemyJobStore, jobs run in-process
  (bench/peers/apscheduler_peer.py);
- ``dbscheduler``: db-scheduler 16.7 (HikariCP, lock-and-fetch) and ``quartz``: Quartz 2.5
  (clustered JobStoreTX), in the Java harness bench/peers/src (built by bench/peers/build when
  its jar is missing or stale), jobs run in-process.

The Python peer's packages are pyproject.toml's ``bench`` extra, installed here at the versions
of requirements.lock when missing; the Java peers need Maven and a JDK 17.

The peers count executions in-process (no delivery over the network): lateness = execution start
minus due time, which follows the commit of their claim. Horae's lateness is up to the commit
of its decision; ``decided`` lateness (``decided_at - due_at`` of each fire record) is printed
too, and on (b) its delivery lateness: the webhook's receipt at the receiver minus due time.
Each peer gets its own database (``bench_<system>``, dropped afterwards) and its documented
throughput tuning, printed below.

Workloads: (a) ``--scale`` triggers due at the same second; (b) ``--rate`` fires/s for
``--steady-seconds`` (its fires/s: tasks over the longer of those seconds and the run); (c)
``--held`` triggers held, 1,000 of them firing at once (start-up time, memory). Durability: every
workload on the dev PostgreSQL (``fsync`` off, as the dev stack runs it) and on a private
PostgreSQL cluster started here from the same binaries with production durability (``fsync`` and
``synchronous_commit`` on; the dev cluster's ``fsync=off`` is a command-line option, which ``ALTER
SYSTEM`` cannot override), removed afterwards. Kafka runs as the dev broker runs (one broker, no
fsync per commit, Kafka's default). A run a system does not finish within ``--cap`` seconds after
its due time is reported as a timeout, with what it did.

Prints one table, writes one PNG plot (throughput and lateness distributions per system) when
matplotlib is installed, and ends with one JSON line: ``<system>_<figure>`` (workload a, dev
database) and ``<system>_<figure>_durable`` for figures ``fires_per_s``, ``p50_ms`` and
``p99_ms`` (decision lateness), ``delivery_p99_ms``, ``peak_rss_mb``, ``cpu_s_per_1k``,
``startup_s`` (workloads b and c as ``<system>_steady_...`` and ``<system>_held_...``),
``<system>_timeout...`` when a run was capped or failed, and ``ratio_<system>`` = Horae's fires/s
over that system's on workload (a), durable run (``ratio_<system>_dev``: dev run). Delivery
lateness: for the peers their execution start (they run their jobs in-process: the execution is
the delivery); for Horae the receipt of its webhook POST at the local receiver on workload (b)
(``delivery_p50/p99/max_ms``, ``delivered``, ``dispatcher_cpu_s_per_1k`` in its result), ``null``
on (a) and (c), whose fires are decided but not delivered here (the decision figures do not
include the dispatcher: it runs in a process of its own).

``--out`` appends each run's result as it ends; ``--report`` builds the table, the plot and the
JSON line from such a file (the last result of each workload, system and database wins), for
workloads run by separate invocations.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
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

from horae.cli.common import require_services
from horae.devstack.postgres import PostgresCluster
from horae.settings import get_settings

BENCH = Path(__file__).resolve().parent
PEERS = BENCH / "peers"
JAR = PEERS / "target" / "peers.jar"
SYSTEMS = ("horae", "apscheduler", "dbscheduler", "quartz")
FIGURES = (
    "fires_per_s",
    "p50_ms",
    "p99_ms",
    "delivery_p99_ms",
    "peak_rss_mb",
    "cpu_s_per_1k",
    "startup_s",
)
HEADS = (
    "fires/s",
    "decision p50 ms",
    "decision p99 ms",
    "delivery p99 ms",
    "peak RSS MB",
    "CPU s/1k fires",
    "start-up s",
)
NAMES = {"a": "", "b": "steady_", "c": "held_"}  # a workload's part of a JSON key
SETUP_S = 900  # a run's own setup (inserts, load, cold start) on top of --cap
HELD_FIRING = 1000
JAVA = ("java", "-Xms256m", "-Xmx2g", "-jar")


@dataclass(frozen=True)
class Workload:
    key: str  # "a", "b", "c"
    name: str  # JSON key part: "" (a), "steady_", "held_"
    title: str
    n: int  # firing
    rate: int  # due per second (n: all at once)
    held: int  # never firing during the run


def workloads(args: argparse.Namespace) -> list[Workload]:
    every = {
        "a": Workload("a", "", f"(a) {args.scale:,} due at once", args.scale, args.scale, 0),
        "b": Workload(
            "b",
            "steady_",
            f"(b) {args.rate:,}/s for {args.steady_seconds} s",
            args.rate * args.steady_seconds,
            args.rate,
            0,
        ),
        "c": Workload(
            "c",
            "held_",
            f"(c) {args.held:,} held, {HELD_FIRING:,} firing",
            HELD_FIRING,
            HELD_FIRING,
            args.held,
        ),
    }
    return [every[k] for k in args.workloads.split(",")]


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
                "select name, setting from pg_settings where name in"
                " ('fsync', 'synchronous_commit', 'full_page_writes') order by name"
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
def durable_cluster() -> Iterator[Database]:
    """A private PostgreSQL cluster with production durability, stopped and removed after."""
    home = Path(tempfile.mkdtemp(prefix="horae-bench-pg-"))
    cluster = PostgresCluster(home, _free_port(), fsync=True)
    try:
        cluster.start()
        yield Database(cluster.url, "durable")
    finally:
        cluster.stop()
        shutil.rmtree(home, ignore_errors=True)


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


def _run(system: str, cmd: list[str], timeout_s: float) -> dict[str, Any]:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return {"system": system, "timeout": True, "executed": None, "error": "killed at the cap"}
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout)[-1500:]
        return {"system": system, "timeout": False, "error": f"exit {proc.returncode}: {tail}"}
    return _last_json(proc.stdout)


def run_peer(system: str, wl: Workload, db: Database, cap: int) -> dict[str, Any]:
    name = f"bench_{system}"
    db.create(name)
    try:
        tail = [str(wl.n), str(wl.rate), str(cap), str(wl.held)]
        if system == "apscheduler":
            cmd = [sys.executable, str(PEERS / "apscheduler_peer.py"), db.sqlalchemy(name), *tail]
        else:
            url, user = db.jdbc(name)
            cmd = [*JAVA, str(JAR), system, url, user, *tail]
        return _run(system, cmd, cap + SETUP_S)
    finally:
        db.drop(name)


class Horae:
    """Horae's runs: one loaded prefix per workload (a steady run's one-shot instants are spent,
    so it loads again), or one loaded before (``loaded``: workload key -> prefix, as a run
    printed it); topics dropped at the end."""

    def __init__(self, loaded: dict[str, str] | None = None) -> None:
        self.loaded = dict(loaded or {})
        self.prefixes: list[str] = list(self.loaded.values())

    def _horae(self, *args: str, timeout_s: float) -> dict[str, Any]:
        cmd = [sys.executable, str(PEERS / "horae_peer.py"), *args]
        return _run("horae", cmd, timeout_s)

    def run(self, wl: Workload, cap: int) -> dict[str, Any]:
        prefix = self.loaded.pop(wl.key, None)
        if prefix is None:
            prefix = f"bcmp{uuid.uuid4().hex[:6]}."
            self.prefixes.append(prefix)
            print(f"horae: loading {wl.n + wl.held:,} definitions under {prefix}", flush=True)
            # ingest runs at 500-2,500 definitions/s on this machine, depending on its load
            setup_s = SETUP_S + (wl.n + wl.held) // 250
            loaded = self._horae(
                "load", prefix, str(wl.n), str(wl.rate), str(wl.held), timeout_s=setup_s
            )
            if "error" in loaded:
                return loaded
        result = self._horae(
            "measure", prefix, str(wl.n), str(wl.rate), str(wl.held), timeout_s=cap + SETUP_S
        )
        if wl.rate == wl.n and "error" not in result:
            self.loaded[wl.key] = prefix  # the next midnight fires the same set again
        return result

    def cleanup(self) -> None:
        for prefix in self.prefixes:
            self._horae("drop", prefix, timeout_s=300)


# --- output ------------------------------------------------------------------------------------
def normalize(wl: Workload, result: dict[str, Any]) -> dict[str, Any]:
    """``result`` with the figures every system reports the same way: ``n``; a steady run's
    fires/s at most its rate (it lasts its seconds however early the last fire comes: fires/s =
    n / max(seconds, span) = min(rate, n / span)); delivery lateness (the peers': their
    execution start, which is their delivery; Horae's: its own result's, receipt at the
    receiver, when it delivered)."""
    r = dict(result)
    r.setdefault("n", wl.n)
    if wl.rate < wl.n and r.get("fires_per_s"):
        r["fires_per_s"] = min(float(wl.rate), float(r["fires_per_s"]))
    if "delivery_p99_ms" not in r:
        peer = r.get("system") != "horae" and r.get("executed")
        r["delivery_p99_ms"] = r.get("p99_ms") if peer else None
    return r


def _cell(result: dict[str, Any], figure: str) -> str:
    value = result.get(figure)
    if value is None:
        return "-"
    if figure == "fires_per_s":
        return f"{value:,.0f}"
    if figure.endswith("_ms"):
        return f"{value:,}"
    return f"{value:,.3f}" if figure == "cpu_s_per_1k" else f"{value:,.1f}"


def _status(result: dict[str, Any]) -> str:
    if result.get("error") and not result.get("timeout"):
        return "error"
    if result.get("timeout"):
        done = result.get("executed")
        return f"TIMEOUT ({done:,}/{result['n']:,} done)" if done is not None else "TIMEOUT"
    dup = result.get("duplicates", 0)
    return "ok" + (f", {dup} duplicates" if dup else "")


def table(results: dict[tuple[str, str, str], dict[str, Any]], wls: list[Workload]) -> str:
    """One Markdown table: a row per workload, system and database that was run."""
    head = ["workload", "system", "database", *HEADS, "status"]
    rows = [head]
    for wl in wls:
        for system in SYSTEMS:
            for mode in ("dev", "durable"):
                r = results.get((wl.key, system, mode))
                if r is not None:
                    cells = [_cell(r, f) for f in FIGURES]
                    rows.append([wl.title, system, mode, *cells, _status(r)])
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    rule = ["-" * w for w in widths]
    for i in range(3, 3 + len(FIGURES)):
        rule[i] = rule[i][:-1] + ":"
    rows.insert(1, rule)
    lines = (" | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows)
    return "\n".join(f"| {line} |" for line in lines)


def summary(results: dict[tuple[str, str, str], dict[str, Any]]) -> dict[str, Any]:
    """The last JSON line: ``<system>_<workload part><figure>[_durable]`` for every figure of
    every run (``horae_..._decided_p50/p99_ms`` too), ``..._timeout`` for a capped (true) or
    failed (false) run, and the ratios of workload (a)."""
    out: dict[str, Any] = {}
    for (wl, system, mode), r in sorted(results.items()):
        suffix = "_durable" if mode == "durable" else ""
        extra = ("decided_p50_ms", "decided_p99_ms") if system == "horae" else ()
        for f in (*FIGURES, *extra):
            out[f"{system}_{NAMES[wl]}{f}{suffix}"] = r.get(f)
        if r.get("timeout") or r.get("error"):
            out[f"{system}_{NAMES[wl]}timeout{suffix}"] = bool(r.get("timeout"))
    for system in SYSTEMS[1:]:
        for mode, suffix in (("durable", ""), ("dev", "_dev")):
            mine = results.get(("a", "horae", mode), {}).get("fires_per_s")
            theirs = results.get(("a", system, mode), {}).get("fires_per_s")
            if mine and theirs:
                out[f"ratio_{system}{suffix}"] = round(mine / theirs, 1)
    return out


GOAL_RATIOS = {"apscheduler": 10.0, "dbscheduler": 2.0, "quartz": 2.0}


def goals(results: dict[tuple[str, str, str], dict[str, Any]]) -> list[str]:
    """Issue 15's goals against this run: Horae's fires/s on (a) at least ``GOAL_RATIOS`` times
    each peer's; on (b) a lower decision p99 lateness than every peer (a peer's capped or failed
    run counts as met). One line per goal and database that was run."""
    s = summary(results)
    lines = []
    for mode, suffix in (("durable", ""), ("dev", "_dev")):
        for peer, goal in GOAL_RATIOS.items():
            ratio = s.get(f"ratio_{peer}{suffix}")
            if ratio is not None:
                verdict = "met" if ratio >= goal else "MISSED"
                lines.append(f"goal (a) {mode}: {ratio}x {peer} (>= {goal:g}x): {verdict}")
        mine = results.get(("b", "horae", mode), {}).get("p99_ms")
        for peer in GOAL_RATIOS:
            r = results.get(("b", peer, mode))
            if mine is None or r is None:
                continue
            theirs = r.get("p99_ms")
            met = r.get("timeout") or r.get("error") or (theirs is not None and mine < theirs)
            verdict = "met" if met else "MISSED"
            lines.append(f"goal (b) {mode}: p99 {mine:,} ms vs {peer} {theirs} ms: {verdict}")
        delivered = results.get(("b", "horae", mode), {}).get("delivery_p99_ms")
        for peer in GOAL_RATIOS:
            theirs = results.get(("b", peer, mode), {}).get("delivery_p99_ms")
            if delivered is not None and theirs is not None:
                lines.append(
                    f"(b) {mode} delivery p99: Horae {delivered:,} ms (POST received) vs {peer} "
                    f"{theirs:,} ms (execution start)"
                )
    return lines


def plot(
    results: dict[tuple[str, str, str], dict[str, Any]], wls: list[Workload], path: str
) -> str:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "no plot: matplotlib is not installed (the bench extra of pyproject.toml)"
    fig, axes = plt.subplots(len(wls), 2, figsize=(12, 4 * len(wls)), squeeze=False)
    for row, wl in zip(axes, wls, strict=True):
        bars, dists = row
        x = range(len(SYSTEMS))
        for k, mode in enumerate(("dev", "durable")):
            values = [results.get((wl.key, s, mode), {}).get("fires_per_s") or 0 for s in SYSTEMS]
            bars.bar([i + 0.4 * k for i in x], values, width=0.4, label=f"{mode} PostgreSQL")
        bars.set_xticks([i + 0.2 for i in x], SYSTEMS)
        bars.set_yscale("log")
        bars.set_ylabel("fires/s (log)")
        bars.set_title(f"{wl.title}: throughput")
        bars.legend()
        for k, s in enumerate(SYSTEMS):
            for mode, style in (("dev", ":"), ("durable", "-")):
                q = results.get((wl.key, s, mode), {}).get("quantiles_ms")
                if q:
                    dists.plot(q, range(len(q)), style, color=f"C{k}", label=f"{s} ({mode})")
        dists.set_xscale("symlog")
        dists.set_xlabel("lateness, ms (symlog)")
        dists.set_ylabel("percentile")
        dists.set_title(f"{wl.title}: lateness distribution")
        dists.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    return f"plot: {path}"


# --- main --------------------------------------------------------------------------------------
def report(
    results: dict[tuple[str, str, str], dict[str, Any]], wls: list[Workload], plot_path: str
) -> None:
    """The end of a run: tunings, notes, the table, goals, the plot and the JSON line (the
    workloads of ``wls`` that have a result)."""
    wls = [wl for wl in wls if any(key[0] == wl.key for key in results)]
    print()
    tunings: dict[str, str] = {}
    for (_, system, _), r in sorted(results.items()):
        if r.get("tuning"):
            tunings[system] = r["tuning"]
    for system in SYSTEMS:
        if system in tunings:
            print(f"tuning {system}: {tunings[system]}")
    print(
        "database dev: the dev stack's PostgreSQL (fsync off); durable: a private cluster, fsync "
        "and synchronous_commit on. Horae commits to Kafka (one broker, Kafka's default flush, "
        "no fsync per commit), so its two rows are two runs of the same thing. Decision "
        "lateness: peers at execution start (after their claim's commit), Horae at its "
        "decision's commit (decided_p50/p99_ms: at the decision's stamp). Delivery lateness: "
        "peers' jobs run in-process, counted (execution start); Horae's on (b): a signed "
        "webhook POST received by a local receiver (one dispatcher process), not delivered on "
        "(a) and (c) ('-'). CPU: the system's process only (not PostgreSQL's, not Kafka's; on "
        "(b) not Horae's dispatcher's, dispatcher_cpu_s_per_1k in the JSON)."
    )
    print(table(results, wls))
    for line in goals(results):
        print(line)
    print(plot(results, wls, plot_path))
    print(json.dumps(summary(results)))


def load_results(path: str, wls: list[Workload]) -> dict[tuple[str, str, str], dict[str, Any]]:
    """The results of a ``--out`` file, the last of each (workload, system, database)."""
    by_key = {wl.key: wl for wl in wls}
    results: dict[tuple[str, str, str], dict[str, Any]] = {}
    for line in Path(path).read_text().splitlines():
        if line.strip():
            r = json.loads(line)
            wl = by_key.get(r["workload"])
            if wl is not None:
                results[(wl.key, r["system"], r["mode"])] = normalize(wl, r)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=int, default=100_000, help="workload (a): due at once")
    parser.add_argument("--steady-seconds", type=int, default=60, help="workload (b): duration")
    parser.add_argument("--rate", type=int, default=1000, help="workload (b): fires per second")
    parser.add_argument("--held", type=int, default=1_000_000, help="workload (c): held triggers")
    parser.add_argument("--workloads", default="a,b,c")
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--durability", choices=("both", "dev", "durable"), default="both")
    parser.add_argument("--cap", type=int, default=600, help="seconds a run may take (timeout)")
    parser.add_argument("--plot", default="compare.png")
    parser.add_argument("--out", help="append each run's result to this JSON-lines file")
    parser.add_argument("--report", help="no run: the table, plot and JSON of an --out file")
    parser.add_argument(
        "--horae-loaded",
        action="append",
        default=[],
        metavar="WORKLOAD=PREFIX",
        help="Horae's definitions for this workload loaded before, under this prefix",
    )
    args = parser.parse_args()
    wls = workloads(args)
    if args.report:
        report(load_results(args.report, wls), wls, args.plot)
        return
    systems = args.systems.split(",")
    _, dev_url = require_services(get_settings())
    ensure_python_peers()
    if any(s in ("dbscheduler", "quartz") for s in systems):
        ensure_jar()
    print("compare:", " ".join(sys.argv[1:]) or "(defaults)")
    print(
        f"compare: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start "
        "(a shared machine: other processes run too)",
        flush=True,
    )
    results: dict[tuple[str, str, str], dict[str, Any]] = {}
    horae = Horae(dict(item.split("=", 1) for item in args.horae_loaded))
    with contextlib.ExitStack() as stack:
        dbs: dict[str, Database] = {}
        if args.durability in ("both", "dev"):
            dbs["dev"] = Database(dev_url, "dev")
        if args.durability in ("both", "durable"):
            dbs["durable"] = stack.enter_context(durable_cluster())
        for mode, db in dbs.items():
            print(f"database {mode}: {db.settings()}", flush=True)
        stack.callback(horae.cleanup)
        for wl in wls:
            for mode, db in dbs.items():
                for system in systems:
                    started = time.monotonic()
                    if system == "horae":
                        raw = horae.run(wl, args.cap)
                    else:
                        raw = run_peer(system, wl, db, args.cap)
                    r = normalize(wl, {"system": system, **raw})
                    results[(wl.key, system, mode)] = r
                    brief = {k: v for k, v in r.items() if k not in ("quantiles_ms", "tuning")}
                    print(
                        f"{wl.title} | {system} | {mode}: {json.dumps(brief)} "
                        f"({time.monotonic() - started:.0f} s, load average "
                        f"{os.getloadavg()[0]:.1f})",
                        flush=True,
                    )
                    if args.out:
                        record = {"workload": wl.key, "mode": mode, "at": time.time(), **r}
                        with open(args.out, "a") as f:
                            f.write(json.dumps(record) + "\n")
    report(results, wls, args.plot)


if __name__ == "__main__":
    main()
