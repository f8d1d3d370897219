from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.planner.harness import PlannerEnv


@pytest.fixture
def planner_env(kafka_bootstrap: str, topic_prefix: str) -> Iterator[PlannerEnv]:
    env = PlannerEnv(kafka_bootstrap, topic_prefix)
    env.setup()
    try:
        yield env
    finally:
        env.close()
