"""Reading what processors committed, in the integration tests."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, TopicPartition

from horae.kafka.config import client_config
from horae.kafka.reader import end_offset

Record = tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]


def read_committed(
    bootstrap: str, topic: str, partitions: int, isolation: str = "read_committed"
) -> list[Record]:
    """Every committed record of ``topic`` (read_committed) up to its current end: (key, value,
    headers), partition by partition. ``isolation="read_uncommitted"``: aborted ones too."""
    consumer = Consumer(
        client_config(
            bootstrap,
            {
                "group.id": "test-reader",
                "enable.auto.commit": False,
                "isolation.level": isolation,
            },
        )
    )
    out: list[Record] = []
    try:
        ends = {}
        for p in range(partitions):
            high = end_offset(consumer, TopicPartition(topic, p))
            if high > 0:
                ends[p] = high
        consumer.assign([TopicPartition(topic, p, 0) for p in ends])
        positions = dict.fromkeys(ends, 0)
        deadline = time.monotonic() + 60
        while any(positions[p] < ends[p] for p in ends) and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                for tp in consumer.position([TopicPartition(topic, p) for p in ends]):
                    positions[tp.partition] = max(positions[tp.partition], tp.offset)
                continue
            if msg.error() is not None:
                continue
            positions[msg.partition() or 0] = (msg.offset() or 0) + 1
            out.append((msg.key(), msg.value(), list(msg.headers() or [])))  # type: ignore[arg-type]
    finally:
        consumer.close()
    return out
