"""Horae's side of bench/compare.py: the planner, through bench/planner.py's own functions, and
for a steady run the dispatcher delivering its fires.

    python bench/peers/horae_peer.py load <prefix> <n> <rate> <held>
    python bench/peers/horae_peer.py measure <prefix> <n> <rate> <held>
    python bench/peers/horae_peer.py drop <prefix>
    python bench/peers/horae_peer.py dispatch <prefix>   # (measure starts it)

``load``: ``n + held`` signed definitions produced and ingested (bench/planner.py ``load``): with
``rate == n`` the ``n`` fire together at the next midnight UTC (cron ``0 0 * * *``), else each
once, ``rate`` per second from an epoch second two days ahead (one-shot ``at`` instants); the
held ones fire months away. ``measure`` (a fresh process, so that its memory and CPU are the
planner's): cold start with the held set and the peak (``coldstart_and_peak``: the virtual clock
is moved to one second before the first instant; the run ends when ``n`` fires are committed in
Kafka transactions). Lateness, two ways: up to the commit (``p50_ms``/``p99_ms``, from the
committed count sampled every 10 ms, comparable to the peers' execution start, which follows
their claim's commit) and to the decision (``decided_p50_ms``/``decided_p99_ms``: ``decided_at -
due_at`` of each fire record, read back from the fires topic with ``read_committed``, which also
counts duplicates). A peak can be measured again on the
same prefix (the next midnight). ``drop`` deletes the prefix's topics. The last line is JSON.

Every definition is a webhook to ``http://127.0.0.1:RECEIVER_PORT/hook`` (signed, secret ref
``bench``). A steady run (``rate < n``) also delivers: before the cold start, ``measure`` starts
bench/dispatch.py's receiver on that port and one real dispatcher (``dispatch``: the
``horae dispatcher`` worker, bench/dispatch.py's settings — loopback allowed, the bench secret —,
in a process of its own, so ``measure``'s memory and CPU stay the planner's) whose clock follows
the planner's virtual one (the offset is written to its stdin when the planner's clock is moved).
``delivery_p50/p99/max_ms`` = receipt at the receiver − the fire's due instant (the payload's
``due_ms``, in wall time), first receipt per fire key, once all ``n`` arrived (or 300 s passed:
``delivered`` says how many); ``dispatcher_cpu_s_per_1k`` is the dispatcher process's CPU. The
decision figures are computed as without it (the dispatcher's CPU competes with the planner's
on a small machine). A peak (``rate == n``) is not delivered.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from confluent_kafka.admin import AdminClient

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/ for planner.py

import dispatch
import planner

from horae.cli.common import require_services
from horae.kafka.config import client_config
from horae.ports import WallClock
from horae.settings import Settings, get_settings
from horae.streams.dispatcher.config import DispatcherConfig
from horae.streams.dispatcher.worker import Dispatcher

PARTITIONS = dispatch.PARTITIONS
RECEIVER_PORT = 18471
RECEIVER_URL = f"http://127.0.0.1:{RECEIVER_PORT}/hook"
DELIVERY_LIMIT_S = 300
TUNING = (
    f"Horae planner (one process, {PARTITIONS} partitions, tick 0.5 s), decisions committed in "
    "Kafka transactions (acks=all, Kafka's default flush: no fsync per commit); workload b "
    "delivered by one dispatcher process (max 256 in flight) to a local keep-alive receiver"
)


def _bootstrap() -> str:
    bootstrap, _ = require_services(get_settings(), need_database=False)
    return bootstrap


def _peak_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return -1.0


class Delivery:
    """bench/dispatch.py's receiver on RECEIVER_PORT and a ``dispatch`` process on ``prefix``."""

    def __init__(self, bootstrap: str, prefix: str) -> None:
        self.offset = 0.0
        bench = Path(__file__).resolve().parents[1]
        self.receiver = subprocess.Popen(
            [sys.executable, str(bench / "dispatch.py"), "--serve", "--port", str(RECEIVER_PORT)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert self.receiver.stdout is not None
        self.receiver.stdout.readline()  # its port: listening
        dispatch.topics(bootstrap, prefix)
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "dispatch", prefix],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=dispatch.env_for(bootstrap, prefix, "cmp"),
        )
        assert self.proc.stdout is not None
        self.proc.stdout.readline()  # "ready"

    def set_offset(self, offset: float) -> None:
        self.offset = offset
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{offset}\n".encode())
        self.proc.stdin.flush()

    def result(self, n: int) -> dict[str, object]:
        dispatch.wait_distinct(RECEIVER_PORT, n, DELIVERY_LIMIT_S)
        s = dispatch.stats(RECEIVER_PORT, shift_ms=self.offset * 1000)
        cpu = dispatch.cpu_s(self.proc.pid)
        return {
            "delivered": s["distinct"],
            "delivery_p50_ms": round(s.get("p50_ms", -1)),
            "delivery_p99_ms": round(s.get("p99_ms", -1)),
            "delivery_max_ms": round(s.get("max_ms", -1)),
            "dispatcher_cpu_s_per_1k": round(cpu / max(1, s["distinct"]) * 1000, 3),
        }

    def close(self) -> None:
        for proc in (self.proc, self.receiver):
            assert proc.stdin is not None
            proc.stdin.close()
        for proc in (self.proc, self.receiver):
            proc.wait(120)


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


def measure(prefix: str, n: int, rate: int, held: int) -> dict[str, object]:
    bootstrap = _bootstrap()
    curve: list[tuple[float, float]] = []
    delivery = Delivery(bootstrap, prefix) if rate < n else None
    try:
        on_offset = None if delivery is None else delivery.set_offset
        run = planner.coldstart_and_peak(bootstrap, prefix, n + held, n, curve, on_offset)
        decided, duplicates = planner.fire_lateness(bootstrap, prefix, int(run["peak_instant"]), n)
        delivered: dict[str, object] = {} if delivery is None else delivery.result(n)
    finally:
        if delivery is not None:
            delivery.close()
    late = planner.commit_lateness(curve, n, rate)
    done = len(decided)

    def q(p: float) -> int:
        return planner.quantile(late, p)

    return {
        "system": "horae",
        "n": n,
        "executed": done,
        "duplicates": duplicates,
        "timeout": False,
        "fires_per_s": run["fires_per_s"],
        "p50_ms": q(0.5),
        "p99_ms": q(0.99),
        "decided_p50_ms": planner.quantile(decided, 0.5),
        "decided_p99_ms": planner.quantile(decided, 0.99),
        "peak_rss_mb": round(_peak_rss_mb(), 1),
        "cpu_s_per_1k": round(run["peak_cpu_s"] / n * 1000, 3),
        "startup_s": run["cold_start_s"],
        "span_s": run["peak_100k_s"],
        "tuning": TUNING,
        "quantiles_ms": [q(p / 100) for p in range(101)],
        **delivered,
    }


def drop(prefix: str) -> None:
    if len(prefix) < 8:
        raise ValueError(f"refusing to delete topics under the short prefix {prefix!r}")
    admin = AdminClient(client_config(_bootstrap(), {"log_level": 3}))
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
        n, rate, held = map(int, rest)
        print(json.dumps(measure(prefix, n, rate, held)), flush=True)
    elif cmd == "dispatch":
        run_dispatcher()
    elif cmd == "drop":
        drop(prefix)
        print(json.dumps({"dropped": prefix}))
    else:
        raise SystemExit(f"unknown command {cmd!r}")


if __name__ == "__main__":
    main()
