"""Definition ingest in-process, no broker: the planner's CPU per definition, and its profile.

    .venv/bin/python bench/ingest.py [--definitions 10000] [--peak 100000] [--profile]
        [--memo on|off]

Builds ``--definitions`` signed bench definitions as ``bench/planner.py``'s load does (the same
recurrences, zones, targets, tenant and key; the first ``--peak`` share one cron expression, as
all do in a load of 100,000 or fewer, the others have one of 5,760 expression and zone pairs),
encodes them, then times
:meth:`~horae.streams.planner.decide.Decider.on_definition_record` on each (ingress: decode,
validation, signature, grants; the planner's checks; the accepted copy and the state record,
encoded) into one due index per partition, as the planner worker does between consuming and
producing. What it leaves out is Kafka's part (consuming, producing, transactions), which
``bench/planner.py --phase load``'s ``ingest_cpu_us`` includes. ``--profile``: cProfile's top
functions by cumulative and own time instead of the timing.

Last line JSON: ``{"definitions": N, "ingest_cpu_us": ..., "ingest_per_s": ...}`` (CPU µs per
definition, and what one core ingests per second at that cost).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import time
from datetime import UTC, datetime

from horae.contracts import events as ev
from horae.contracts import signing
from horae.contracts.codec import encode
from horae.contracts.memo import set_ingest_memo
from horae.contracts.topics import Topic, topic_name
from horae.ports import Emit, Record
from horae.streams.planner.decide import Decider
from horae.streams.planner.index import make_index

PREFIX = "ingest."
PARTITIONS = 12
TENANT, KEY_ID, SECRET = "bench", "bench-1", b"bench-secret"
ZONES = ("UTC", "Europe/Berlin", "America/New_York", "Asia/Tokyo")


def definitions(n: int, peak: int, month: int) -> list[Record]:
    """``n`` signed definition records as ``bench/planner.py`` produces them (the first
    ``peak`` due at midnight UTC, the others once a year in one of four zones)."""
    topic = topic_name(Topic.DEFINITIONS, PREFIX)
    now = datetime.now(UTC).replace(microsecond=0)
    out = []
    for i in range(n):
        j = i - peak
        expr, zone = (
            ("0 0 * * *", "UTC")
            if i < peak
            else (f"{j % 60} {(j // 60) % 24} 15 {month} *", ZONES[(j // 1440) % len(ZONES)])
        )
        d = ev.TriggerDefinition(
            tenant=TENANT,
            trigger_id=f"t{i}",
            version=1,
            state=ev.DefinitionState.LIVE,
            recurrence=ev.Recurrence(kind=ev.RecurrenceKind.CRON, expr=expr, zone=zone),
            target=ev.Target(kind=ev.TargetKind.WEBHOOK, url=f"https://hooks.example/{i % 97}"),
            authored_at=now,
            author="bench",
        )
        key = f"{TENANT}/t{i}".encode()
        value = encode(signing.sign(d, KEY_ID, SECRET))
        out.append(Record(topic, hash(key) % PARTITIONS, i, key, value))
    return out


def ingest(records: list[Record]) -> list[Emit]:
    decider = Decider({TENANT: {KEY_ID: SECRET}})
    indexes = {p: make_index(p, decider.shared) for p in range(PARTITIONS)}
    now = time.time()
    out: list[Emit] = []
    for r in records:
        out += decider.on_definition_record(indexes[r.partition() or 0], r, now)
    accepted = sum(len(i) for i in indexes.values())
    if accepted != len(records):
        raise SystemExit(f"{len(records) - accepted} definitions were refused")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--definitions", type=int, default=10_000)
    parser.add_argument("--peak", type=int, default=100_000)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--memo", choices=("on", "off"), default="on")
    args = parser.parse_args()
    set_ingest_memo(args.memo == "on")
    month = (datetime.now(UTC).month + 5) % 12 + 1
    records = definitions(args.definitions, args.peak, month)
    if args.profile:
        profile = cProfile.Profile()
        profile.runcall(ingest, records)
        stats = pstats.Stats(profile)
        stats.sort_stats("cumulative").print_stats(45)
        stats.sort_stats("tottime").print_stats(30)
    cpu = time.process_time()
    ingest(records)
    cpu = time.process_time() - cpu
    us = cpu / len(records) * 1e6
    figures = {"definitions": len(records), "ingest_cpu_us": round(us, 1)}
    print(json.dumps({**figures, "ingest_per_s": round(1e6 / us)}))


if __name__ == "__main__":
    main()
