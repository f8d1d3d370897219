"""Planner benchmark on the local broker (``horae dev up`` first, or HORAE_KAFKA_BOOTSTRAP).

    .venv/bin/python bench/planner.py [--triggers 1000000] [--peak 100000] [--partitions 12]
        [--phase all|load|coldstart --prefix P]   # load once, then time (or profile) the cold
                                              # start and the peak, as often as you like
    .venv/bin/python bench/planner.py --phase steady [--rate 1000] [--seconds 60] [--triggers N]
    .venv/bin/python bench/planner.py --planners 2 [--triggers N] [--peak N]   # scale-out

1. load: ``--triggers`` signed definitions are produced (by two generator processes) and a first
   planner ingests them (signature, validation, state record per trigger, in transactions);
2. cold start: a fresh planner process joins, owns every partition and rebuilds its due index from
   the planner-state changelog and the definitions — timed, with its RSS growth per trigger;
3. peak: ``--peak`` of the triggers fire at the same instant (``0 0 * * *`` UTC); the planner's
   virtual clock is moved to just before the next midnight (its clock gate widened for that), and
   the time from that instant until all of them are committed is measured. Fires/s is that
   committed throughput. The others fire on a date months away, so nothing else is due. The
   peak's ramp: when its first, median and last decisions were committed (a transaction holds
   at most ``HORAE_PLANNER_TXN_MAX_DECISIONS`` or fills for ``HORAE_PLANNER_TXN_MAX_MS``).

Prints its figures; the last line is JSON:
``{"bytes_per_trigger": ..., "cold_start_s": ..., "cold_start_cpu_s": ..., "fires_per_s": ...,
"peak_100k_s": ..., "peak_cpu_s": ..., "first_decision_ms": ..., "p50_ms": ..., "p100_ms": ...,
"peak_instant": ..., "ingest_per_s": ...,
"ingest_cpu_us": ...}`` (the process's CPU seconds during the cold start and the peak — on a
shared machine the steadier figures —, the peak's epoch second, and the load's definitions
ingested per second and CPU µs per definition; the ingest figures are absent with
``--phase coldstart``, and are the whole last line with ``--phase load``).

``--phase steady``: ``--rate × --seconds`` of the ``--triggers`` are one-shot, ``--rate`` due each
second from an epoch second two days ahead (the rest months away); after the load a fresh planner
cold-starts, its virtual clock is moved to one second before the first of them, and the run ends
when all are committed. Decision lateness is ``decided_at − due_at`` of each committed fire
record (read back from the fires topic, read_committed, which also counts duplicates); commit
lateness is the commit of the decision − due (from the committed count sampled every 10 ms).
Last line: ``{"decision_p50_ms", "decision_p99_ms", "decision_max_ms", "commit_p50_ms",
"commit_p99_ms", "commit_max_ms", "decided", "duplicates", ...}``.

The Kafka exactly-once ceiling, in the same run (``--phase all``): the records the peak wrote
(its fire records, planner-state records and dispatch orders, read back read_committed) are
produced again, by a minimal transactional producer (confluent-kafka, the planner's producer
settings) into copies of those topics on the same broker, in transactions of the planner's
sizes (one decide chunk of fires first, each next twice as large, up to
``txn_max_decisions``), each topic's records in their order and share; fires/s of that is
``ceiling_fires_per_s``, and ``ratio_ceiling`` = ``fires_per_s`` over it (goal >= 0.5). What it
leaves out: deciding, encoding, and the input offsets each planner transaction also commits.

Scale-out, ``--planners N`` (N > 1, with ``--phase all``): after the load, N planner processes
(slots ``bench0`` …, one consumer group, each its own transactional id) share the partitions;
once every trigger is indexed by exactly one of them and their assignment has been still for a
second, one virtual clock offset is handed to all, and the peak is timed from its instant to the
last commit of any of them. Printed: each process's fires and fires/s (its fires over the time to
its own last commit) and the total (``fires_per_s``); the ceiling as above. No cold-start or
memory figures then (``planners``, ``per_planner`` in the JSON instead).

bench/compare.py (through bench/peers/horae_peer.py) imports ``load``, ``coldstart_and_peak``,
``fire_lateness``, ``commit_lateness`` and ``quantile``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import queue
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import IO, Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from machine import calibrate

from horae.cli.common import require_services
from horae.contracts import events as ev
from horae.contracts import signing
from horae.contracts.codec import decode, encode
from horae.contracts.topics import PRODUCER_DEFAULTS, Topic, topic_name
from horae.kafka.admin import Plan, admin_client, apply, delete_under
from horae.kafka.config import client_config
from horae.ports import WallClock
from horae.projections.rebuild import end_offsets
from horae.settings import get_settings
from horae.streams.planner.clock import ensure_clock_topic
from horae.streams.planner.index import INDEX, set_planner_index
from horae.streams.planner.rebuild import FreezeAfterRebuild
from horae.streams.planner.worker import DECIDE_CHUNK, TXN_GROWTH, Planner, PlannerConfig

TENANT, KEY_ID, SECRET = "bench", "bench-1", b"bench-secret"
#: what the planner writes in a peak (the ceiling produces the same records again)
OUTPUTS = (Topic.FIRES, Topic.PLANNER_STATE, Topic.LANE_ON_TIME)
#: a planner member's report lines on its stdout start with this
MARK = "@member "
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


def _target(i: int, url: str | None) -> ev.Target:
    if url is None:
        return ev.Target(kind=ev.TargetKind.WEBHOOK, url=f"https://hooks.example/{i % 97}")
    return ev.Target(kind=ev.TargetKind.WEBHOOK, url=url, secret_refs=("bench",))


def _payload(i: int, peak: int, steady: tuple[int, int] | None) -> bytes:
    """A steady one-shot trigger's payload: its instant (``due_ms``), for a receiver's lateness."""
    if steady is None or i >= peak:
        return b""
    return json.dumps({"due_ms": (steady[0] + i // steady[1]) * 1000}).encode()


def _generate(
    args: tuple[str, str, int, int, int, int, tuple[int, int] | None, str | None],
) -> int:
    bootstrap, prefix, start, stop, peak, month, steady, url = args
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
            target=_target(i, url),
            payload=_payload(i, peak, steady),
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
        snapshot_changes=get_settings().planner.snapshot_changes,
        txn_max_decisions=get_settings().planner.txn_max_decisions,
        txn_max_s=get_settings().planner.txn_max_ms / 1000.0,
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
    url: str | None = None,
) -> dict[str, int]:
    """Produce ``triggers`` signed definitions and ingest them; the first ``peak`` fire at the
    next midnight UTC, or with ``steady = (base, rate)`` once each, ``rate`` per second from the
    epoch second ``base`` on (payload ``{"due_ms": <instant>}``); the others months away. Webhook
    targets: ``url`` with secret ref ``bench`` when given, else ``https://hooks.example/<n>``
    (never delivered). Returns definitions ingested per second
    (``ingest_per_s``) and the process's CPU microseconds per definition (``ingest_cpu_us``)."""
    replicas = get_settings().topic_replication_factor or 1  # 3: compare.py's replicated row
    apply(admin_client(bootstrap), Plan(prefix, partitions, replicas))
    ensure_clock_topic(bootstrap, prefix)
    month = (datetime.now(UTC).month + 5) % 12 + 1
    started = time.monotonic()
    chunks = [
        (bootstrap, prefix, k * triggers // 2, (k + 1) * triggers // 2, peak, month, steady, url)
        for k in range(2)
    ]
    with multiprocessing.Pool(2) as pool:
        produced = sum(pool.map(_generate, chunks))
    print(f"produced {produced} signed definitions in {time.monotonic() - started:.1f} s")
    planner = Planner(_config(bootstrap, prefix, "bench"), gc=FreezeAfterRebuild())
    stop = threading.Event()
    thread = threading.Thread(target=planner.run, args=(stop,))
    started, cpu = time.monotonic(), time.process_time()
    thread.start()
    while sum(len(i) for i in planner.indexes.values()) < triggers:
        time.sleep(0.5)
    stop.set()
    thread.join()
    took, cpu = time.monotonic() - started, time.process_time() - cpu
    print(
        f"ingested {triggers} definitions in {took:.1f} s ({triggers / took:,.0f}/s), "
        f"{cpu / triggers * 1e6:.0f} us CPU each"
    )
    return {"ingest_per_s": round(triggers / took), "ingest_cpu_us": round(cpu / triggers * 1e6)}


def coldstart_and_peak(
    bootstrap: str,
    prefix: str,
    triggers: int,
    peak: int,
    curve: list[tuple[float, float]] | None = None,
    on_offset: Callable[[float], None] | None = None,
) -> dict[str, Any]:
    """Cold start, then the peak; ``curve``, when given, receives ``(seconds since the first
    instant, fires committed)`` every 10 ms of the peak; ``on_offset``, when given, gets the
    virtual clock's offset (seconds ahead of the wall clock) once it is set for the peak."""
    offset = 0.0
    curve = [] if curve is None else curve
    planner = Planner(
        _config(bootstrap, prefix, "bench"),
        clock=WallClock(lambda: time.time() + offset),
        gc=FreezeAfterRebuild(),  # as the planner process does
    )
    before = _rss()
    stop = threading.Event()
    thread = threading.Thread(target=planner.run, args=(stop,))
    started, cold_cpu = time.monotonic(), time.process_time()
    thread.start()
    while sum(len(i) for i in planner.indexes.values()) < triggers:
        time.sleep(0.05)
    cold = time.monotonic() - started
    cold_cpu = time.process_time() - cold_cpu
    per_trigger = (_rss() - before) / triggers
    snapshots = planner.snapshots
    loaded = 0 if snapshots is None else snapshots.loaded
    replayed = 0 if snapshots is None else sum(snapshots.replayed.values())
    print(
        f"cold start: {triggers} triggers owned and indexed in {cold:.1f} s, "
        f"{per_trigger:.0f} B/trigger (RSS growth); {loaded} partitions from their snapshots, "
        f"{replayed} changelog records read"
    )
    # The peak triggers' next instant is the earliest of all (the others fire months away); it
    # is the next midnight after their last decided one, so the phase can be run again.
    midnight = min(
        due for index in list(planner.indexes.values()) if (due := index.earliest_due()) is not None
    )
    outputs = [topic_name(t, prefix) for t in OUTPUTS]
    starts = {f"{t}:{p}": o for (t, p), o in end_offsets(bootstrap, outputs).items()}
    offset = midnight - 1.0 - time.time()  # one second before the peak instant
    if on_offset is not None:
        on_offset(offset)
    base = _fired(planner)
    cpu = time.process_time()
    real_instant = time.monotonic() + 1.0
    while (committed := _fired(planner) - base) < peak:
        curve.append((time.monotonic() - real_instant, committed))
        time.sleep(0.005)
    peak_s = time.monotonic() - real_instant
    curve.append((peak_s, committed))
    ramp = peak_ramp(curve, peak)
    cpu = time.process_time() - cpu
    if snapshots is not None:  # the next start loads the snapshots this run's planner owes
        while snapshots.due(planner.indexes) and time.monotonic() - real_instant < peak_s + 300:
            time.sleep(0.1)
        time.sleep(2 * planner.config.tick_s)  # the last one is committed with the next batch
    stop.set()
    thread.join()
    print(
        f"peak: {peak} instants committed {peak_s:.2f} s after the first was due "
        f"({peak / peak_s:,.0f} fires/s); the first committed after {ramp['first_decision_ms']} "
        f"ms, half after {ramp['p50_ms']} ms, the last after {ramp['p100_ms']} ms"
    )
    return {
        "bytes_per_trigger": round(per_trigger),
        "cold_start_s": round(cold, 2),
        "cold_start_cpu_s": round(cold_cpu, 2),
        "fires_per_s": round(peak / peak_s),
        "peak_100k_s": round(peak_s, 2),
        "peak_cpu_s": round(cpu, 2),
        **ramp,
        "peak_instant": midnight,
        "peak_starts": starts,
        "index": INDEX.kind,
        "snapshots_loaded": loaded,
        "changelog_records_read": replayed,
    }


def member(bootstrap: str, prefix: str, slot: str) -> None:
    """One of ``--planners N`` (a subprocess): a planner in slot ``slot`` whose virtual clock
    offset comes on stdin (``go <offset>``); prints JSON lines (after :data:`MARK`) on stdout:
    ``{"held", "parts", "earliest"}`` every 0.1 s until then, ``{"fired", "t"}`` (wall time) at
    each change of its committed fires after, ``{"done", "fired", "last_t", "cpu_s"}`` once stdin
    says ``stop``."""
    offset = 0.0
    planner = Planner(
        _config(bootstrap, prefix, slot),
        clock=WallClock(lambda: time.time() + offset),
        gc=FreezeAfterRebuild(),
    )
    stop = threading.Event()
    thread = threading.Thread(target=planner.run, args=(stop,))
    thread.start()
    orders: queue.Queue[str] = queue.Queue()

    def read() -> None:
        for line in sys.stdin:
            orders.put(line.strip())

    threading.Thread(target=read, daemon=True).start()

    def say(**fields: Any) -> None:
        print(MARK + json.dumps(fields), flush=True)

    while True:
        try:
            order = orders.get(timeout=0.1)
            break
        except queue.Empty:
            indexes = list(planner.indexes.values())
            dues = [due for i in indexes if (due := i.earliest_due()) is not None]
            say(held=sum(len(i) for i in indexes), parts=len(indexes),
                earliest=min(dues) if dues else None)  # fmt: skip
    offset = float(order.split()[1])
    base, cpu = _fired(planner), time.process_time()
    fired, last_t = 0.0, time.time()
    while orders.empty():
        if (now := _fired(planner) - base) != fired:
            fired, last_t = now, time.time()
            say(fired=fired, t=last_t)
        time.sleep(0.005)
    cpu = time.process_time() - cpu
    stop.set()
    thread.join()
    say(done=True, fired=fired, last_t=last_t, cpu_s=round(cpu, 2))


def _lines(stream: IO[str], into: queue.Queue[tuple[int, dict[str, Any]]], k: int) -> None:
    for line in stream:
        if line.startswith(MARK):
            into.put((k, json.loads(line[len(MARK) :])))


def scale_out(bootstrap: str, prefix: str, triggers: int, peak: int, n: int) -> dict[str, Any]:
    """The peak across ``n`` planner processes (see the module docstring)."""
    env = dict(os.environ, HORAE_LOG_LEVEL="WARNING")
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "--member", f"bench{k}", "--prefix", prefix],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for k in range(n)
    ]
    lines: queue.Queue[tuple[int, dict[str, Any]]] = queue.Queue()
    for k, proc in enumerate(procs):
        assert proc.stdout is not None
        threading.Thread(target=_lines, args=(proc.stdout, lines, k), daemon=True).start()
    try:
        latest: dict[int, dict[str, Any]] = {}
        started, still_since, seen = time.monotonic(), time.monotonic(), ""
        while True:
            k, line = lines.get(timeout=600)
            latest[k] = line
            held = [latest.get(j, {}) for j in range(n)]
            state = json.dumps([(h.get("held"), h.get("parts")) for h in held])
            if state != seen:
                seen, still_since = state, time.monotonic()
            ready = sum(h.get("held") or 0 for h in held) == triggers
            still = time.monotonic() - still_since >= 1.0
            if ready and still and all(h.get("parts") for h in held):
                break
        print(
            f"{n} planners: every trigger indexed once, assignment still, "
            f"{time.monotonic() - started:.1f} s after they started "
            f"(partitions {[h['parts'] for h in held]}, triggers {[h['held'] for h in held]})"
        )
        midnight = min(h["earliest"] for h in held if h["earliest"] is not None)
        outputs = [topic_name(t, prefix) for t in OUTPUTS]
        starts = {f"{t}:{p}": o for (t, p), o in end_offsets(bootstrap, outputs).items()}
        offset = midnight - 1.0 - time.time()
        instant = time.time() + 1.0
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write(f"go {offset}\n")
            proc.stdin.flush()
        fired = [0.0] * n
        while sum(fired) < peak:
            k, line = lines.get(timeout=600)
            if "fired" in line:
                fired[k] = line["fired"]
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("stop\n")
            proc.stdin.flush()
        done: dict[int, dict[str, Any]] = {}
        while len(done) < n:
            k, line = lines.get(timeout=120)
            if line.get("done"):
                done[k] = line
    finally:
        for proc in procs:
            if proc.stdin is not None and not proc.stdin.closed:
                with contextlib.suppress(BrokenPipeError):
                    proc.stdin.close()
        for proc in procs:
            proc.wait(120)
    per = [
        {
            "slot": f"bench{k}",
            "fires": round(done[k]["fired"]),
            "fires_per_s": round(done[k]["fired"] / (done[k]["last_t"] - instant)),
            "cpu_s": done[k]["cpu_s"],
        }
        for k in range(n)
    ]
    peak_s = max(d["last_t"] for d in done.values()) - instant
    for p in per:
        print(f"  planner {p['slot']}: {p['fires']} fires, {p['fires_per_s']:,} fires/s, "
              f"{p['cpu_s']} s CPU")  # fmt: skip
    print(
        f"peak across {n} planners: {peak} instants committed {peak_s:.2f} s after the first was "
        f"due ({peak / peak_s:,.0f} fires/s in all)"
    )
    return {
        "planners": n,
        "fires_per_s": round(peak / peak_s),
        "peak_100k_s": round(peak_s, 2),
        "per_planner": per,
        "peak_instant": midnight,
        "peak_starts": starts,
        "index": INDEX.kind,
    }


