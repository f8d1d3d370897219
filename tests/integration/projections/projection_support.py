"""Helpers of the projection tests."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from horae.contracts.topics import Topic, events_topic, spec, topic_name
from horae.kafka.config import client_config
from horae.kafka.reader import end_offset
from horae.projections.projector import Projector
from horae.projections.rows import PROJECTED
from tests.waiting import wait_until

PARTITIONS = 3


#: the tenants of :func:`horae.projections.synthetic.history` (``tenant-<n>``), whose events
#: topics the tests create
SYNTHETIC_TENANTS = tuple(f"tenant-{n}" for n in range(5))


def projected_names(prefix: str) -> list[tuple[str, Topic]]:
    """Every projected topic under ``prefix``: the catalogue's and the synthetic tenants' events."""
    return [
        (name, t)
        for t in PROJECTED
        for name in (
            [events_topic(x, prefix) for x in SYNTHETIC_TENANTS]
            if t is Topic.SCHEDULE_EVENTS
            else [topic_name(t, prefix)]
        )
    ]


def create_topics(bootstrap: str, prefix: str, partitions: int = PARTITIONS) -> list[str]:
    admin = AdminClient(client_config(bootstrap))
    new = [
        NewTopic(name, partitions, 1, config=dict(spec(t).config))
        for name, t in projected_names(prefix)
    ]
    for future in admin.create_topics(new, request_timeout=30).values():
        future.result(timeout=30)
    return [n.topic for n in new]


def end_offsets(bootstrap: str, names: list[str]) -> dict[tuple[str, int], int]:
    """High watermarks (read_committed: last stable offsets) of every partition of ``names``."""
    consumer = Consumer(
        client_config(bootstrap, {"group.id": "horae-test-ends", "log_level": 3,
                                  "isolation.level": "read_committed"})
    )  # fmt: skip
    try:
        meta = consumer.list_topics(timeout=10)
        out = {}
        for name in names:
            for p in meta.topics[name].partitions:
                out[(name, p)] = end_offset(consumer, TopicPartition(name, p))
        return out
    finally:
        consumer.close()


@contextmanager
def running(projector: Projector) -> Iterator[Projector]:
    """Run ``projector`` in a thread for the duration of the block; re-raise its failure."""
    stop = threading.Event()
    failure: list[BaseException] = []

    def target() -> None:
        try:
            projector.run(stop)
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=target, name="projector", daemon=True)
    thread.start()
    try:
        yield projector
    finally:
        stop.set()
        thread.join(30)
        assert not thread.is_alive(), "projector did not stop"
    if failure:
        raise failure[0]


def stored_offsets(db: psycopg.Connection[Any], schema: str) -> dict[tuple[str, int], int]:
    try:
        rows = db.execute(
            f'SELECT topic, partition, next_offset FROM "{schema}".projection_offsets'
        )
    except psycopg.errors.UndefinedTable:
        return {}
    return {(t, p): o for t, p, o in rows.fetchall()}


def wait_caught_up(
    db: psycopg.Connection[Any],
    schema: str,
    ends: dict[tuple[str, int], int],
    timeout_s: float = 60.0,
    alive: Callable[[], bool] = lambda: True,
) -> None:
    """Wait until the offsets stored in ``schema`` reach ``ends`` (non-empty partitions)."""

    def caught_up() -> bool:
        stored = stored_offsets(db, schema)
        assert alive(), "projector died"
        return all(stored.get(tp, 0) >= end for tp, end in ends.items() if end > 0)

    wait_until(
        caught_up, timeout_s, 0.1, lambda: f"stored {stored_offsets(db, schema)}, ends {ends}"
    )
