"""This machine's speed today, printed beside every ratio: machines of this kind differ by up to
~3x in raw CPU speed from one day to the next, so only figures of one run compare."""

from __future__ import annotations

import time


def calibrate() -> float:
    """Seconds of a 10M-iteration CPython loop (best of three)."""
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        for _ in range(10_000_000):
            pass
        best = min(best, time.perf_counter() - t)
    return round(best, 3)
