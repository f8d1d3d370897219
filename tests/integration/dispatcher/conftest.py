"""Fixtures of the dispatcher tests: the dispatcher's topics under this test's prefix."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.dispatcher.support import DispatchEnv


@pytest.fixture
def env(kafka_bootstrap: str, topic_prefix: str) -> Iterator[DispatchEnv]:
    """The dispatcher's topics under ``topic_prefix`` (deleted when the test ends)."""
    e = DispatchEnv(kafka_bootstrap, topic_prefix)
    e.setup()
    try:
        yield e
    finally:
        e.close()
