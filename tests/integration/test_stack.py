"""The local stack is real: transactions, read_committed isolation, compaction, PostgreSQL."""

from __future__ import annotations

import time

import psycopg
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from horae.kafka.config import client_config
from tests.waiting import wait_until


def _create_topic(bootstrap: str, name: str, config: dict[str, str] | None = None) -> None:
    admin = AdminClient(client_config(bootstrap))
    futures = admin.create_topics([NewTopic(name, 1, 1, config=config or {})])
    futures[name].result(timeout=30)


def _consume_all(
    bootstrap: str, topic: str, group: str, expect: int, wait_s: float = 10.0
) -> list[tuple[bytes | None, bytes | None]]:
    consumer = Consumer(
        client_config(
            bootstrap,
            {
                "group.id": group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
            },
        )
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    out: list[tuple[bytes | None, bytes | None]] = []
    deadline = time.monotonic() + wait_s
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None or msg.error():
                if len(out) >= expect and msg is None:
                    break
                continue
            out.append((msg.key(), msg.value()))
    finally:
        consumer.close()
    return out


def _txn_producer(bootstrap: str, txid: str) -> Producer:
    producer = Producer(
        client_config(bootstrap, {"transactional.id": txid, "enable.idempotence": True})
    )
    producer.init_transactions(30)
    return producer


def test_committed_transaction_is_seen_exactly(kafka_bootstrap: str, topic_prefix: str) -> None:
    topic = f"{topic_prefix}commit"
    _create_topic(kafka_bootstrap, topic)
    producer = _txn_producer(kafka_bootstrap, f"tx-{topic}")
    producer.begin_transaction()
    for i in range(10):
        producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode())
    producer.commit_transaction(30)
    got = _consume_all(kafka_bootstrap, topic, f"g-{topic}", expect=10)
    assert got == [(f"k{i}".encode(), f"v{i}".encode()) for i in range(10)]


def test_aborted_transaction_is_invisible(kafka_bootstrap: str, topic_prefix: str) -> None:
    topic = f"{topic_prefix}abort"
    _create_topic(kafka_bootstrap, topic)
    producer = _txn_producer(kafka_bootstrap, f"tx-{topic}")
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, key=b"aborted", value=str(i).encode())
    producer.abort_transaction(30)
    producer.begin_transaction()
    producer.produce(topic, key=b"kept", value=b"1")
    producer.commit_transaction(30)
    got = _consume_all(kafka_bootstrap, topic, f"g-{topic}", expect=1)
    assert got == [(b"kept", b"1")]


def test_compacted_topic_keeps_latest_per_key(kafka_bootstrap: str, topic_prefix: str) -> None:
    topic = f"{topic_prefix}compact"
    config = {
        "cleanup.policy": "compact",
        "segment.ms": "100",
        "min.cleanable.dirty.ratio": "0.01",
        "delete.retention.ms": "100",
    }
    _create_topic(kafka_bootstrap, topic, config)
    admin = AdminClient(client_config(kafka_bootstrap))
    described = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)])
    configs = next(iter(described.values())).result(timeout=30)
    assert configs["cleanup.policy"].value == "compact"
    assert configs["segment.ms"].value == "100"

    producer = Producer(client_config(kafka_bootstrap))
    for value in (b"old-1", b"old-2", b"new"):
        producer.produce(topic, key=b"trigger-1", value=value)
        producer.produce(topic, key=b"trigger-2", value=value + b"-2")
    producer.flush(30)

    def compacted() -> list[tuple[bytes | None, bytes | None]]:
        # roll the active segment: later records land in a new segment after segment.ms
        producer.produce(topic, key=b"roller", value=b"x")
        producer.flush(30)
        read = _consume_all(kafka_bootstrap, topic, f"g-{topic}", 1, 3)
        survivors = [kv for kv in read if kv[0] != b"roller"]
        return survivors if len(survivors) == 2 else []

    survivors = wait_until(compacted, 60, 0.5, "the log cleaner never compacted")
    assert survivors == [(b"trigger-1", b"new"), (b"trigger-2", b"new-2")]


def test_postgres_round_trip(database_url: str, unique: str) -> None:
    with psycopg.connect(database_url) as conn:
        conn.execute(f"create table rt_{unique} (id int primary key, note text)")
        conn.execute(f"insert into rt_{unique} values (%s, %s)", (1, "horae"))
        conn.commit()
        row = conn.execute(f"select note from rt_{unique} where id = 1").fetchone()
        conn.execute(f"drop table rt_{unique}")
    assert row == ("horae",)
