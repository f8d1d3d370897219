"""Horae's side of bench/compare.py: the planner, through bench/planner.py's own functions, and
one dispatcher delivering its fires to bench/receiver.py.

    python bench/peers/horae_peer.py load <prefix> <n> <rate> <held>
    python bench/peers/horae_peer.py measure <prefix> <n> <rate> <held> <nosync|sync>
    python bench/peers/horae_peer.py drop <prefix>
    python bench/peers/horae_peer.py dispatch <prefix>   # (measure starts it)

``load``: ``n + held`` signed definitions produced and ingested (bench/planner.py ``load``): with
``rate == n`` the ``n`` fire together at the next midnight UTC (cron ``0 0 * * *``), else each
once, ``rate`` per second from an epoch second two days ahead (one-shot ``at`` instants); the
held ones fire months away. Every definition is a webhook to bench/receiver.py on
``receiver.PORT`` (signed, secret ref ``bench``: bench/dispatch.py's secret, the receiver's).

``measure`` (a fresh process, so that its memory and CPU are the planner's) needs the receiver
running (bench/compare.py starts it and resets it before each run). It starts one real dispatcher
(``dispatch``: the ``horae dispatcher`` worker with bench/dispatch.py's settings, in a process of
its own) whose clock follows the planner's virtual one (the offset is written to its stdin when
the planner's clock is moved), sets the durability of every topic under the prefix (``sync``:
``flush.messages=1``, the broker fsyncs each write to them before it answers; ``nosync``: the
override removed, Kafka's default flush), then cold start and peak (``coldstart_and_peak``: the
virtual clock is moved to one second before the first instant; the decisions end when ``n``
fires are committed in Kafka transactions; the deliveries when the receiver holds ``n``
distinct keys).

The counted event is the delivered call: ``fires_per_s`` = ``n`` over the span from the first due
instant to the last receipt; delivery lateness = receipt − due (the receiver's figures, shifted
by the virtual clock's offset). ``delivered`` is Horae's own count: committed ``succeeded``
outcomes of this run (topic ``outcomes``, read_committed); bench/compare.py checks it against
the receiver's distinct keys; ``first_ms`` is the first delivery's lateness. The decision
figures, "decided, not delivered": ``decided_per_s`` (``n`` over the time to commit every
decision), ``decided_first_ms`` / ``decided_p100_ms`` (when a burst's first and last decisions
were committed), ``decided_p50/p99_ms`` (``decided_at - due_at`` of each fire record, read back
from the fires topic, which also counts duplicates) and the commit lateness. CPU and peak RSS
are the planner's and the dispatcher's summed (``planner_cpu_s``, ``dispatcher_cpu_s``,
``planner_rss_mb``, ``dispatcher_rss_mb`` separately). A peak can be measured again on the
same prefix (the next midnight). ``drop`` deletes the prefix's topics. The last line is JSON.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # re-exported names
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/ for planner.py

import dispatch
import planner
import receiver

from horae.cli.common import require_services
from horae.contracts import events as ev
from horae.contracts.codec import decode
from horae.contracts.topics import Topic, topic_name
from horae.kafka.config import client_config
from horae.ports import WallClock
from horae.settings import Settings, get_settings
from horae.streams.dispatcher.config import DispatcherConfig
from horae.streams.dispatcher.worker import Dispatcher

PARTITIONS = dispatch.PARTITIONS
#: the dispatcher's concurrent sends: of 32, 64, 128 and 256 (its default, for remote targets
#: with real round trips) on (a) nosync at 2026-12-01 the loopback receiver got 4.8k, 5.1k, 4.7k
#: and 4.5k delivered/s (the default's CPU per call up to 1.7x: more connections, more tasks)
INFLIGHT = 64
RECEIVER_URL = f"http://127.0.0.1:{receiver.PORT}/hook"
DELIVERY_LIMIT_S = 600
#: what the topics of each durability row carry (set through the admin client on the prefix's
#: own topics; ``None``: the override removed, Kafka's default flush)
FLUSH = {"sync": "1", "nosync": None, "replicated": None}
SETTINGS = {
    "partitions": PARTITIONS,
    "tick_s": 0.5,
    "dispatcher_processes": 1,
    "dispatcher_max_inflight": 256,
    "acks": "all",
}


def tuning(mode: str) -> str:
    flush = {
        "sync": "flush.messages=1 on every topic of the prefix",
        "nosync": "Kafka's default flush (no fsync per write)",
        "replicated": "3 brokers, replication factor 3, min.insync.replicas 2, Kafka's default "
        "flush",
    }[mode]
    return (
        f"Horae planner (one process, {PARTITIONS} partitions, tick 0.5 s), decisions committed "
        f"in Kafka transactions (acks=all), {flush}; one dispatcher process (max {INFLIGHT} in "
        "flight, signed POST via its pooled keep-alive client), its attempts and outcomes "
        "committed in Kafka transactions"
    )


def _bootstrap() -> str:
    bootstrap, _ = require_services(get_settings(), need_database=False)
    return bootstrap


def _vm_hwm_mb(pid: str = "self") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return -1.0


def set_durability(bootstrap: str, prefix: str, mode: str) -> list[str]:
    """Every topic under ``prefix``: ``flush.messages`` as ``FLUSH[mode]`` says; their names."""
    admin = admin_of(bootstrap)
    names = sorted(t for t in admin.list_topics(timeout=30).topics if t.startswith(prefix))
    value = FLUSH[mode]
    op = AlterConfigOpType.SET if value is not None else AlterConfigOpType.DELETE
    resources = [
        ConfigResource(
            ResourceType.TOPIC,
            name,
            incremental_configs=[
                ConfigEntry("flush.messages", value or "", incremental_operation=op)
            ],
        )
        for name in names
    ]
    for future in admin.incremental_alter_configs(resources).values():
        future.result(timeout=60)
    return names


def admin_of(bootstrap: str) -> AdminClient:
    return AdminClient(client_config(bootstrap, {"log_level": 3}))


def _end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    consumer = Consumer(client_config(bootstrap, {"group.id": "horae-bench-offsets"}))
    parts = consumer.list_topics(topic, timeout=30).topics[topic].partitions
    ends = {
        p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in parts
    }
    consumer.close()
    return ends


def succeeded_outcomes(bootstrap: str, prefix: str, since: dict[int, int], expected: int) -> int:
    """Distinct fire keys with a committed ``succeeded`` outcome after the offsets ``since``:
    Horae's own count of delivered calls. Reads until every partition is at its end with
    ``expected`` seen, or 30 s pass without a record."""
    topic = topic_name(Topic.OUTCOMES, prefix)
    consumer = Consumer(
        client_config(
            bootstrap,
            {
                "group.id": f"{prefix}outcomes",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
            },
        )
    )
    consumer.assign([TopicPartition(topic, p, o) for p, o in since.items()])
    left, last = set(since), time.monotonic()
    keys: set[str] = set()
    while (left or len(keys) < expected) and time.monotonic() - last < 30:
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
        value = msg.value()
        if value is not None:
            outcome = decode(value, ev.WorkOutcome)
            if outcome.state is ev.OutcomeState.SUCCEEDED:
                keys.add(outcome.fire_key)
    consumer.close()
    return len(keys)


class Delivery:
    """A ``dispatch`` process on ``prefix``, delivering to bench/receiver.py."""

    def __init__(self, bootstrap: str, prefix: str) -> None:
        self.offset = 0.0
        self.cpu0 = 0.0
        dispatch.topics(bootstrap, prefix)
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "dispatch", prefix],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=dispatch.env_for(bootstrap, prefix, "cmp", INFLIGHT),
        )
        assert self.proc.stdout is not None
        self.proc.stdout.readline()  # "ready"

    def set_offset(self, offset: float) -> None:
        self.offset = offset
        self.cpu0 = dispatch.cpu_s(self.proc.pid)
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{offset}\n".encode())
        self.proc.stdin.flush()

    def wait(self, n: int) -> dict[str, Any]:
        """The receiver's figures once it holds ``n`` distinct keys (or the limit passed)."""
        deadline = time.monotonic() + DELIVERY_LIMIT_S
        while receiver.call(receiver.PORT, "/stats")["distinct"] < n:
            if time.monotonic() > deadline:
                break
            time.sleep(0.1)
        s = receiver.call(receiver.PORT, f"/stats?shift_ms={self.offset * 1000}")
        s["dispatcher_cpu_s"] = round(dispatch.cpu_s(self.proc.pid) - self.cpu0, 2)
        s["dispatcher_rss_mb"] = round(_vm_hwm_mb(str(self.proc.pid)), 1)
        return s

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(120)


