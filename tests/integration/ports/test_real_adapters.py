"""The contract suites over the real adapters: Kafka (``TransactionalProcessor``,
``KafkaPartitionReader``) and PostgreSQL (``ProjectionStore``). Topics live under the test's
prefix and are deleted at the end (``topic_prefix``); the schema is dropped."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import psycopg
import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from horae.kafka.reader import KafkaPartitionReader
from horae.kafka.txn import TransactionalProcessor, member_configs
from horae.projections.rows import Stage
from horae.projections.store import ProjectionStore
from tests.unit.ports.contracts import (
    IN,
    OUT,
    STORE_TOPIC,
    LogRig,
    ReadModelStoreContract,
    TransactionalLogContract,
)


class TestKafkaLog(TransactionalLogContract):
    @pytest.fixture
    def rig(self, kafka_bootstrap: str, topic_prefix: str) -> Iterator[LogRig]:
        topics = {IN: f"{topic_prefix}in", OUT: f"{topic_prefix}out"}
        admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
        for future in admin.create_topics([NewTopic(t, 2, 1) for t in topics.values()]).values():
            future.result(timeout=30)
        producer = Producer({"bootstrap.servers": kafka_bootstrap, "enable.idempotence": True})

        def member(on_rewind: Callable[[], None]) -> TransactionalProcessor:
            consumer_config, producer_config = member_configs(
                kafka_bootstrap, f"{topic_prefix}group", "a", 6000,
                min_poll_interval_ms=30_000, linger_ms=5,
            )  # fmt: skip
            return TransactionalProcessor(Consumer(consumer_config), producer_config, on_rewind)

        def produce(topic: str, key: bytes, value: bytes, partition: int) -> None:
            producer.produce(topic, value, key, partition)
            producer.flush(30)

        yield LogRig(topics, member, KafkaPartitionReader(kafka_bootstrap), produce)


class TestPostgresStore(ReadModelStoreContract):
    @pytest.fixture
    def rig(self, database_url: str, unique: str) -> Iterator[ProjectionStore]:
        schema = f"ports_{unique}"
        store = ProjectionStore(database_url, schema, stage_topics={Stage.AUDIT: STORE_TOPIC})
        store.connect()
        try:
            yield store
        finally:
            store.close()
            with psycopg.connect(database_url, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
