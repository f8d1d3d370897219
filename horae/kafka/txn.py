"""Consume-transform-produce with exactly-once commits (KIP-447) on confluent-kafka.

One :class:`TransactionalProcessor` pairs a consumer (group member, auto-commit off,
read_committed) with a transactional producer whose ``transactional.id`` is stable per worker slot,
so a restarted worker fences its crashed predecessor and aborts its open transaction at once.

Per batch: ``begin_transaction`` → produce → ``send_offsets_to_transaction(positions, group
metadata)`` → ``commit_transaction``. The offsets sent are the consumer's *next* offsets.

Errors, following librdkafka's transactions example (docs/local-stack.md, transactions):
- abortable (``txn_requires_abort``): abort, then seek every assigned partition back to its
  committed offset (an abort does not rewind the consumer) and let the caller rebuild its state;
- retriable on commit: retry the commit;
- fatal (fenced) or ambiguous (timeout on commit/offsets): destroy the producer, create a new one
  (``init_transactions`` fences and aborts what the old one left open) and rewind as above.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

from horae.contracts.topics import PRODUCER_DEFAULTS
from horae.failpoints import failpoint

log = logging.getLogger(__name__)

COMMIT_TIMEOUT_S = 30.0


def member_configs(
    bootstrap: str,
    group: str,
    slot: str,
    session_timeout_ms: int,
    *,
    min_poll_interval_ms: int,
    linger_ms: int,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The consumer and transactional producer configs of one processing worker slot: static
    membership (a restarted slot takes its partitions back at once), read_committed, manual
    commits, range assignment (co-partitioned topics together), and a ``transactional.id`` that is
    stable per slot (a restart fences its predecessor)."""
    member = f"{group}-{slot}"
    consumer = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "group.instance.id": member,
        "enable.auto.commit": False,
        "isolation.level": "read_committed",
        "auto.offset.reset": "earliest",
        "partition.assignment.strategy": "range",
        "session.timeout.ms": session_timeout_ms,
        "heartbeat.interval.ms": max(500, session_timeout_ms // 5),
        "max.poll.interval.ms": max(min_poll_interval_ms, session_timeout_ms * 3),
        "log_level": 4,
    }
    producer = {
        **PRODUCER_DEFAULTS,
        "bootstrap.servers": bootstrap,
        "transactional.id": member,
        "transaction.timeout.ms": 60_000,
        "linger.ms": linger_ms,
        "batch.num.messages": 10_000,
        "queue.buffering.max.messages": 1_000_000,
        "log_level": 4,
    }
    return consumer, producer


class TransactionFailed(RuntimeError):
    """The batch was not committed; the consumer was rewound and the caller must rebuild."""


UNASSIGNED = -1  # librdkafka's RD_KAFKA_PARTITION_UA: the partitioner picks by key


@dataclass(slots=True)
class OutRecord:
    topic: str
    key: bytes
    value: bytes | None
    partition: int | None = None
    headers: Sequence[tuple[str, bytes]] | None = None


def _kafka_error(exc: KafkaException) -> KafkaError | None:
    err = exc.args[0] if exc.args else None
    return err if isinstance(err, KafkaError) else None


class TransactionalProcessor:
    """A consumer plus its transactional producer; :meth:`commit` writes one batch atomically."""

    def __init__(
        self,
        consumer: Consumer,
        producer_config: dict[str, Any],
        on_rewind: Callable[[], None] = lambda: None,
    ) -> None:
        self.consumer = consumer
        self._producer_config = dict(producer_config)
        self._producer_config.setdefault("enable.idempotence", True)
        self._producer_config.setdefault("partitioner", "murmur2_random")
        self._producer_config.setdefault("linger.ms", 5)
        self._on_rewind = on_rewind
        self.aborts = 0
        self.producer_restarts = 0
        self.producer = self._new_producer()

    def _new_producer(self) -> Producer:
        producer = Producer(self._producer_config)
        producer.init_transactions(COMMIT_TIMEOUT_S)
        return producer

    def close(self) -> None:
        self.producer.flush(10)

    # ------------------------------------------------------------------------------------
    def commit(self, records: Sequence[OutRecord], offsets: Sequence[TopicPartition]) -> None:
        """Produce ``records`` and commit ``offsets`` (next offsets) in one transaction.

        Raises :class:`TransactionFailed` after aborting and rewinding when it could not commit.
        """
        try:
            self.producer.begin_transaction()
            for rec in records:
                self._produce(rec)
            if offsets:
                self.producer.send_offsets_to_transaction(
                    list(offsets), self.consumer.consumer_group_metadata(), COMMIT_TIMEOUT_S
                )
            self.producer.flush(COMMIT_TIMEOUT_S)
            failpoint("before_commit")
            self._commit_with_retries()
            failpoint("after_commit")
        except KafkaException as exc:
            self._recover(exc)
            raise TransactionFailed(str(exc)) from exc

    def _produce(self, rec: OutRecord) -> None:
        partition = UNASSIGNED if rec.partition is None else rec.partition
        while True:
            try:
                if rec.headers:
                    self.producer.produce(
                        rec.topic, rec.value, rec.key, partition, headers=list(rec.headers)
                    )
                else:  # positional: no keyword parsing on the planner's hot path
                    self.producer.produce(rec.topic, rec.value, rec.key, partition)
                return
            except BufferError:
                self.producer.poll(0.1)

    def _commit_with_retries(self) -> None:
        for _ in range(5):
            try:
                self.producer.commit_transaction(COMMIT_TIMEOUT_S)
                return
            except KafkaException as exc:
                err = _kafka_error(exc)
                if err is not None and err.retriable() and not err.txn_requires_abort():
                    continue
                raise
        self.producer.commit_transaction(COMMIT_TIMEOUT_S)

    def _recover(self, exc: KafkaException) -> None:
        err = _kafka_error(exc)
        self.aborts += 1
        abortable = err is not None and err.txn_requires_abort() and not err.fatal()
        if abortable:
            try:
                self.producer.abort_transaction(COMMIT_TIMEOUT_S)
            except KafkaException:
                abortable = False
        if not abortable:
            log.warning("transactional producer unusable (%s); creating a new one", exc)
            self.producer_restarts += 1
            self.producer = self._new_producer()
        self.rewind()

    def rewind(self) -> None:
        """Seek every assigned partition back to its committed offset and notify the owner."""
        assignment = self.consumer.assignment()
        if assignment:
            committed = self.consumer.committed(assignment, timeout=COMMIT_TIMEOUT_S)
            for tp in committed:
                offset = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
                try:
                    self.consumer.seek(TopicPartition(tp.topic, tp.partition, offset))
                except KafkaException as exc:  # not fetched yet: it starts there anyway
                    log.debug("seek %s[%d] skipped: %s", tp.topic, tp.partition, exc)
        self._on_rewind()
