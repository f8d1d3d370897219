"""COMMIT-response-loss: a planner's transaction commit reaches the broker, but the answer never
reaches the planner (a proxy in front of the broker forwards the ``EndTxn`` request, drops the
broker's answer and cuts the connection). The planner must neither decide those instants a
second time after it recovers nor stall: every instant stays committed exactly once and deciding
goes on within seconds."""

from __future__ import annotations

import signal
import time

import pytest

from tests.chaos.kafka_proxy import KafkaProxy
from tests.chaos.test_planner_kill import TRIGGERS, _all_fired_after, _contiguous_once
from tests.integration.planner.harness import PlannerEnv, decided_since, definition
from tests.waiting import wait_until

CUTS = 3
RECOVERY_S = 20.0  # deciding again after a lost answer, at most


@pytest.mark.timeout(300)
def test_lost_commit_answer_decides_nothing_twice_and_does_not_stall(
    planner_env: PlannerEnv, proxy: KafkaProxy
) -> None:
    for trigger in TRIGGERS:
        planner_env.put(definition(trigger))
    env = proxy.client_env()
    planner = planner_env.spawn("lossy", env)
    wait_until(lambda: decided_since(planner_env, 0, TRIGGERS), 90, 0.5, "the planner decides")
    assert proxy.commits_seen > 0, "the planner's commits do not go through the proxy"
    recoveries = []
    for _ in range(CUTS):
        proxy.cut_next_commit()
        wait_until(proxy.cut.is_set, 30, 0.05, "no commit went through the proxy")
        cut_at = time.time()
        wait_until(_all_fired_after(planner_env, cut_at + 1), 60, 0.2, "deciding stalled")
        recoveries.append(time.time() - cut_at)
        assert planner.poll() is None, f"the planner died ({planner.returncode})"
    planner.send_signal(signal.SIGTERM)
    assert planner.wait(60) == 0
    _contiguous_once(planner_env)  # read_committed: every instant once, none missing
    print(f"recovered after {[round(r, 1) for r in recoveries]} s")
    assert max(recoveries) < RECOVERY_S + 2
