"""Benchmark: next-instant computations per second and memory per trigger (not a timed test).

Population: 1,000,000 triggers over 5,000 distinct (cron expression, zone) pairs, each trigger
holding what the planner holds at run time: a reference to its shared compiled schedule
(:func:`horae.domain.compile_schedule` interns them) and its cursor (last decided instant).
Cursors start spread over ten minutes around a fixed "now", so the windows of upcoming instants
that schedules cache are exercised as in the planner (all triggers of a schedule near now).

Measures, on one core:

- ``build``: parse + compile 1,000,000 specs (5,000 distinct);
- ``cold``: the first round of ``next_after`` over every trigger (windows generated on demand);
- ``warm``: further rounds, each trigger advancing to its next instant (steady state);
- ``bytes_per_trigger``: traced allocations (tracemalloc) of the population after a round,
  schedules and their windows included, divided by the number of triggers.

Run: ``.venv/bin/python bench/recurrence.py [--triggers N] [--pairs P] [--rounds R]``.
The last line is JSON: ``{"next_per_s": ..., "bytes_per_trigger": ...}`` (``next_per_s`` = warm).
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import sys
import time
import tracemalloc
import zoneinfo
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from horae.domain import CronSpec, compile_schedule, parse_instant, tzdata_version
from horae.domain.schedule import CronSchedule, EverySchedule

NOW = parse_instant("2026-03-07T22:00:00Z")  # a day before the US spring-forward


class Trigger:
    __slots__ = ("cursor", "schedule")

    def __init__(self, schedule: CronSchedule | EverySchedule, cursor: int) -> None:
        self.schedule = schedule
        self.cursor = cursor


def expressions(rng: random.Random, count: int) -> list[str]:
    out: set[str] = set()
    fixed = ["*/5 * * * *", "* * * * *", "0 * * * *", "0 0 * * *", "0 9 * * 1-5", "30 2 * * *"]
    out.update(fixed)
    while len(out) < count:
        kind = rng.randrange(6)
        minute, hour = rng.randrange(60), rng.randrange(24)
        if kind == 0:
            out.add(f"{minute} {hour} * * *")
        elif kind == 1:
            out.add(f"{minute} {hour} * * {rng.choice(['1-5', 'MON', '0,6', 'MON-FRI'])}")
        elif kind == 2:
            out.add(f"*/{rng.choice([2, 5, 10, 15, 20, 30])} * * * *")
        elif kind == 3:
            out.add(f"{minute} */{rng.choice([2, 3, 4, 6, 8, 12])} * * *")
        elif kind == 4:
            out.add(f"{minute} {hour} {rng.randrange(1, 29)} * *")
        else:
            out.add(f"{minute},{(minute + 30) % 60} {hour}-{min(hour + 8, 23)} * * 1-5")
    return sorted(out)[:count]


def pairs(rng: random.Random, count: int) -> list[tuple[str, str]]:
    zones = sorted(z for z in zoneinfo.available_timezones() if "/" in z and "Etc" not in z)
    chosen_zones = ["UTC", *rng.sample(zones, 49)]
    exprs = expressions(rng, count // len(chosen_zones) + 1)
    combos = [(e, z) for e in exprs for z in chosen_zones]
    rng.shuffle(combos)
    return combos[:count]


def build(n_triggers: int, n_pairs: int, seed: int) -> list[Trigger]:
    rng = random.Random(seed)
    specs = pairs(rng, n_pairs)
    triggers = []
    for i in range(n_triggers):
        expr, zone = specs[i % n_pairs]
        schedule = compile_schedule(CronSpec(expr), zone)
        assert isinstance(schedule, CronSchedule)
        triggers.append(Trigger(schedule, NOW + rng.randrange(600)))
    rng.shuffle(triggers)
    return triggers


def one_round(triggers: list[Trigger]) -> int:
    done = 0
    for trig in triggers:
        found = trig.schedule.next_after(trig.cursor)
        if found is not None:
            trig.cursor = found
            done += 1
    return done


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--triggers", type=int, default=1_000_000)
    parser.add_argument("--pairs", type=int, default=5_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    # Memory, first and in a fresh process: everything the population allocates is traced,
    # including zone calendars, parsed expressions, compiled schedules and their windows.
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    triggers = build(args.triggers, args.pairs, args.seed)
    one_round(triggers)
    gc.collect()
    population_bytes = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    del triggers
    gc.collect()

    # Speed, untraced. Zone calendars and parsed expressions stay cached from the first phase.
    started = time.perf_counter()
    triggers = build(args.triggers, args.pairs, args.seed)
    build_s = time.perf_counter() - started
    distinct = len({id(t.schedule) for t in triggers})
    started = time.perf_counter()
    cold_done = one_round(triggers)
    cold_s = time.perf_counter() - started
    warm_done = 0
    started = time.perf_counter()
    for _ in range(args.rounds):
        warm_done += one_round(triggers)
    warm_s = time.perf_counter() - started

    next_per_s = warm_done / warm_s
    bytes_per_trigger = population_bytes / len(triggers)
    print(f"tzdata {tzdata_version()}, python {sys.version.split()[0]}")
    print(f"triggers {len(triggers):,}, distinct schedules {distinct:,}")
    print(f"build (spec + compile + intern): {build_s:.2f} s")
    print(
        f"cold round (windows generated): {cold_done:,} next_after in {cold_s:.2f} s "
        f"= {cold_done / cold_s:,.0f}/s"
    )
    print(
        f"warm rounds x{args.rounds}: {warm_done:,} next_after in {warm_s:.2f} s "
        f"= {next_per_s:,.0f}/s"
    )
    print(f"memory: {population_bytes / 2**20:.1f} MiB = {bytes_per_trigger:.0f} bytes/trigger")
    print(
        json.dumps({"next_per_s": round(next_per_s), "bytes_per_trigger": round(bytes_per_trigger)})
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
