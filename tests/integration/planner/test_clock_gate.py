"""Clock gate: a planner whose clock drifts from the broker's stops deciding, releases its
partitions, and says so in a metric, rather than firing on a bad clock."""

from __future__ import annotations

import time

from horae.ports import SYSTEM_CLOCK
from horae.streams.planner.clock import ClockGate, KafkaBrokerClock, clock_topic
from tests.integration.planner.harness import PlannerEnv, definition, ledger
from tests.waiting import wait_until


class BusyClock:
    """The system clock, whose monotonic reading can be moved ahead: time spent busy elsewhere,
    without waiting for it."""

    def __init__(self) -> None:
        self.ahead_s = 0.0

    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic() + self.ahead_s


def test_skewed_clock_stops_deciding_and_releases_partitions(planner_env: PlannerEnv) -> None:
    planner_env.put(definition("tick"))
    skew = {"s": 0.0}
    planner = planner_env.start_thread("a", clock=lambda: time.time() + skew["s"])
    metrics = planner.metrics.registry

    def sample(name: str) -> float:
        value = metrics.get_sample_value(name)
        assert value is not None, name
        return value

    wait_until(lambda: sample("horae_planner_partitions_owned"), 60, 0.1, "partitions owned")
    wait_until(lambda: ledger(planner_env), 60, 0.2, "deciding on a good clock")
    skew["s"] = 30.0  # the local clock jumps 30 s ahead of the broker's
    jumped_at = time.time()
    wait_until(lambda: sample("horae_planner_clock_gate_closed_total"), 60, 0.1, "gate closed")
    closed_at = time.time()
    wait_until(
        lambda: sample("horae_planner_partitions_owned") == 0, 30, 0.1, "partitions released"
    )
    assert sample("horae_planner_clock_offset_seconds") < -25
    planner_env.stop_threads()
    fires = [f for f in ledger(planner_env) if f.trigger_id == "tick"]
    assert fires, "it decided while the clock was good"
    # nothing decided on the bad clock after the gate closed (before: at most one probe period)
    assert max(f.scheduled_at.timestamp() for f in fires) <= closed_at + 30
    assert max(f.decided_at.timestamp() for f in fires) <= closed_at + 30
    assert closed_at - jumped_at < 20, "the next probe notices the skew"


def test_a_reading_gone_stale_while_busy_is_refreshed_not_a_closed_gate(
    planner_env: PlannerEnv,
) -> None:
    """A long rebuild on assignment leaves the last reading old: the next poll probes again and
    the gate stays open; a broker that does not answer closes it."""
    clock = BusyClock()
    broker = KafkaBrokerClock(planner_env.bootstrap, clock_topic(planner_env.prefix))
    gate = ClockGate(broker, clock, 2.0, stale_after_s=1.0)
    try:
        assert gate.wait_first_reading()
        assert gate.open
        clock.ahead_s = 1.5  # busy elsewhere: the reading is stale now
        assert not gate.open
        gate.poll()
        assert gate.open
    finally:
        gate.close()
    unreachable = ClockGate(
        KafkaBrokerClock("127.0.0.1:1", "nowhere"), SYSTEM_CLOCK, 2.0, stale_after_s=1.0
    )
    try:
        assert not unreachable.wait_first_reading(timeout_s=1.0)
        unreachable.poll()
        assert not unreachable.open
    finally:
        unreachable.close()
