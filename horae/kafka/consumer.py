"""The Kafka :class:`~horae.ports.RecordConsumer`: a ``confluent_kafka.Consumer`` that commits
nothing itself; its owner says where each partition starts.

- :meth:`KafkaConsumer.subscribe` wraps the owner's callbacks: on assignment the partitions are
  assigned at the offsets the owner returns (None: ``OFFSET_BEGINNING``; a partition not named:
  ``OFFSET_STORED``, the group's committed offset, else ``auto.offset.reset``); on revocation or
  loss the owner is told first, then the partitions are unassigned.
- Ends: the consumer runs with ``enable.partition.eof`` (unless built with ``ends=False``, when
  :meth:`KafkaConsumer.ends_reached` stays empty: an end event would end a consume's wait
  early); each end event is kept and never returned as a record; a seek or an assignment
  forgets the ends of its partitions.
- :meth:`KafkaConsumer.close` leaves the group first (:func:`~horae.kafka.txn.leave_group`: a
  static member sends no LeaveGroup on close).
- Errors: an event the member cannot go on after (:func:`~horae.kafka.txn.is_fatal`: fenced,
  denied) raises ``KafkaException``; any other is logged and dropped.
- A seek of a partition not fetching yet fails in librdkafka (``_STATE``): the partitions are then
  assigned again at the offsets asked.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_STORED,
    Consumer,
    KafkaError,
    KafkaException,
    TopicPartition,
)

from horae.kafka.reader import seek_to_committed
from horae.kafka.txn import is_fatal, leave_group
from horae.ports import OnAssign, TopicPartitionKey

log = logging.getLogger(__name__)

Keys = Callable[[Sequence[TopicPartitionKey]], None]


def _keys(partitions: Sequence[TopicPartition]) -> list[TopicPartitionKey]:
    return [(tp.topic, tp.partition) for tp in partitions]


def _at(offsets: Mapping[TopicPartitionKey, int | None]) -> list[TopicPartition]:
    return [
        TopicPartition(t, p, OFFSET_BEGINNING if o is None else o) for (t, p), o in offsets.items()
    ]


def _start(starts: Mapping[TopicPartitionKey, int | None], key: TopicPartitionKey) -> int:
    if key not in starts:
        return OFFSET_STORED
    offset = starts[key]
    return OFFSET_BEGINNING if offset is None else offset


class KafkaConsumer:
    """See the module docstring. ``config`` is a consumer config (``client_config``); its
    ``enable.partition.eof`` is set here, to ``ends``."""

    def __init__(self, config: Mapping[str, Any], *, ends: bool = True) -> None:
        self.consumer = Consumer({**config, "enable.partition.eof": ends})
        self._ends: dict[TopicPartitionKey, int] = {}
        self._closed = False
        self._subscribed = False

    def subscribe(
        self,
        topics: Sequence[str],
        on_assign: OnAssign,
        on_revoke: Keys,
        on_lost: Keys | None = None,
    ) -> None:
        lost_cb = on_lost or on_revoke

        def assigned(consumer: Consumer, partitions: list[TopicPartition]) -> None:
            keys = _keys(partitions)
            starts = on_assign(keys) or {}
            for key in keys:
                self._ends.pop(key, None)
            consumer.assign([TopicPartition(t, p, _start(starts, (t, p))) for t, p in keys])

        def going(callback: Keys) -> Callable[[Consumer, list[TopicPartition]], None]:
            def gone(consumer: Consumer, partitions: list[TopicPartition]) -> None:
                keys = _keys(partitions)
                callback(keys)
                for key in keys:
                    self._ends.pop(key, None)
                consumer.unassign()

            return gone

        self.consumer.subscribe(
            list(topics), on_assign=assigned, on_revoke=going(on_revoke), on_lost=going(lost_cb)
        )
        self._subscribed = True

    def assign(self, offsets: Mapping[TopicPartitionKey, int | None]) -> None:
        self._ends.clear()
        self.consumer.assign(_at(offsets))

    def consume(self, max_records: int, timeout_s: float) -> list[Any]:
        messages = self.consumer.consume(max_records, timeout=timeout_s)
        if all(msg.error() is None for msg in messages):
            return messages
        records = []
        for msg in messages:
            err = msg.error()
            if err is None:
                records.append(msg)
            elif err.code() == KafkaError._PARTITION_EOF:
                self._ends[(msg.topic() or "", msg.partition() or 0)] = msg.offset() or 0
            elif is_fatal(err):
                raise KafkaException(err)
            else:
                log.warning("consumer error: %s", err)
        return records

    def seek(self, offsets: Mapping[TopicPartitionKey, int | None]) -> None:
        for key in offsets:
            self._ends.pop(key, None)
        targets = _at(offsets)
        try:
            for tp in targets:
                self.consumer.seek(tp)
        except KafkaException as exc:  # a partition not fetching yet: assign again instead
            log.info("seek failed (%s); assigning again at the offsets asked", exc)
            rest = [
                tp
                for tp in self.consumer.position(self.consumer.assignment())
                if (tp.topic, tp.partition) not in offsets
            ]
            self.consumer.assign(targets + rest)

    def seek_committed(self) -> None:
        self._ends.clear()
        seek_to_committed(self.consumer)

    def group_metadata(self) -> object:
        return self.consumer.consumer_group_metadata()

    def partitions(self, topic: str) -> int | None:
        try:
            listed = self.consumer.list_topics(timeout=10).topics
        except KafkaException as exc:
            log.warning("partitions of %s unknown: %s", topic, exc)
            return None
        found = listed.get(topic)
        return None if found is None or found.error is not None else len(found.partitions)

    def assignment(self) -> list[TopicPartitionKey]:
        return _keys(self.consumer.assignment())

    def positions(self) -> dict[TopicPartitionKey, int]:
        return {
            (tp.topic, tp.partition): tp.offset
            for tp in self.consumer.position(self.consumer.assignment())
            if tp.offset >= 0
        }

    def pause(self, partitions: Sequence[TopicPartitionKey]) -> None:
        self.consumer.pause([TopicPartition(t, p) for t, p in partitions])

    def resume(self, partitions: Sequence[TopicPartitionKey]) -> None:
        self.consumer.resume([TopicPartition(t, p) for t, p in partitions])

    def ends_reached(self) -> dict[TopicPartitionKey, int]:
        return dict(self._ends)

    def end(self, topic: str, partition: int) -> int | None:
        try:
            _, high = self.consumer.get_watermark_offsets(
                TopicPartition(topic, partition), cached=True
            )
        except KafkaException:  # no fetch yet for this partition
            return None
        return None if high is None or high < 0 else int(high)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            if self._subscribed:
                leave_group(self.consumer)
            self.consumer.close()
