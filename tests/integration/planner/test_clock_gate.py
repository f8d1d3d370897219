"""Clock gate: a planner whose clock drifts from the broker's stops deciding, releases its
partitions, and says so in a metric, rather than firing on a bad clock."""

from __future__ import annotations

import time

from horae.ports import SYSTEM_CLOCK
from horae.streams.planner.clock import ClockGate, KafkaBrokerClock, clock_topic
from tests.integration.planner.harness import PlannerEnv, definition, ledger


def test_skewed_clock_stops_deciding_and_releases_partitions(planner_env: PlannerEnv) -> None:
    planner_env.put(definition("tick"))
    skew = {"s": 0.0}
    planner = planner_env.start_thread("a", clock=lambda: time.time() + skew["s"])
    deadline = time.monotonic() + 60
    while planner.metrics.partitions_owned._value.get() == 0 and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(3)  # deciding on a good clock
    skew["s"] = 30.0  # the local clock jumps 30 s ahead of the broker's
    jumped_at = time.time()
    while planner.metrics.clock_gate_closed._value.get() == 0 and time.monotonic() < deadline:
        time.sleep(0.2)
    closed_at = time.time()
    time.sleep(3)
    assert planner.metrics.clock_gate_closed._value.get() >= 1
    assert planner.metrics.partitions_owned._value.get() == 0, "partitions released"
    assert planner.metrics.clock_offset._value.get() < -25
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
    broker = KafkaBrokerClock(planner_env.bootstrap, clock_topic(planner_env.prefix))
    gate = ClockGate(broker, SYSTEM_CLOCK, 2.0, stale_after_s=1.0)
    try:
        assert gate.wait_first_reading()
        time.sleep(1.5)  # busy elsewhere: the reading is stale now
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
