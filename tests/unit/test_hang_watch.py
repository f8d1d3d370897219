"""The hang watch: a call past its deadline, or a loop that stops coming round, is reported (by
default the process exits for its supervisor to restart it); calls that return, loops that come
round or ended, or none, are not."""

from __future__ import annotations

import threading

from horae.kafka.txn import HangWatch
from tests.waiting import wait_until


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_only_a_call_in_progress_past_its_deadline_is_overdue() -> None:
    clock = Clock()
    watch = HangWatch(40.0, on_hang=lambda *_: None, clock=clock)
    assert watch.overdue(clock.now + 100) is None  # no call
    with watch.call("send_offsets_to_transaction"):
        assert watch.overdue(clock.now + 39.9) is None
        assert watch.overdue(clock.now + 40.5) == ("send_offsets_to_transaction", 40.5)
    assert watch.overdue(clock.now + 100) is None  # it returned


def test_the_watch_thread_reports_a_blocked_call_once() -> None:
    hung: list[tuple[str, float]] = []
    reported = threading.Event()

    def on_hang(call: str, blocked_s: float) -> None:
        hung.append((call, blocked_s))
        reported.set()

    watch = HangWatch(0.2, on_hang=on_hang)
    with watch.call("flush"):
        wait_until(reported.is_set, 5, 0.05, "the blocked call was not reported")
    assert [call for call, _ in hung] == ["flush"] and hung[0][1] >= 0.2


def test_a_loop_that_stops_coming_round_is_overdue_and_one_that_ended_is_not() -> None:
    clock = Clock()
    watch = HangWatch(120.0, on_hang=lambda *_: None, clock=clock)
    watch.beat("dispatcher committer loop")
    clock.now += 100
    watch.beat("dispatcher committer loop")  # came round: the deadline starts again
    watch.beat("dispatcher consumer loop")
    assert watch.overdue(clock.now + 119) is None
    assert watch.overdue(clock.now + 121) == ("dispatcher committer loop", 121)
    watch.done("dispatcher committer loop")
    watch.done("dispatcher consumer loop")
    assert watch.overdue(clock.now + 1000) is None


def test_the_watch_thread_reports_a_stuck_loop() -> None:
    reported = threading.Event()
    hung: list[str] = []

    def on_hang(name: str, blocked_s: float) -> None:
        hung.append(name)
        reported.set()

    watch = HangWatch(0.2, on_hang=on_hang)
    watch.beat("planner loop")  # and never again
    wait_until(reported.is_set, 5, 0.05, "the stuck loop was not reported")
    assert hung == ["planner loop"]
