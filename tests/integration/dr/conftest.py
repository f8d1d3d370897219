"""A DR region on the session's broker needs that broker to be one local authenticating node (a
:class:`~horae.dr.regions.Region` wraps one node and logs in as its admin): with
``HORAE_TEST_BROKERS=3`` (a cluster) or an existing broker (``HORAE_KAFKA_BOOTSTRAP``, no admin
here) these tests are skipped; the default run (one private node) runs them."""

from __future__ import annotations

import pytest

from horae.devstack.kafka import KafkaNode
from horae.devstack.stack import LocalStack
from horae.settings import Settings


@pytest.fixture
def region_settings(local_stack: LocalStack, topic_prefix: str) -> Settings:
    """Settings of a region on the session's one local node, under the test's prefix."""
    kafka = local_stack.kafka
    if not isinstance(kafka, KafkaNode) or kafka.admin is None:
        pytest.skip("the session's Kafka is not one local authenticating node")
    return Settings(kafka_bootstrap=kafka.bootstrap, topic_prefix=topic_prefix)
