"""Reading positions: one partition from the beginning to its end, and a rewind to the commits.

:func:`read_partition` reads outside any consumer group; it rebuilds state on assignment (the
planner's due index from its compacted changelog and the definitions). ``read_committed``: the end
is the last stable offset, so an open or aborted transaction is never part of the rebuilt state.
A read never waits for ever: an error that does not pass by itself raises at once, and a read
that gets nothing for ``STALL_S`` raises too; the caller decides what to do.

:func:`seek_to_committed` moves a group member back to its committed offsets, as an aborted
transaction requires (an abort does not rewind the consumer).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from typing import Protocol

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from horae.kafka.config import client_config

log = logging.getLogger(__name__)
POLL_BATCH = 10_000
#: A read runs to an end known in advance: the broker need not hold a fetch open for new records
#: (its default wait, 500 ms, was paid at the end of every partition read: most of a rebuild's
#: wall time), and a fetch may bring a whole partition's worth at once.
READ_FETCH_WAIT_MS = 10
READ_FETCH_BYTES = 16 * 1024 * 1024
COMMITTED_TIMEOUT_S = 30.0
#: a read that gets no record for this long before its end raises (it never waits for ever)
STALL_S = 30.0

# What a broker answers for a moment after a topic is created or a leader moves.
_SETTLING = frozenset(
    {
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError._TIMED_OUT,
        KafkaError._TRANSPORT,
    }
)


def end_offset(consumer: Consumer, tp: TopicPartition, timeout_s: float = 30.0) -> int:
    """The partition's high watermark (under read_committed: its last stable offset), asked of
    the broker (not cached). Asks again, within ``timeout_s``, while the partition's leadership
    settles; any other error, or still settling at the deadline, raises ``KafkaException``."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = max(0.5, deadline - time.monotonic())
        try:
            _, high = consumer.get_watermark_offsets(tp, timeout=min(10.0, left), cached=False)
            return int(high)
        except KafkaException as exc:
            if exc.args[0].code() not in _SETTLING or time.monotonic() >= deadline:
                raise
            time.sleep(0.2)


def _reader(bootstrap: str) -> Consumer:
    return Consumer(
        client_config(
            bootstrap,
            {
                "group.id": "horae-reader",  # never joins or commits: assign() only
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "enable.partition.eof": True,
                "fetch.max.bytes": 52428800,
                "max.partition.fetch.bytes": READ_FETCH_BYTES,
                "fetch.wait.max.ms": READ_FETCH_WAIT_MS,
                "log_level": 3,
            },
        )
    )


def read_partition(
    bootstrap: str, topic: str, partition: int, stop_offset: int | None = None, start: int = 0
) -> Iterator[Message]:
    """Yield the committed records of ``topic[partition]`` from ``start`` up to ``stop_offset``
    (default: the end). Raises ``KafkaException`` at once for an error that does not pass by
    itself (``TOPIC_AUTHORIZATION_FAILED`` for a user without READ, an unknown topic or
    partition, a fatal error), and with ``_TIMED_OUT`` when no record arrives for
    :data:`STALL_S` before the end: no read waits for ever."""
    consumer = _reader(bootstrap)
    try:
        yield from _read(consumer, topic, partition, stop_offset, start)
    finally:
        consumer.close()


