from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.planner.harness import PlannerEnv


@pytest.fixture
def planner_env(kafka_bootstrap: str, unique: str) -> Iterator[PlannerEnv]:
    env = PlannerEnv(kafka_bootstrap, f"t{unique}.")
    env.setup()
    try:
        yield env
    finally:
        env.close()
