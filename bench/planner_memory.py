"""Offline: bytes per held trigger of the planner's due indexes, without Kafka.

    .venv/bin/python bench/planner_memory.py [--triggers 100000] [--partitions 12]
        [--index compact|objects] [--top 0]

``--triggers`` definitions built like ``bench/planner.py``'s (the first 10 % at ``0 0 * * *``
UTC, the others on a date months away in one of 4 zones, 97 target URLs), encoded and decoded
1,024 per partition at a time (so every one is a fresh object, as received, and the encoding's
garbage is no pool for the indexes), restored by a :class:`Decider` into ``--partitions``
indexes (``i % partitions``, each reserved for its share as a rebuild does), settled after each
1,024. Prints the RSS growth per trigger and the CPU µs per trigger of decoding and restoring
(not of encoding); ``--top N`` traces the allocations instead (``tracemalloc``, which inflates
the RSS and the CPU) and prints the traced bytes per trigger and the N source lines holding the
most. Last line JSON: ``{"index", "triggers", "rss_per_trigger", "restore_cpu_us"}``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
import tracemalloc
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from planner import TENANT, _recurrence, _target

from horae.contracts import events as ev
from horae.contracts.codec import decode, encode
from horae.streams.planner.decide import Decider
from horae.streams.planner.index import DueIndex, make_index, set_planner_index


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--triggers", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument("--index", choices=("compact", "objects"), default="compact")
    parser.add_argument("--top", type=int, default=0)
    args = parser.parse_args()
    set_planner_index(args.index)
    n, parts = args.triggers, args.partitions
    peak = n // 10
    now = time.time()
    authored = datetime.now(UTC).replace(microsecond=0)
    decider = Decider()
    gc.collect()
    gc.disable()
    if args.top:
        tracemalloc.start(int(os.environ.get("FRAMES", "1")))
    before = _rss()
    indexes: list[DueIndex] = [make_index(p, decider.shared) for p in range(parts)]
    for index in indexes:
        index.reserve(n // parts)  # as a rebuild does
    cpu = 0.0
    chunk = 1024 * parts  # encoded a chunk at a time: their garbage is not a pool to restore into
    for first in range(0, n, chunk):
        records = [
            encode(
                ev.TriggerDefinition(
                    tenant=TENANT,
                    trigger_id=f"t{i}",
                    version=1,
                    state=ev.DefinitionState.LIVE,
                    recurrence=_recurrence(i, peak, 6, None),
                    target=_target(i, None),
                    authored_at=authored,
                    author="bench",
                )
            )
            for i in range(first, min(n, first + chunk))
        ]
        started = time.process_time()
        for i, value in enumerate(records, first):
            d = decode(value, ev.TriggerDefinition)
            index = indexes[i % parts]
            index.put(ev.trigger_key(d.tenant, d.trigger_id), decider.restore(d, None, now))
        for index in indexes:
            index.settle()
        cpu += time.process_time() - started
    del records
    gc.collect()
    rss = _rss() - before
    if args.top:
        snapshot = tracemalloc.take_snapshot()
        tracemalloc.stop()
        stats = snapshot.statistics("traceback" if os.environ.get("FRAMES") else "lineno")
        print(f"traced: {sum(s.size for s in stats) / n:.1f} B/trigger")
        for stat in stats[: args.top]:
            print(f"{stat.size / n:8.1f} B/trigger {stat.count / n:6.2f} blocks {stat.traceback}")
    held = sum(len(index) for index in indexes)
    assert held == n, (held, n)
    print(
        json.dumps(
            {
                "index": args.index,
                "triggers": n,
                "rss_per_trigger": round(rss / n),
                "restore_cpu_us": round(cpu / n * 1e6, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