def ceiling(bootstrap: str, prefix: str, starts: dict[str, int], peak: int) -> dict[str, Any]:
    """The Kafka exactly-once ceiling (see the module docstring), from the peak's records
    (``starts``: ``"topic:partition"`` -> the offset the peak began at)."""
    records: dict[str, list[tuple[int, bytes | None, bytes | None]]] = {}
    consumer = Consumer(
        client_config(
            bootstrap,
            {"group.id": f"bench-ceiling-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False,
             "isolation.level": "read_committed", "enable.partition.eof": True},
        )
    )  # fmt: skip
    parts = []
    for where, at in starts.items():
        topic, partition = where.rsplit(":", 1)
        parts.append(TopicPartition(topic, int(partition), at))
    consumer.assign(parts)
    left = {(tp.topic, tp.partition) for tp in parts}
    while left:
        msg = consumer.poll(10)
        if msg is None:
            break
        err = msg.error()
        if err is not None:
            if err.code() == KafkaError._PARTITION_EOF:
                left.discard((msg.topic(), msg.partition()))
                continue
            raise KafkaException(err)
        name, part = str(msg.topic()), int(msg.partition() or 0)
        records.setdefault(name, []).append((part, msg.key(), msg.value()))
    consumer.close()
    fires_topic = topic_name(Topic.FIRES, prefix)
    fires = len(records.get(fires_topic, []))
    copy = f"{prefix}ceiling."
    counts = {name[len(prefix) :]: 1 + max(p for p, _, _ in recs) for name, recs in records.items()}
    apply(admin_client(bootstrap), Plan(copy, max(counts.values()), 1))
    producer = Producer(
        client_config(
            bootstrap,
            {**PRODUCER_DEFAULTS, "transactional.id": f"bench-ceiling-{uuid.uuid4().hex[:6]}"},
        )
    )
    producer.init_transactions(30)
    share = {name: len(recs) / max(fires, 1) for name, recs in records.items()}
    sent = dict.fromkeys(records, 0)
    size, done = DECIDE_CHUNK, 0
    started = time.monotonic()
    while done < fires:
        n = min(size, fires - done)
        producer.begin_transaction()
        for name, recs in records.items():
            upto = len(recs) if done + n >= fires else round((done + n) * share[name])
            target = copy + name[len(prefix) :]
            for part, key, value in recs[sent[name] : upto]:
                producer.produce(target, value, key, partition=part)
                producer.poll(0)
            sent[name] = max(sent[name], upto)
        producer.commit_transaction(60)
        done += n
        size = min(size * TXN_GROWTH, PlannerConfig.txn_max_decisions)
    took = time.monotonic() - started
    rate = fires / took if took else 0.0
    print(
        f"ceiling: the peak's {sum(len(r) for r in records.values())} records "
        f"({fires} fires) produced again in transactions in {took:.2f} s ({rate:,.0f} fires/s)"
    )
    return {"ceiling_fires_per_s": round(rate), "ceiling_records": sum(sent.values())}


