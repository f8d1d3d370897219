"""Fixtures of the security tests: a topic prefix shared by one module's scenario, every topic
under it deleted at the end (``planner_env`` comes from ``tests/conftest.py``)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from horae.devstack.stack import Endpoints
from horae.kafka.admin import delete_under


@pytest.fixture(scope="module")
def module_prefix(stack: Endpoints) -> Iterator[str]:
    """A topic prefix shared by one module's tests (one scenario, many checks); every topic
    under it is deleted when the module ends."""
    prefix = f"t{uuid.uuid4().hex[:10]}."
    yield prefix
    delete_under(stack.kafka_bootstrap, prefix)
