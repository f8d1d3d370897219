"""Waiting for a local service that is slow but making progress (horae.devstack.procs), on a
virtual clock."""

from __future__ import annotations

from collections.abc import Callable

from horae.devstack.procs import wait_while_progressing


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def _wait(clock: Clock, ready_at: float, progress: Callable[[], object]) -> bool:
    return wait_while_progressing(
        lambda: clock.now >= ready_at,
        progress,
        idle_s=10,
        cap_s=100,
        interval_s=1,
        monotonic=clock.monotonic,
        sleep=clock.sleep,
    )


def test_ready_within_the_idle_budget() -> None:
    clock = Clock()
    assert _wait(clock, 5, lambda: 0)
    assert clock.now == 5


def test_stuck_gives_up_after_the_idle_budget() -> None:
    clock = Clock()
    assert not _wait(clock, 50, lambda: 0)
    assert clock.now == 10


def test_progress_extends_the_wait_up_to_the_cap() -> None:
    clock = Clock()
    assert _wait(clock, 50, lambda: clock.now // 5)  # the log grows every 5 s
    assert clock.now == 50
    clock = Clock()
    assert not _wait(clock, 500, lambda: clock.now // 5)
    assert clock.now == 100
