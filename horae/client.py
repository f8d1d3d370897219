"""A small client for Horae's tenants: produce trigger definitions, consume schedule events.

    from horae.client import HoraeClient, cron_trigger

    client = HoraeClient("127.0.0.1:19092", tenant="acme", key_id="acme-1", key=b"secret")
    client.put(cron_trigger("acme", "nightly", "0 9 * * 1-5", "https://hooks.acme.example/x",
                            secret_refs=["acme-hook"]))
    for event in client.schedule_events(group_id="acme-watch", timeout_s=60):
        print(event.type, event.trigger_id, event.scheduled_at)

Definitions are signed with the tenant's ingress key (see ``docs/contracts.md``) and produced to
``<prefix>definitions`` keyed by ``<tenant>/<trigger_id>``, as wire Avro (default) or plain JSON.
Schedule events are read from the tenant's own topic ``<prefix>events.<token>`` (or a sub-topic
an event target names): the client never sees another tenant's records, so it filters nothing.
Kafka credentials: ``credentials=`` (the tenant's SASL/SCRAM user, ``horae tenants add``), else
``HORAE_KAFKA_USERNAME`` / ``HORAE_KAFKA_PASSWORD``, else none (:mod:`horae.kafka.config`).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Literal

from confluent_kafka import Consumer, KafkaException, Producer

from horae.contracts import events as ev
from horae.contracts import signing
from horae.contracts._reflect import to_avro
from horae.contracts.codec import Codec, DecodeError, default_codec
from horae.contracts.jsonform import plain
from horae.contracts.topics import (
    PRODUCER_DEFAULTS,
    Topic,
    event_topic_problem,
    events_topic,
    topic_name,
)
from horae.kafka.acls import tenant_group_prefix
from horae.kafka.config import KafkaCredentials, client_config

__all__ = ["HoraeClient", "cron_trigger", "definition_json"]


def cron_trigger(
    tenant: str,
    trigger_id: str,
    expr: str,
    url: str,
    *,
    zone: str = "UTC",
    version: int = 1,
    author: str = "client",
    payload: bytes = b"",
    policies: ev.Policies | None = None,
    secret_refs: Sequence[str] = (),
) -> ev.TriggerDefinition:
    """An (unsigned) live cron definition calling ``url``, with safe default policies, signed at
    delivery with the tenant's webhook secrets named by ``secret_refs`` (current first; the
    planner refuses a webhook without one its tenant owns)."""
    return ev.TriggerDefinition(
        tenant=tenant,
        trigger_id=trigger_id,
        version=version,
        state=ev.DefinitionState.LIVE,
        recurrence=ev.Recurrence(kind=ev.RecurrenceKind.CRON, expr=expr, zone=zone),
        target=ev.Target(kind=ev.TargetKind.WEBHOOK, url=url, secret_refs=tuple(secret_refs)),
        authored_at=datetime.now(UTC).replace(microsecond=0),
        author=author,
        payload=payload,
        policies=policies or ev.Policies(),
    )


def definition_json(d: ev.TriggerDefinition) -> bytes:
    """The plain JSON form of a definition that ingress accepts (e.g. to produce with kcat)."""
    return json.dumps(plain(to_avro(d)), sort_keys=True).encode()


class HoraeClient:
    """Produces this tenant's definitions and reads its schedule events."""

    def __init__(
        self,
        bootstrap: str,
        *,
        tenant: str,
        key_id: str,
        key: bytes,
        prefix: str = "horae.",
        codec: Codec | None = None,
        credentials: KafkaCredentials | None = None,
    ) -> None:
        self.bootstrap = bootstrap
        self.credentials = credentials
        self.tenant = tenant
        self.key_id = key_id
        self._key = key
        self.prefix = prefix
        self.codec = codec or default_codec()
        self._producer: Producer | None = None

    @property
    def events_topic(self) -> str:
        """This tenant's events topic, as an event target names it (without the prefix)."""
        return events_topic(self.tenant)

    def sign(self, d: ev.TriggerDefinition) -> ev.TriggerDefinition:
        if d.tenant != self.tenant:
            raise ValueError(f"this client is tenant {self.tenant!r}, not {d.tenant!r}")
        return signing.sign(d, self.key_id, self._key)

    def put(
        self, d: ev.TriggerDefinition, *, fmt: Literal["avro", "json"] = "avro"
    ) -> ev.TriggerDefinition:
        """Sign ``d`` and produce it (waits for the broker's ack); returns the signed version."""
        signed = self.sign(d)
        value = self.codec.encode(signed) if fmt == "avro" else definition_json(signed)
        self._produce(Topic.DEFINITIONS, ev.trigger_key(d.tenant, d.trigger_id), value)
        return signed

    def delete(self, d: ev.TriggerDefinition) -> ev.TriggerDefinition:
        """Produce the next version of ``d`` with state ``deleted``."""
        gone = replace(d, version=d.version + 1, state=ev.DefinitionState.DELETED, signature=None)
        return self.put(gone)

    def schedule_events(
        self,
        *,
        group_id: str | None = None,
        from_beginning: bool = True,
        timeout_s: float = 30.0,
        max_events: int | None = None,
        topic: str | None = None,
    ) -> Iterator[ev.ScheduleEvent]:
        """This tenant's schedule events until ``timeout_s`` passes with none (or ``max_events``),
        read from its events topic or ``topic`` (a sub-topic of its namespace, as its event
        target names it; any other raises ``ValueError``). Records that do not decode are
        skipped (never raise); offsets are committed as read, in the consumer group
        ``<prefix>tenant.<token>.<group_id>`` (the groups the tenant's Kafka user may use; default
        ``group_id``: a new ``events-<random>``)."""
        topic = topic or self.events_topic
        problem = event_topic_problem(self.tenant, topic)
        if problem is not None:
            raise ValueError(problem)
        consumer = Consumer(
            client_config(
                self.bootstrap,
                {
                    "group.id": tenant_group_prefix(self.tenant, self.prefix)
                    + (group_id or f"events-{uuid.uuid4().hex[:8]}"),
                    "auto.offset.reset": "earliest" if from_beginning else "latest",
                    "enable.auto.commit": True,
                    "isolation.level": "read_committed",
                },
                credentials=self.credentials,
            )
        )
        consumer.subscribe([self.prefix + topic])
        seen = 0
        deadline = time.monotonic() + timeout_s
        try:
            while time.monotonic() < deadline and (max_events is None or seen < max_events):
                msg = consumer.poll(0.5)
                if msg is None or msg.error() is not None:
                    continue
                try:
                    event = self.codec.decode(msg.value() or b"", ev.ScheduleEvent)
                except DecodeError:
                    continue
                seen += 1
                deadline = time.monotonic() + timeout_s
                yield event
        finally:
            consumer.close()

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(30)
            self._producer = None

    def __enter__(self) -> HoraeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _produce(self, topic: Topic, key: str, value: bytes) -> None:
        if self._producer is None:
            self._producer = Producer(
                client_config(self.bootstrap, PRODUCER_DEFAULTS, credentials=self.credentials)
            )
        errors: list[object] = []
        self._producer.produce(
            topic_name(topic, self.prefix),
            key=key.encode(),
            value=value,
            on_delivery=lambda err, _msg: errors.append(err) if err is not None else None,
        )
        if self._producer.flush(30) != 0:
            raise KafkaException("definition not acknowledged within 30 s")
        if errors:
            raise KafkaException(errors[0])
