"""DLQ redrive: send exhausted fires again, under their original fire key.

:func:`dlq_entries` lists the DLQ (read_committed, every partition). :func:`redrive` produces, for
each selected entry (the latest DLQ record per fire key), a new order on the retry lane, on the
DLQ record's partition (the trigger's) and keyed by the same fire key:
attempt = the DLQ'd attempt + 1 (attempt numbers stay unique per fire), ``not_before`` = now, no
deadline and no bounded age (``max_event_age_s``, ``max_retry_duration_s``: the operator asked
for it after the fact), and headers ``horae-redrive-of:
<dlq topic>:<partition>:<offset>`` (every record of the redriven attempts carries it) and
``horae-budget-base`` = the DLQ'd attempt, so the retry policy's attempt budget starts afresh.
A dispatcher consumes it like any retry; its class is the fire's origin lane. Each redrive is a
privileged act: an :class:`~horae.contracts.events.AuditEntry` (action ``dlq.redrive``, the
operator's Kafka principal, role ``platform``, the fire key and the DLQ record) goes to the
``audit`` topic with its order, flushed together.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from confluent_kafka import Consumer, Producer

from horae.contracts import events as ev
from horae.contracts.codec import DecodeError, decode, encode
from horae.contracts.ids import event_id
from horae.contracts.topics import PRODUCER_DEFAULTS, Topic, topic_name
from horae.kafka.config import client_config
from horae.kafka.reader import read_partition
from horae.streams.dispatcher.conclude import H_DLQ_CAUSE
from horae.streams.dispatcher.records import OrderHeaders


@dataclass(frozen=True, slots=True)
class DlqEntry:
    topic: str
    partition: int
    offset: int
    order: ev.DispatchOrder
    cause: str

    @property
    def link(self) -> str:
        return f"{self.topic}:{self.partition}:{self.offset}"


def _partitions(bootstrap: str, topic: str) -> int:
    consumer = Consumer(client_config(bootstrap, {"group.id": "horae-dlq", "log_level": 3}))
    try:
        return len(consumer.list_topics(topic, timeout=30).topics[topic].partitions)
    finally:
        consumer.close()


def dlq_entries(bootstrap: str, prefix: str) -> list[DlqEntry]:
    """Every decodable DLQ record, oldest first per partition."""
    topic = topic_name(Topic.DLQ, prefix)
    out: list[DlqEntry] = []
    for p in range(_partitions(bootstrap, topic)):
        for msg in read_partition(bootstrap, topic, p):
            try:
                order = decode(msg.value() or b"", ev.DispatchOrder)
            except DecodeError:
                continue
            headers = dict(msg.headers() or [])
            cause = headers.get(H_DLQ_CAUSE)
            text = cause.decode(errors="replace") if isinstance(cause, bytes) else ""
            out.append(DlqEntry(topic, p, msg.offset() or 0, order, text))
    return out


def select(
    entries: Iterable[DlqEntry],
    *,
    fire_keys: Iterable[str] = (),
    tenant: str | None = None,
    trigger_id: str | None = None,
) -> list[DlqEntry]:
    """The latest entry per fire key matching every given filter (no filter: all)."""
    keys = set(fire_keys)
    latest: dict[str, DlqEntry] = {}
    for e in entries:
        fire = e.order.fire
        if keys and fire.fire_key not in keys:
            continue
        if tenant is not None and fire.tenant != tenant:
            continue
        if trigger_id is not None and fire.trigger_id != trigger_id:
            continue
        latest[fire.fire_key] = e
    return list(latest.values())


def redrive_order(entry: DlqEntry, now: datetime) -> tuple[ev.DispatchOrder, OrderHeaders]:
    """The order that sends ``entry``'s fire again, and the headers it carries (pure)."""
    order = replace(
        entry.order,
        lane=ev.Lane.RETRY,
        attempt=entry.order.attempt + 1,
        not_before=now,
        deadline=None,
        retry=replace(entry.order.retry, max_event_age_s=None, max_retry_duration_s=None),
    )
    return order, OrderHeaders(None, entry.order.attempt, entry.link)


def redrive_audit(entry: DlqEntry, principal: str, now: datetime) -> ev.AuditEntry:
    """The audit entry of redriving ``entry`` (pure)."""
    fire = entry.order.fire
    return ev.AuditEntry(
        audit_id=event_id("audit", "dlq.redrive", entry.link),
        tenant=fire.tenant,
        principal=principal,
        role=ev.Role.PLATFORM,
        action="dlq.redrive",
        at=now,
        allowed=True,
        trigger_id=fire.trigger_id,
        detail={"fire_key": fire.fire_key, "dlq": entry.link, "cause": entry.cause},
    )


def redrive(
    bootstrap: str,
    prefix: str,
    entries: Iterable[DlqEntry],
    clock: Callable[[], float] = lambda: datetime.now(UTC).timestamp(),
    principal: str = "operator",
) -> int:
    """Produce the redrive orders of ``entries`` and their audit entries (durably: flushed,
    acks=all); the number of orders."""
    producer = Producer(client_config(bootstrap, {**PRODUCER_DEFAULTS, "log_level": 4}))
    topic = topic_name(Topic.LANE_RETRY, prefix)
    audit_topic = topic_name(Topic.AUDIT, prefix)
    errors: list[str] = []

    def delivered(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(str(err))

    n = 0
    now = datetime.fromtimestamp(clock(), UTC)
    for entry in entries:
        order, carried = redrive_order(entry, now)
        headers: list[tuple[str, str | bytes | None]] = [*carried.to_headers()]
        producer.produce(
            topic,
            key=order.fire.fire_key.encode(),
            value=encode(order),
            partition=entry.partition,
            headers=headers,
            on_delivery=delivered,
        )
        audit = redrive_audit(entry, principal, now)
        producer.produce(
            audit_topic, key=audit.tenant.encode(), value=encode(audit), on_delivery=delivered
        )
        n += 1
    remaining = producer.flush(30)
    if remaining or errors:
        raise RuntimeError(f"redrive not fully written: {remaining} pending, errors {errors[:3]}")
    return n