def peak_ramp(curve: list[tuple[float, float]], peak: int) -> dict[str, int]:
    """When (ms after the instant) the first, the median and the last decision of a peak were
    committed, from ``(seconds since the instant, decisions committed)`` samples: a peak that
    streams into the ledger is a ramp (its median well before its last), one transaction a step."""

    def reached(n: float) -> int:
        return round(1000 * next(t for t, done in curve if done >= n))

    return {
        "first_decision_ms": max(0, reached(1)),
        "p50_ms": max(0, reached(peak / 2)),
        "p100_ms": max(0, reached(peak)),
    }


def fire_lateness(
    bootstrap: str, prefix: str, since: int, expected: int
) -> tuple[list[float], int]:
    """Decision lateness (ms) of the committed fire records due at or after ``since``, sorted,
    and how many (trigger, due) pairs were decided more than once. Reads until every partition
    is at its end with ``expected`` pairs seen, or 30 s pass without a record (a commit's markers
    reach the partitions shortly after the commit returns)."""
    topic = topic_name(Topic.FIRES, prefix)
    consumer = Consumer(
        client_config(
            bootstrap,
            {
                "group.id": f"{prefix}lateness",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
            },
        )
    )
    partitions = list(consumer.list_topics(topic, timeout=30).topics[topic].partitions)
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    left = set(partitions)
    late: list[float] = []
    seen: set[tuple[str, datetime]] = set()
    duplicates = 0
    last = time.monotonic()
    while (left or len(seen) < expected) and time.monotonic() - last < 30:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        err = msg.error()
        if err is not None:
            if err.code() == KafkaError._PARTITION_EOF:
                left.discard(msg.partition())
                continue
            raise KafkaException(err)
        last = time.monotonic()
        left.add(msg.partition())
        value = msg.value()
        if value is None:
            continue
        fire = decode(value, ev.FireRecord)
        if fire.due_at.timestamp() < since:
            continue
        pair = (fire.trigger_id, fire.due_at)
        if pair in seen:
            duplicates += 1
            continue
        seen.add(pair)
        late.append((fire.decided_at - fire.due_at).total_seconds() * 1000)
    consumer.close()
    return sorted(late), duplicates