def run_dispatcher() -> None:
    """The dispatcher worker until stdin closes; each stdin line is its clock's offset (s)."""
    offset = [0.0]
    worker = Dispatcher(
        DispatcherConfig.from_settings(Settings(), _bootstrap()),
        clock=WallClock(lambda: time.time() + offset[0]),
    )
    stop = threading.Event()

    def follow() -> None:
        for line in sys.stdin:
            offset[0] = float(line)
        stop.set()

    def ready() -> None:
        worker.ready.wait()
        print("ready", flush=True)

    threading.Thread(target=follow, daemon=True).start()
    threading.Thread(target=ready, daemon=True).start()
    worker.run(stop)


def measure(prefix: str, n: int, rate: int, held: int, mode: str) -> dict[str, object]:
    bootstrap = _bootstrap()
    curve: list[tuple[float, float]] = []
    delivery = Delivery(bootstrap, prefix)
    try:
        flushed = set_durability(bootstrap, prefix, mode)
        since = _end_offsets(bootstrap, topic_name(Topic.OUTCOMES, prefix))
        run = planner.coldstart_and_peak(bootstrap, prefix, n + held, n, curve, delivery.set_offset)
        planner_cpu = run["peak_cpu_s"]
        received: dict[str, Any] = delivery.wait(n)
        decided, duplicates = planner.fire_lateness(bootstrap, prefix, int(run["peak_instant"]), n)
        own = succeeded_outcomes(bootstrap, prefix, since, n)
    finally:
        delivery.close()
    late = planner.commit_lateness(curve, n, rate)
    span = float(received.get("span_s") or 0) or None
    cpu = planner_cpu + float(received["dispatcher_cpu_s"])
    planner_rss = _vm_hwm_mb()
    return {
        "system": "horae",
        "n": n,
        "delivered": own,
        "received": received["distinct"],
        "posts": received["posts"],
        "refused": received["refused"],
        "duplicates": duplicates,
        "decided": len(decided),
        "timeout": int(received["distinct"]) < n,
        "fires_per_s": round(n / span, 1) if span else None,
        "span_s": span,
        "first_ms": received.get("first_ms"),
        "p50_ms": received.get("p50_ms"),
        "p99_ms": received.get("p99_ms"),
        "max_ms": received.get("max_ms"),
        "quantiles_ms": received.get("lateness_ms"),
        "decided_per_s": run["fires_per_s"],
        "decided_span_s": run["peak_100k_s"],
        # a burst's ramp, by commit: its first, median and last decision (bench/planner.py)
        "decided_first_ms": run["first_decision_ms"],
        "decided_p100_ms": run["p100_ms"],
        "decided_p50_ms": planner.quantile(decided, 0.5),
        "decided_p99_ms": planner.quantile(decided, 0.99),
        "commit_p99_ms": planner.quantile(late, 0.99),
        "decided_quantiles_ms": [planner.quantile(decided, p / 100) for p in range(101)],
        "peak_rss_mb": round(planner_rss + float(received["dispatcher_rss_mb"]), 1),
        "planner_rss_mb": round(planner_rss, 1),
        "dispatcher_rss_mb": received["dispatcher_rss_mb"],
        "cpu_s_per_1k": round(cpu / n * 1000, 3),
        "planner_cpu_s": planner_cpu,
        "dispatcher_cpu_s": received["dispatcher_cpu_s"],
        "startup_s": run["cold_start_s"],
        "snapshots_loaded": run.get("snapshots_loaded"),
        "flushed_topics": len(flushed) if mode == "sync" else 0,
        "tuning": tuning(mode),
    }


def drop(prefix: str) -> None:
    if len(prefix) < 8:
        raise ValueError(f"refusing to delete topics under the short prefix {prefix!r}")
    admin = admin_of(_bootstrap())
    names = [t for t in admin.list_topics(timeout=30).topics if t.startswith(prefix)]
    for future in (admin.delete_topics(names, operation_timeout=30) if names else {}).values():
        future.result(timeout=60)


def main() -> None:
    cmd, prefix, *rest = sys.argv[1:]
    if cmd == "load":
        n, rate, held = map(int, rest)
        steady = None
        if rate < n:
            steady = (planner.steady_base(), rate)
        planner.load(_bootstrap(), prefix, n + held, n, PARTITIONS, steady, RECEIVER_URL)
        print(json.dumps({"loaded": n + held, "at": datetime.now(UTC).isoformat()}))
    elif cmd == "measure":
        n, rate, held = map(int, rest[:3])
        print(json.dumps(measure(prefix, n, rate, held, rest[3])), flush=True)
    elif cmd == "dispatch":
        run_dispatcher()
    elif cmd == "drop":
        drop(prefix)
        print(json.dumps({"dropped": prefix}))
    else:
        raise SystemExit(f"unknown command {cmd!r}")


if __name__ == "__main__":
    main()
