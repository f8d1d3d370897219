"""The scaling table: the planner at several held-trigger counts, the projector at several rates.

    .venv/bin/python bench/scale.py [--sizes 100000,1000000] [--rates 5000,10000]
        [--loaded 1000000=PREFIX ...] [--fires 100000] [--seconds 20]

For each size N: ``bench/planner.py --triggers N --peak min(N, 100000)`` (load, then a cold start
and the peak in a fresh process), or, for a size given with ``--loaded N=PREFIX`` (a prefix that
``bench/planner.py --phase load`` filled before), only its cold start and peak (``--phase
coldstart``; the peak is the next midnight of the same triggers). For each rate R:
``bench/projection.py --rate R`` (rows/s replaying ``--fires`` fires, and the projection lag
while a producer commits R fires/s for ``--seconds``). Each run is a subprocess, one at a time;
its last JSON line is kept.

Prints a Markdown table, then, last, one JSON line: ``{"planner": [{"triggers": N, ...the
planner bench's JSON}], "projector": [{"rate": R, ...the projection bench's JSON}]}``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def _last_json(command: list[str]) -> dict[str, Any]:
    print("$", " ".join(command), flush=True)
    run = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True)  # stderr shown
    lines = run.stdout.strip().splitlines()
    print("\n".join(lines[:-1]), flush=True)
    figures: dict[str, Any] = json.loads(lines[-1])
    return figures


def planner_row(size: int, prefix: str | None) -> dict[str, Any]:
    command = [sys.executable, str(HERE / "planner.py"), "--triggers", str(size)]
    command += ["--peak", str(min(size, 100_000))]
    if prefix is not None:
        command += ["--phase", "coldstart", "--prefix", prefix]
    return {"triggers": size, **_last_json(command)}


def projector_row(rate: int, fires: int, seconds: float) -> dict[str, Any]:
    command = [sys.executable, str(HERE / "projection.py"), "--rate", str(rate)]
    command += ["--fires", str(fires), "--seconds", str(seconds)]
    return {"rate": rate, **_last_json(command)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--rates", default="5000,10000")
    parser.add_argument("--loaded", action="append", default=[], metavar="N=PREFIX")
    parser.add_argument("--fires", type=int, default=100_000)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    loaded = {int(n): prefix for n, prefix in (item.split("=", 1) for item in args.loaded)}
    sizes = [int(s) for s in args.sizes.split(",") if s]
    rates = [int(r) for r in args.rates.split(",") if r]
    planner = [planner_row(n, loaded.get(n)) for n in sizes]
    projector = [projector_row(r, args.fires, args.seconds) for r in rates]
    print("| held triggers | B/trigger | cold start s | peak fires/s | peak s | ingest defs/s |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for row in planner:
        ingest = row.get("ingest_per_s", "—")
        print(
            f"| {row['triggers']:,} | {row['bytes_per_trigger']} | {row['cold_start_s']} | "
            f"{row['fires_per_s']:,} | {row['peak_100k_s']} | {ingest} |"
        )
    print()
    print(
        "| fires/s asked | fires/s committed | projector rows/s (replay) | lag p50 s | lag p99 s "
        "| lag max s |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for row in projector:
        print(
            f"| {row['rate']:,} | {row.get('planner_fires_per_s')} | {row.get('rows_per_s')} | "
            f"{row.get('lag_p50_s')} | {row.get('lag_s')} | {row.get('lag_max_s')} |"
        )
    print(json.dumps({"planner": planner, "projector": projector}))


if __name__ == "__main__":
    main()