def commit_lateness(curve: list[tuple[float, float]], n: int, rate: int) -> list[float]:
    """Lateness (ms) of each of the ``n`` fires up to its commit, from the committed count sampled
    every 10 ms: the k-th committed fire (due order) was due ``k // rate`` s after the first
    instant and committed by the first sample counting more than k. Sorted."""
    late: list[float] = []
    k = 0
    for t, committed in curve:
        while k < min(n, committed):
            late.append((t - k // rate) * 1000)
            k += 1
    return sorted(late)


def quantile(values: list[float], p: float) -> int:
    """The ``p`` quantile of sorted ``values``, rounded (-1 when empty)."""
    return round(values[min(len(values) - 1, int(p * (len(values) - 1)))]) if values else -1


def steady_base() -> int:
    """01:00 UTC two days ahead: the first steady instant."""
    return int(time.time()) // 86400 * 86400 + 2 * 86400 + 3600


def measure_steady(
    bootstrap: str, prefix: str, triggers: int, n: int, rate: int
) -> dict[str, float]:
    """Cold start on a prefix loaded with ``steady``, then the ``n`` one-shot instants, ``rate``
    per second: decision and commit lateness (see the module docstring)."""
    curve: list[tuple[float, float]] = []
    run = coldstart_and_peak(bootstrap, prefix, triggers, n, curve)
    decided, duplicates = fire_lateness(bootstrap, prefix, int(run["peak_instant"]), n)
    committed = commit_lateness(curve, n, rate)
    return {
        "n": n,
        "rate": rate,
        "decided": len(decided),
        "duplicates": duplicates,
        "decision_p50_ms": quantile(decided, 0.5),
        "decision_p99_ms": quantile(decided, 0.99),
        "decision_max_ms": round(decided[-1]) if decided else -1,
        "commit_p50_ms": quantile(committed, 0.5),
        "commit_p99_ms": quantile(committed, 0.99),
        "commit_max_ms": round(committed[-1]) if committed else -1,
        "span_s": run["peak_100k_s"],
        "cpu_s": run["peak_cpu_s"],
        "cold_start_s": run["cold_start_s"],
        "bytes_per_trigger": run["bytes_per_trigger"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--triggers", type=int, default=1_000_000)
    parser.add_argument("--peak", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument(
        "--phase",
        choices=("all", "load", "coldstart", "steady", "steady-measure"),
        default="all",
        help="load only, or cold start and peak on a prefix loaded before (for profiling); "
        "steady: load and measure decision lateness at --rate fires/s for --seconds",
    )
    parser.add_argument("--rate", type=int, default=1000, help="steady: instants due per second")
    parser.add_argument("--seconds", type=int, default=60, help="steady: for how long")
    parser.add_argument(
        "--prefix",
        help="topic prefix; unset: a new one, deleted at the end (kept with --phase load)",
    )
    parser.add_argument(
        "--planners",
        type=int,
        default=1,
        help="planner processes sharing the partitions for the peak (one consumer group)",
    )
    parser.add_argument("--member", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.member:
        set_planner_index(get_settings().planner.index)
        bootstrap, _ = require_services(get_settings(), need_database=False)
        member(bootstrap, args.prefix, args.member)
        return
    bootstrap, _ = require_services(get_settings(), need_database=False)
    throwaway = args.prefix is None and args.phase in ("all", "steady")
    args.prefix = args.prefix or f"bench{uuid.uuid4().hex[:6]}."
    try:
        bench(parser, args, bootstrap)
    finally:
        if throwaway:
            delete_under(bootstrap, args.prefix)


def bench(parser: argparse.ArgumentParser, args: argparse.Namespace, bootstrap: str) -> None:
    set_planner_index(get_settings().planner.index)  # HORAE_PLANNER_INDEX=objects: the old one
    n = args.rate * args.seconds
    if args.phase == "coldstart":
        print(json.dumps(coldstart_and_peak(bootstrap, args.prefix, args.triggers, args.peak)))
        return
    if args.phase == "steady-measure":
        figures = measure_steady(bootstrap, args.prefix, args.triggers, n, args.rate)
        print(json.dumps(figures))
        return
    calibration = calibrate()
    print(f"calibration: a 10M-iteration CPython loop takes {calibration} s")
    print(f"planner bench: {args.triggers} triggers, peak {args.peak}, prefix {args.prefix}")
    if args.phase == "steady":
        if n > args.triggers:
            parser.error(f"--rate × --seconds = {n} > --triggers {args.triggers}")
        steady = (steady_base(), args.rate)
        ingest = load(bootstrap, args.prefix, args.triggers, n, args.partitions, steady)
    else:
        ingest = load(bootstrap, args.prefix, args.triggers, args.peak, args.partitions)
    if args.phase == "load":
        print(json.dumps(ingest))
        return
    if args.planners > 1:
        figures = scale_out(bootstrap, args.prefix, args.triggers, args.peak, args.planners)
        figures.update(ingest)
        finish(figures, bootstrap, args, calibration)
        return
    # cold start in a fresh process (the same worker slot restarting), so that its memory is the
    # planner's alone
    measure = "steady-measure" if args.phase == "steady" else "coldstart"
    command = [sys.executable, __file__, "--phase", measure, "--prefix", args.prefix]
    command += ["--triggers", str(args.triggers), "--peak", str(args.peak)]
    command += ["--rate", str(args.rate), "--seconds", str(args.seconds)]
    run = subprocess.run(command, check=True, capture_output=True, text=True)
    out = run.stdout.strip().splitlines()
    print("\n".join(out[:-1]))
    figures = json.loads(out[-1])
    figures.update(ingest)
    finish(figures, bootstrap, args, calibration)


def finish(
    figures: dict[str, Any], bootstrap: str, args: argparse.Namespace, calibration: float
) -> None:
    """The ceiling from the peak's records, the ratio, the goal and the last line."""
    figures.update(ceiling(bootstrap, args.prefix, figures.pop("peak_starts"), args.peak))
    figures["ratio_ceiling"] = round(figures["fires_per_s"] / figures["ceiling_fires_per_s"], 3)
    figures["calibration_s"] = calibration
    figures["load_avg_1m"] = round(os.getloadavg()[0], 2)
    print(
        f"goal fires/s over the Kafka ceiling >= 0.5: {figures['ratio_ceiling']} "
        f"({'met' if figures['ratio_ceiling'] >= 0.5 else 'MISSED'})"
    )
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
