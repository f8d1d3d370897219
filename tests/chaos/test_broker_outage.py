"""A broker outage in the middle of a planner's transaction: every connection of the planner is cut
and refused for a while (a proxy in front of the broker plays its death, as its clients see it)
while triggers fire every second, so the planner's next commit starts with no coordinator to
talk to. librdkafka's ``send_offsets_to_transaction`` can then block past its own timeout for
good; the planner must not stay silent: it either recovers by itself or exits with
``EXIT_HUNG`` for its supervisor (here the test) to restart, and deciding goes on. Every instant
stays committed exactly once."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from horae.kafka.txn import EXIT_HUNG, HANG_DEADLINE_S
from tests.chaos.kafka_proxy import KafkaProxy
from tests.chaos.test_planner_kill import TRIGGERS, _all_fired_after, _contiguous_once
from tests.integration.planner.harness import PlannerEnv, decided_since, definition
from tests.waiting import wait_until

OUTAGE_S = 12.0  # longer than the planner's session timeout (6 s)
OUTAGES = 2


@pytest.mark.timeout(420)
def test_a_planner_deciding_through_broker_outages_is_never_silent(
    planner_env: PlannerEnv, proxy: KafkaProxy, tmp_path: Path
) -> None:
    for trigger in TRIGGERS:
        planner_env.put(definition(trigger))
    env = proxy.client_env()
    log = tmp_path / "planner.log"
    planner = planner_env.spawn("outage", env, log)
    wait_until(lambda: decided_since(planner_env, 0, TRIGGERS), 90, 0.5, "the planner decides")
    recoveries: list[float] = []
    exits: list[int] = []
    for _ in range(OUTAGES):
        proxy.go_down()
        time.sleep(OUTAGE_S)  # the outage itself: nothing to wait for
        back_at = time.time()
        proxy.come_back()

        def deciding_again(since: float = back_at) -> bool:
            nonlocal planner
            code = planner.poll()
            if code is not None:  # the supervisor's part: restart what exited
                exits.append(code)
                planner = planner_env.spawn("outage", env, log)
            return _all_fired_after(planner_env, since)()

        limit = HANG_DEADLINE_S + 60
        wait_until(deciding_again, limit, 0.5, f"not deciding {limit} s after the broker's return")
        recoveries.append(time.time() - back_at)
    planner.send_signal(signal.SIGTERM)
    try:
        assert planner.wait(60) == 0
    except subprocess.TimeoutExpired:
        planner.kill()
        raise
    _contiguous_once(planner_env)  # read_committed: every instant once, none missing
    print(f"deciding again {[round(r, 1) for r in recoveries]} s after the return; exits {exits}")
    assert all(code == EXIT_HUNG for code in exits), f"exits {exits}: see {log.read_text()[-3000:]}"