def _read(
    consumer: Consumer, topic: str, partition: int, stop_offset: int | None, start: int
) -> Iterator[Message]:
    """:func:`read_partition` on ``consumer``, whose assignment it replaces (assign and unassign
    discard what was fetched for an earlier read; its records are skipped here too)."""
    try:
        high = end_offset(consumer, TopicPartition(topic, partition))
        end = high if stop_offset is None else min(high, stop_offset)
        if end <= start:
            return
        first = start if start > 0 else OFFSET_BEGINNING
        consumer.assign([TopicPartition(topic, partition, first)])
        stalled_since = time.monotonic()
        while True:
            batch = _next_batch(consumer)
            for msg in batch:
                if msg.topic() != topic or msg.partition() != partition:
                    continue  # fetched for an earlier read of this consumer
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        if _position(consumer, topic, partition) >= end:
                            return
                        continue
                    if not _passing(err):
                        raise KafkaException(err)
                    log.debug("reading %s[%d]: %s", topic, partition, err)
                    continue
                offset = msg.offset()
                if offset is not None and offset >= end:
                    return
                stalled_since = time.monotonic()
                yield msg
            if not batch and _position(consumer, topic, partition) >= end:
                return
            if time.monotonic() - stalled_since > STALL_S:
                raise KafkaException(
                    KafkaError(
                        KafkaError._TIMED_OUT,
                        f"reading {topic}[{partition}]: no record for {STALL_S:g} s "
                        f"before its end {end}",
                    )
                )
    finally:
        consumer.unassign()


def _passing(err: KafkaError) -> bool:
    """Whether a consumer error met mid-read is one librdkafka recovers from by itself (a broker
    connection lost, a leader moving): the read goes on, within :data:`STALL_S`. Any other error
    (authorization, an unknown topic or partition, a fatal one) ends the read at once."""
    code = err.code()
    if err.fatal() or code == KafkaError.UNKNOWN_TOPIC_OR_PART:
        return False
    return code in _SETTLING or err.retriable()


def _next_batch(consumer: Consumer) -> list[Message]:
    """What is fetched already, else the first record to arrive within 50 ms (``consume(n, t)``
    waits its whole timeout unless ``n`` records are there: one such wait per batch was paid
    for every fetch of a read)."""
    batch = consumer.consume(POLL_BATCH, timeout=0)
    if batch:
        return batch
    msg = consumer.poll(0.05)
    return [] if msg is None else [msg]


def _position(consumer: Consumer, topic: str, partition: int) -> int:
    return int(consumer.position([TopicPartition(topic, partition)])[0].offset)


class KafkaPartitionReader:
    """The Kafka :class:`horae.ports.PartitionReader`: one consumer, made at the first read and
    reused by the next ones (a rebuild of several partitions connects once). One read at a time:
    a read reassigns the consumer."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self._consumer: Consumer | None = None

    def read(
        self, topic: str, partition: int, start: int = 0, stop: int | None = None
    ) -> Iterator[Message]:
        if self._consumer is None:
            self._consumer = _reader(self.bootstrap)
        return _read(self._consumer, topic, partition, stop, start)

    def end(self, topic: str, partition: int) -> int:
        if self._consumer is None:
            self._consumer = _reader(self.bootstrap)
        return end_offset(self._consumer, TopicPartition(topic, partition))


class Seekable(Protocol):
    """What :func:`seek_to_committed` needs of a consumer (a ``confluent_kafka.Consumer``)."""

    def assignment(self) -> list[TopicPartition]: ...

    def committed(
        self, partitions: list[TopicPartition], timeout: float = ...
    ) -> list[TopicPartition]: ...

    def seek(self, partition: TopicPartition) -> None: ...


def seek_to_committed(
    consumer: Seekable, partitions: Sequence[TopicPartition] | None = None
) -> None:
    """Seek each of ``partitions`` (default: the consumer's whole assignment) to the group's
    committed offset, or to the beginning when nothing is committed yet. A partition that
    cannot be sought because it was not fetched yet is skipped: it starts there anyway. Blocks
    up to ``COMMITTED_TIMEOUT_S`` asking the broker; call it on the consumer's own thread."""
    targets = consumer.assignment() if partitions is None else list(partitions)
    if not targets:
        return
    for tp in consumer.committed(targets, timeout=COMMITTED_TIMEOUT_S):
        offset = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
        try:
            consumer.seek(TopicPartition(tp.topic, tp.partition, offset))
        except KafkaException as exc:
            log.debug("seek %s[%d] skipped: %s", tp.topic, tp.partition, exc)
