"""The user client against a real broker: produce definitions, consume only one's own events."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime

import pytest
from confluent_kafka import Consumer, Producer

from horae.client import HoraeClient, cron_trigger
from horae.contracts import events as ev
from horae.contracts.codec import decode, encode
from horae.contracts.ingress import Source, ingest_definition
from horae.contracts.topics import (
    PRODUCER_DEFAULTS,
    Topic,
    events_topic,
    partition_for,
    topic_name,
)
from horae.kafka.admin import Plan, admin_client, apply
from horae.kafka.config import client_config


@pytest.fixture
def prefix(kafka_bootstrap: str, topic_prefix: str) -> str:
    """The catalogue's topics under this test's prefix (deleted when the test ends)."""
    apply(
        admin_client(kafka_bootstrap),
        Plan(prefix=topic_prefix, partitions=3, replication_factor=1, tenants=("acme", "evil")),
    )
    return topic_prefix


def event(tenant: str, trigger_id: str) -> ev.ScheduleEvent:
    now = datetime.now(UTC)
    return ev.ScheduleEvent(
        event_id=uuid.uuid4().hex,
        type=ev.ScheduleEventType.TRIGGERED,
        tenant=tenant,
        trigger_id=trigger_id,
        emitted_at=now,
        trigger_version=1,
        fire_key=f"{tenant}/{trigger_id}/{now:%Y-%m-%dT%H:%M:%SZ}/0/scheduled",
        scheduled_at=now.replace(microsecond=0),
        origin=ev.Origin.SCHEDULED,
        payload=b'{"hello": 1}',
    )


def test_put_definition_lands_keyed_and_verifiable(kafka_bootstrap: str, prefix: str) -> None:
    with HoraeClient(
        kafka_bootstrap, tenant="acme", key_id="acme-1", key=b"k1", prefix=prefix
    ) as client:
        signed = client.put(cron_trigger("acme", "t1", "*/5 * * * *", "https://a.example/h"))
        with pytest.raises(ValueError, match="tenant"):
            client.put(cron_trigger("other", "t1", "*/5 * * * *", "https://a.example/h"))
    consumer = Consumer(
        client_config(kafka_bootstrap, {"group.id": prefix, "auto.offset.reset": "earliest"})
    )
    consumer.subscribe([topic_name(Topic.DEFINITIONS, prefix)])
    deadline = time.monotonic() + 30
    msg = None
    while msg is None and time.monotonic() < deadline:
        got = consumer.poll(0.5)
        msg = got if got is not None and got.error() is None else None
    consumer.close()
    assert msg is not None
    assert msg.key() == b"acme/t1"
    assert msg.partition() == partition_for("acme/t1", 3)
    assert abs(msg.timestamp()[1] / 1000 - time.time()) < 60  # "now", never a fire time
    source = Source(msg.topic() or "", msg.partition() or 0, msg.offset() or 0)
    assert ingest_definition(msg.value(), msg.key(), source, {"acme": {"acme-1": b"k1"}}) == signed
    assert decode(msg.value() or b"") == signed


def test_schedule_events_are_read_from_the_tenants_own_topic_only(
    kafka_bootstrap: str, prefix: str
) -> None:
    producer = Producer(client_config(kafka_bootstrap, PRODUCER_DEFAULTS))
    mine = [event("acme", "a"), event("acme", "b")]
    for e in [mine[0], event("evil", "x"), mine[1]]:
        key = ev.trigger_key(e.tenant, e.trigger_id).encode()
        producer.produce(events_topic(e.tenant, prefix), key=key, value=encode(e))
    producer.produce(events_topic("acme", prefix), key=b"acme/a", value=b"not avro")  # skipped
    assert producer.flush(30) == 0
    client = HoraeClient(kafka_bootstrap, tenant="acme", key_id="acme-1", key=b"k1", prefix=prefix)
    got = list(client.schedule_events(timeout_s=3))
    assert sorted(got, key=lambda e: e.trigger_id) == mine
    with pytest.raises(ValueError, match=r"events\.acme"):
        next(client.schedule_events(topic="events.evil"))
