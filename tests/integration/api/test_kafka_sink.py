"""The API's Kafka sink on the real broker: a definition lands on its trigger's partition of
``definitions`` (murmur2, as the planner expects), a tenant-wide command on every partition of
``commands``, each decodable to what was sent; an unreachable broker is reported by ``problem``."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

from horae.api.adapters import KafkaSink
from horae.client import cron_trigger
from horae.contracts import events as ev
from horae.contracts.codec import decode
from horae.contracts.topics import Topic, partition_for, topic_name
from horae.kafka.config import client_config
from tests.waiting import wait_until

PARTITIONS = 3


def records(bootstrap: str, topic: str, n: int) -> list[tuple[int, object]]:
    consumer = Consumer(
        client_config(bootstrap, {"group.id": topic + ".check", "auto.offset.reset": "earliest"})
    )
    consumer.subscribe([topic])
    got: list[tuple[int, object]] = []

    def more() -> bool:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append((msg.partition() or 0, decode(msg.value() or b"")))
        return len(got) >= n

    try:
        wait_until(more, timeout_s=60, interval_s=0)
    finally:
        consumer.close()
    return got


def test_definitions_and_tenant_wide_commands(kafka_bootstrap: str, topic_prefix: str) -> None:
    admin = AdminClient(client_config(kafka_bootstrap))
    names = [topic_name(t, topic_prefix) for t in (Topic.DEFINITIONS, Topic.COMMANDS)]
    for f in admin.create_topics([NewTopic(n, PARTITIONS, 1) for n in names]).values():
        f.result(timeout=30)
    sink = KafkaSink(kafka_bootstrap, topic_prefix)
    try:
        assert sink.problem() is None
        d = cron_trigger("acme", "nightly", "0 9 * * *", "https://hooks.acme.example/x")
        asyncio.run(sink.put_definition(d))
        now = datetime.now(UTC).replace(microsecond=0)
        command = ev.Command(
            command_id="c1",
            tenant="acme",
            trigger_id=ev.TENANT_WIDE,
            kind=ev.CommandKind.PAUSE,
            requested_by="ops",
            role=ev.Role.PLATFORM,
            requested_at=now,
            expires_at=now + timedelta(minutes=5),
        )
        asyncio.run(sink.put_command(command, every_partition=True))
    finally:
        sink.close()
    [(partition, got)] = records(kafka_bootstrap, names[0], 1)
    assert got == d and partition == partition_for(ev.trigger_key("acme", "nightly"), PARTITIONS)
    commands = records(kafka_bootstrap, names[1], PARTITIONS)
    assert sorted(p for p, _ in commands) == list(range(PARTITIONS))
    assert all(c == command for _, c in commands)
    unreachable = KafkaSink("127.0.0.1:1", topic_prefix)
    try:
        assert unreachable.problem() is not None
    finally:
        unreachable.close()


def test_concurrent_puts_each_return_on_their_own_acknowledgement(
    kafka_bootstrap: str, topic_prefix: str
) -> None:
    admin = AdminClient(client_config(kafka_bootstrap))
    name = topic_name(Topic.DEFINITIONS, topic_prefix)
    for f in admin.create_topics([NewTopic(name, PARTITIONS, 1)]).values():
        f.result(timeout=30)
    sink = KafkaSink(kafka_bootstrap, topic_prefix)
    sent = [
        cron_trigger("acme", f"t{i}", "0 9 * * *", "https://hooks.acme.example/x")
        for i in range(50)
    ]

    async def put_all() -> None:
        await asyncio.gather(*(sink.put_definition(d) for d in sent))

    try:
        asyncio.run(put_all())
    finally:
        sink.close()
    got = records(kafka_bootstrap, name, len(sent))
    assert sorted(d.trigger_id for _, d in got) == sorted(d.trigger_id for d in sent)  # type: ignore[attr-defined]
