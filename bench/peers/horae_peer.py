"""Horae's side of bench/compare.py: the planner, through bench/planner.py's own functions.

    python bench/peers/horae_peer.py load <prefix> <n> <rate> <held>
    python bench/peers/horae_peer.py measure <prefix> <n> <rate> <held>
    python bench/peers/horae_peer.py drop <prefix>

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
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path

from confluent_kafka.admin import AdminClient

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/ for planner.py

import planner

from horae.cli.common import require_services
from horae.kafka.config import client_config
from horae.settings import get_settings

PARTITIONS = 12
TUNING = (
    f"Horae planner (one process, {PARTITIONS} partitions, tick 0.5 s), decisions committed in "
    "Kafka transactions (acks=all, Kafka's default flush: no fsync per commit)"
)


def _bootstrap() -> str:
    bootstrap, _ = require_services(get_settings(), need_database=False)
    return bootstrap


def _peak_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return -1.0


def measure(prefix: str, n: int, rate: int, held: int) -> dict[str, object]:
    bootstrap = _bootstrap()
    curve: list[tuple[float, float]] = []
    run = planner.coldstart_and_peak(bootstrap, prefix, n + held, n, curve)
    decided, duplicates = planner.fire_lateness(bootstrap, prefix, int(run["peak_instant"]), n)
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
        planner.load(_bootstrap(), prefix, n + held, n, PARTITIONS, steady)
        print(json.dumps({"loaded": n + held, "at": datetime.now(UTC).isoformat()}))
    elif cmd == "measure":
        n, rate, held = map(int, rest)
        print(json.dumps(measure(prefix, n, rate, held)), flush=True)
    elif cmd == "drop":
        drop(prefix)
        print(json.dumps({"dropped": prefix}))
    else:
        raise SystemExit(f"unknown command {cmd!r}")


if __name__ == "__main__":
    main()
