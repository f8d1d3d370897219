"""Starts one process of ``horae demo`` so that it never outlives the demo.

``python -m horae.cli.demo_child <demo pid> <command...>`` asks Linux to send it SIGTERM when its
parent dies (``prctl(PR_SET_PDEATHSIG)``, kept across ``exec``), then becomes
``python -m horae.cli.main <command...>`` in the same process (same pid: the demo supervises it
as before). So a demo killed with SIGKILL still drains its planner, projector, dispatcher and
API, as a SIGTERM from a supervisor would. If the demo is already gone when the child starts, it
exits at once. On another system the child simply runs the command (no parent-death signal).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1  # linux/prctl.h


def main(argv: list[str]) -> None:
    parent, command = int(argv[0]), argv[1:]
    if sys.platform == "linux":
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM))
    if os.getppid() != parent:  # the demo died before the signal was asked for
        sys.exit(0)
    os.execv(sys.executable, [sys.executable, "-m", "horae.cli.main", *command])


if __name__ == "__main__":
    main(sys.argv[1:])
