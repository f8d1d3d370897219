"""Fixtures of the security tests: a planner environment per test, or a topic prefix shared by
one module's scenario; every topic under either is deleted at the end."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from horae.devstack.stack import Endpoints
from tests.integration.planner.harness import PlannerEnv
from tests.topics import delete_topics_under


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


@pytest.fixture(scope="module")
def module_prefix(stack: Endpoints) -> Iterator[str]:
    """A topic prefix shared by one module's tests (one scenario, many checks); every topic
    under it is deleted when the module ends."""
    prefix = f"t{uuid.uuid4().hex[:10]}."
    yield prefix
    delete_topics_under(stack.kafka_bootstrap, prefix)
