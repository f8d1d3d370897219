from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient

from horae.kafka.admin import Plan, admin_client, apply


@pytest.fixture
def admin(kafka_bootstrap: str) -> AdminClient:
    return admin_client(kafka_bootstrap)


@pytest.fixture
def plan(topic_prefix: str) -> Plan:
    """The catalogue under this test's prefix (its topics are deleted when the test ends)."""
    return Plan(prefix=topic_prefix, partitions=3, replication_factor=1)


@pytest.fixture
def topics(admin: AdminClient, plan: Plan) -> Plan:
    """The whole catalogue, created."""
    apply(admin, plan)
    return plan
