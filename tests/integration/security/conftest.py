from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.planner.harness import PlannerEnv


@pytest.fixture
def planner_env(kafka_bootstrap: str, topic_prefix: str) -> Iterator[PlannerEnv]:
    """Topics under this test's prefix, a producer, and the planners the test starts (stopped
    or killed at the end)."""
    env = PlannerEnv(kafka_bootstrap, topic_prefix)
    env.setup()
    try:
        yield env
    finally:
        env.close()
