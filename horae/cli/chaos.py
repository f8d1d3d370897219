"""``horae chaos``: the chaos soak — the whole system on a private Kafka broker and PostgreSQL,
under load and broken at random (processes, broker and database SIGKILLed and restarted, members
added and drained), then checked by an independent checker. Its code is a test tool and lives in
the source checkout (``tests/chaos/soak/``), not in the wheel."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from horae.cli.common import add_flags
from horae.settings import Settings

CHECKOUT = Path(__file__).resolve().parents[2]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("chaos", help="run the chaos soak (from a source checkout)")
    add_flags(p, "chaos")
    p.set_defaults(func=run)


def run(settings: Settings, args: argparse.Namespace) -> int:
    if not (CHECKOUT / "tests" / "chaos" / "soak" / "driver.py").exists():
        print(
            "horae chaos: the soak is a test tool of the source checkout (tests/chaos/soak/); "
            "this horae is installed without it. Run it from a clone: "
            "`python -m horae.cli.main chaos` in the repository.",
            file=sys.stderr,
        )
        return 2
    if str(CHECKOUT) not in sys.path:
        sys.path.insert(0, str(CHECKOUT))
    from tests.chaos.soak.driver import main

    mine = settings.chaos
    code: int = main(mine.minutes, mine.profile, mine.seed, keep=mine.keep)
    return code
