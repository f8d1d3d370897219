"""Acceptance of the definitions ingress on the real broker: Avro (client) and plain JSON decode
identically; a malformed and a cross-tenant record are quarantined with their causes while the
valid records around them pass."""

from __future__ import annotations

import time
from dataclasses import replace

from confluent_kafka import Consumer, Producer

from horae.client import HoraeClient, cron_trigger, definition_json
from horae.contracts import events as ev
from horae.contracts import signing
from horae.contracts.codec import decode, encode
from horae.contracts.ingress import Source, ingest_definition
from horae.contracts.topics import PRODUCER_DEFAULTS, Topic, topic_name
from horae.kafka.admin import Plan
from horae.kafka.config import client_config

KEYS = {"acme": {"acme-1": b"acme-secret"}, "evil": {"evil-1": b"evil-secret"}}


def run_ingress(bootstrap: str, prefix: str, expect: int) -> list[ev.TriggerDefinition]:
    """The test-side ingress loop: consume definitions, ingest each, quarantine the refused."""
    consumer = Consumer(
        client_config(
            bootstrap,
            {
                "group.id": f"ingress-{prefix}",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            },
        )
    )
    producer = Producer(client_config(bootstrap, PRODUCER_DEFAULTS))
    consumer.subscribe([topic_name(Topic.DEFINITIONS, prefix)])
    accepted: list[ev.TriggerDefinition] = []
    seen = 0
    deadline = time.monotonic() + 60
    try:
        while seen < expect and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error() is not None:
                continue
            seen += 1
            source = Source(msg.topic() or "", msg.partition() or 0, msg.offset() or 0)
            result = ingest_definition(msg.value(), msg.key(), source, KEYS)
            if isinstance(result, ev.Quarantined):
                producer.produce(
                    topic_name(Topic.QUARANTINE, prefix), key=msg.key(), value=encode(result)
                )
            else:
                accepted.append(result)
        assert producer.flush(30) == 0
    finally:
        consumer.close()
    assert seen == expect
    return accepted


def read_all(bootstrap: str, topic: str, expect: int) -> list[bytes]:
    consumer = Consumer(
        client_config(
            bootstrap,
            {
                "group.id": f"read-{topic}",
                "auto.offset.reset": "earliest",
            },
        )
    )
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(values) < expect and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                values.append(msg.value() or b"")
    finally:
        consumer.close()
    return values


def test_avro_json_malformed_and_cross_tenant(kafka_bootstrap: str, topics: Plan) -> None:
    prefix = topics.prefix
    client = HoraeClient(
        kafka_bootstrap, tenant="acme", key_id="acme-1", key=b"acme-secret", prefix=prefix
    )
    nightly = cron_trigger(
        "acme", "nightly", "0 9 * * 1-5", "https://hooks.acme.example/n", zone="Europe/Paris"
    )
    as_avro = client.put(nightly)
    as_json = client.put(replace(nightly, trigger_id="hourly"), fmt="json")
    raw = Producer(client_config(kafka_bootstrap, PRODUCER_DEFAULTS))
    definitions = topic_name(Topic.DEFINITIONS, prefix)
    # the same definition as hand-produced JSON (what kcat would send)
    raw.produce(definitions, key=b"acme/nightly", value=definition_json(as_avro))
    malformed = b'{"tenant": "acme", "trigger_id": '
    raw.produce(definitions, key=b"acme/broken", value=malformed)
    forged = encode(signing.sign(replace(nightly, author="mallory"), "evil-1", b"evil-secret"))
    raw.produce(definitions, key=b"acme/nightly", value=forged)
    assert raw.flush(30) == 0
    after = client.put(replace(nightly, trigger_id="weekly", version=1))
    client.close()

    accepted = run_ingress(kafka_bootstrap, prefix, expect=6)
    assert sorted(accepted, key=lambda d: d.trigger_id) == sorted(
        [as_avro, as_avro, as_json, after], key=lambda d: d.trigger_id
    )
    quarantined = [
        decode(v, ev.Quarantined)
        for v in read_all(kafka_bootstrap, topic_name(Topic.QUARANTINE, prefix), 2)
    ]
    by_cause = {q.cause: q for q in quarantined}
    assert set(by_cause) == {"json", "cross-tenant"}
    assert by_cause["json"].original == malformed
    assert by_cause["json"].source_topic == definitions
    assert by_cause["cross-tenant"].original == forged
    assert by_cause["cross-tenant"].tenant == "acme"
    assert "evil" in by_cause["cross-tenant"].detail
