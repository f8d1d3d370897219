"""Fixtures of the chaos tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.chaos.kafka_proxy import KafkaProxy


@pytest.fixture
def proxy(kafka_bootstrap: str) -> Iterator[KafkaProxy]:
    """A :class:`KafkaProxy` in front of the test's broker, closed when the test ends."""
    host, _, port = kafka_bootstrap.rpartition(":")
    p = KafkaProxy(host, int(port))
    try:
        yield p
    finally:
        p.close()
