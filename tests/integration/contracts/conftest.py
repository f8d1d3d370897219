from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient

from horae.contracts.admin import Plan, admin_client, apply


@pytest.fixture
def admin(kafka_bootstrap: str) -> AdminClient:
    return admin_client(kafka_bootstrap)


@pytest.fixture
def plan(unique: str) -> Plan:
    return Plan(prefix=f"t{unique}.", partitions=3, replication_factor=1)


@pytest.fixture
def topics(admin: AdminClient, plan: Plan) -> Iterator[Plan]:
    """The whole catalogue under a unique prefix, deleted afterwards."""
    apply(admin, plan)
    yield plan
    names = [name for name, _ in plan.topics()]
    for future in admin.delete_topics(names, operation_timeout=30).values():
        future.result()
