"""``horae chaos``: the chaos soak — the whole system on a private Kafka (one broker, or three
with ``--brokers 3``) and PostgreSQL, under load and broken at random (processes, a broker and
the database SIGKILLed and restarted, members added and drained), then checked by an
independent checker; or, with ``--fuzz N``, N rounds of
the end-to-end fuzz (``tests/integration/security/test_fuzz_e2e.py``, its long profile). Both are
test tools of the source checkout (``tests/``), not in the wheel."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
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
    if mine.fuzz:
        return _fuzz(mine.fuzz)
    code: int = main(mine.minutes, mine.profile, mine.seed, keep=mine.keep, brokers=mine.brokers)
    return code


def _fuzz(rounds: int) -> int:
    """The end-to-end fuzz's long profile: ``rounds`` rounds of its test module (on the test
    session's private stack, as in CI), then its counts (the last line, JSON)."""
    with tempfile.TemporaryDirectory(prefix="horae-fuzz-") as tmp:
        report = Path(tmp) / "counts.json"
        env = dict(os.environ, HORAE_FUZZ_EXAMPLES=str(rounds), HORAE_FUZZ_REPORT=str(report))
        module = CHECKOUT / "tests" / "integration" / "security" / "test_fuzz_e2e.py"
        command = [sys.executable, "-m", "pytest", "-q", str(module), "-o", "timeout=0"]
        code = subprocess.run(command, env=env, cwd=CHECKOUT, check=False).returncode
        if report.exists():
            print(json.dumps(json.loads(report.read_text()), sort_keys=True))
        return code
