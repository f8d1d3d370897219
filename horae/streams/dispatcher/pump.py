"""The dispatcher's Kafka thread: consumes the lanes and commits finished work transactionally.

Every Kafka call happens on this one thread (rebalance callbacks included); the asyncio loop that
sends only hands finished attempts over (:meth:`Pump.finish`, a thread-safe queue).

- The five lane topics are consumed in one group (``<prefix>dispatcher``; range assignment, so
  partition *p* of every lane — one trigger's whole story — belongs to one member), read_committed,
  auto-commit off, static membership per slot.
- Consumed orders go to the loop with their (topic, partition, offset) and the partition's
  *epoch*; each partition keeps a :class:`~.offsets.PartitionWindow`.
- About every ``commit_interval_s``, ONE transaction (:class:`~horae.kafka.txn.
  TransactionalProcessor`) carries every finished attempt's records (attempt, retry order,
  outcome, DLQ, events) and each partition's commit point: a lane offset is committed only
  together with, or after, the records that finish it. The ``transactional.id`` is stable per
  slot, so a restarted dispatcher fences its killed predecessor.
- A failed transaction rewinds every partition to its committed offset: all epochs change, the
  loop drops what it holds, in-flight results of the old epochs are discarded, and the orders
  are consumed (and sent) again. Revoked partitions are committed first, then dropped the same way.
- A partition with ``max_open_per_partition`` unfinished orders is paused until half drain.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from confluent_kafka import Consumer, Message, TopicPartition

from horae.contracts import events as ev
from horae.contracts.codec import DecodeError, decode, encode
from horae.contracts.topics import PRODUCER_DEFAULTS, Topic, lane_topic, topic_name
from horae.kafka.txn import OutRecord, TransactionalProcessor, TransactionFailed
from horae.streams.dispatcher.breaker import (
    Breaker,
    breaker_event,
    latest_definition,
    paused_version,
)
from horae.streams.dispatcher.config import DispatcherConfig
from horae.streams.dispatcher.deliver import Conclusion
from horae.streams.dispatcher.metrics import DispatcherMetrics
from horae.streams.dispatcher.offsets import PartitionWindow
from horae.streams.dispatcher.records import Carry, Verdict

log = logging.getLogger(__name__)
TP = tuple[str, int]


@dataclass(slots=True)
class Item:
    """One consumed order, where it came from, and the epoch of its partition then."""

    topic: str
    partition: int
    offset: int
    epoch: int
    order: ev.DispatchOrder
    carry: Carry


@dataclass(slots=True)
class Finished:
    item: Item
    conclusion: Conclusion


class Pump:
    """See the module docstring. ``deliver(items)`` and ``reset()`` are called on this thread;
    they must hand over to the loop themselves (``call_soon_threadsafe``)."""

    def __init__(
        self,
        config: DispatcherConfig,
        metrics: DispatcherMetrics,
        deliver: Callable[[list[Item]], None],
        reset: Callable[[], None],
    ) -> None:
        self.config = config
        self.metrics = metrics
        self._deliver = deliver
        self._reset = reset
        self._topics = {t: topic_name(t, config.prefix) for t in Topic}
        self._lane_of = {self._topics[lane_topic(lane)]: lane for lane in ev.Lane}
        group = f"{config.prefix}dispatcher"
        self.consumer = Consumer(
            {
                "bootstrap.servers": config.bootstrap,
                "group.id": group,
                "group.instance.id": f"{group}-{config.slot}",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "auto.offset.reset": "earliest",
                "partition.assignment.strategy": "range",
                "session.timeout.ms": config.session_timeout_ms,
                "heartbeat.interval.ms": max(500, config.session_timeout_ms // 5),
                "max.poll.interval.ms": max(60_000, config.session_timeout_ms * 3),
                "log_level": 4,
            }
        )
        producer_config = {
            **PRODUCER_DEFAULTS,
            "bootstrap.servers": config.bootstrap,
            "transactional.id": f"{group}-{config.slot}",
            "transaction.timeout.ms": 60_000,
            "linger.ms": 2,
            "batch.num.messages": 10_000,
            "queue.buffering.max.messages": 1_000_000,
            "log_level": 4,
        }
        self.txn = TransactionalProcessor(self.consumer, producer_config, self._rewound)
        self.breaker = Breaker(config.breaker_threshold)
        self._finished: queue.SimpleQueue[Finished] = queue.SimpleQueue()
        self._windows: dict[TP, PartitionWindow] = {}
        self._epochs: dict[TP, int] = {}
        self._epoch_ids = itertools.count(1)
        self._quarantine: list[OutRecord] = []
        self._breaker_out: list[OutRecord] = []
        self._paused: set[TP] = set()
        self.stop = threading.Event()
        self._thread: threading.Thread | None = None

    # --- the loop side's interface -----------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self.run, name="dispatcher-kafka", daemon=True)
        self._thread.start()

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def finish(self, finished: Finished) -> None:
        """Hand a concluded attempt over for the next transaction (thread-safe)."""
        self._finished.put(finished)

    def is_current(self, item: Item) -> bool:
        """False once the item's partition was rewound or revoked: drop it, do not send it."""
        return self._epochs.get((item.topic, item.partition)) == item.epoch

    # --- the thread --------------------------------------------------------------------------
    def run(self) -> None:
        lanes = [self._topics[lane_topic(lane)] for lane in ev.Lane]
        self.consumer.subscribe(
            lanes, on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost
        )
        last_commit = last_depth = time.monotonic()
        try:
            while not self.stop.is_set():
                messages = self.consumer.consume(2000, timeout=0.02)
                if messages:
                    self._accept(messages)
                now = time.monotonic()
                if now - last_commit >= self.config.commit_interval_s:
                    self._commit()
                    last_commit = now
                self._flow_control()
                if now - last_depth >= 1.0:
                    self._observe_depth()
                    last_depth = now
            self._commit()
        finally:
            self.txn.close()
            self.consumer.close()

    def _accept(self, messages: list[Message]) -> None:
        items: list[Item] = []
        for msg in messages:
            if msg.error() is not None:
                log.warning("consume error: %s", msg.error())
                continue
            topic, partition, offset = msg.topic() or "", msg.partition() or 0, msg.offset() or 0
            epoch = self._epochs.get((topic, partition))
            if epoch is None:
                continue
            window = self._windows[(topic, partition)]
            window.consumed(offset)
            try:
                order = decode(msg.value() or b"", ev.DispatchOrder)
            except DecodeError as exc:
                self._quarantine.append(self._quarantined(msg, exc))
                window.finished(offset)
                continue
            items.append(
                Item(topic, partition, offset, epoch, order, Carry.from_headers(msg.headers()))
            )
        if items:
            self._deliver(items)

    def _quarantined(self, msg: Message, exc: DecodeError) -> OutRecord:
        record = ev.Quarantined(
            source_topic=msg.topic() or "",
            source_partition=msg.partition() or 0,
            source_offset=msg.offset() or 0,
            cause=exc.cause,
            detail=exc.detail[:2000],
            original=msg.value() or b"",
            quarantined_at=datetime.now(UTC),
            original_key=msg.key(),
        )
        key = msg.key() or b""
        return OutRecord(self._topics[Topic.QUARANTINE], key, encode(record), msg.partition())

    def _records(self, f: Finished) -> list[OutRecord]:
        p = f.item.partition
        return [
            OutRecord(self._topics[e.topic], e.key.encode(), encode(e.event), p, e.headers or None)
            for e in f.conclusion.emits
        ]

    def _commit(self) -> None:
        finished: list[Finished] = []
        while True:
            try:
                finished.append(self._finished.get_nowait())
            except queue.Empty:
                break
        records, self._quarantine = self._quarantine, []
        breaker_out, self._breaker_out = self._breaker_out, []
        records.extend(breaker_out)
        live: list[Finished] = []
        for f in finished:
            tp = (f.item.topic, f.item.partition)
            if self._epochs.get(tp) != f.item.epoch:
                continue  # rewound or revoked since: it will be (or was) consumed again
            self._windows[tp].finished(f.item.offset)
            records.extend(self._records(f))
            live.append(f)
        points = {
            tp: point for tp, w in self._windows.items() if (point := w.due_commit()) is not None
        }
        if not records and not points:
            return
        offsets = [TopicPartition(t, p, point) for (t, p), point in points.items()]
        try:
            self.txn.commit(records, offsets)
        except TransactionFailed as exc:
            self.metrics.aborts.inc()
            self._breaker_out = breaker_out + self._breaker_out
            log.warning("transaction aborted; lanes rewound to their commit points: %s", exc)
            return
        for tp, point in points.items():
            window = self._windows.get(tp)
            if window is not None:
                window.committed = point
        self._after_commit(live)

    def _after_commit(self, live: list[Finished]) -> None:
        for f in live:
            verdict = f.conclusion.verdict
            if verdict is Verdict.RETRY:
                self.metrics.retries.inc()
                continue
            self.metrics.ended(verdict.value)
            fire = f.item.order.fire
            count = self.breaker.observe(ev.trigger_key(fire.tenant, fire.trigger_id), verdict)
            if count is not None:
                self._trip(f, count)

    def _trip(self, f: Finished, count: int) -> None:
        fire = f.item.order.fire
        cause = f"breaker: {count} consecutive failed fires (last: {f.conclusion.cause})"[:500]
        now = datetime.now(UTC)
        p = f.item.partition
        current = latest_definition(
            self.config.bootstrap,
            self._topics[Topic.DEFINITIONS],
            p,
            fire.tenant,
            fire.trigger_id,
            self.config.tenant_keys,
        )
        if current is None or current.state is not ev.DefinitionState.LIVE:
            log.info("breaker for %s/%s: no live version to pause", fire.tenant, fire.trigger_id)
            return
        self.metrics.breaker_trips.inc()
        key = ev.trigger_key(fire.tenant, fire.trigger_id).encode()
        version = current.version
        if self.config.platform_key is None:
            log.error("breaker tripped for %s but no platform key is set: not paused", key)
        else:
            paused = paused_version(
                current, cause, self.config.platform_key_id, self.config.platform_key, now
            )
            version = paused.version
            self._breaker_out.append(
                OutRecord(self._topics[Topic.DEFINITIONS], key, encode(paused), p)
            )
        event = breaker_event(fire.tenant, fire.trigger_id, version, cause, now)
        self._breaker_out.append(
            OutRecord(self._topics[Topic.SCHEDULE_EVENTS], key, encode(event), p)
        )
        log.warning("breaker tripped: %s paused as version %d (%s)", key, version, cause)

    # --- rebalance and rewind ----------------------------------------------------------------
    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self._windows[(tp.topic, tp.partition)] = PartitionWindow()
            self._epochs[(tp.topic, tp.partition)] = next(self._epoch_ids)
        log.info("assigned %d lane partitions", len(partitions))

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._commit()
        self._drop(partitions)

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._drop(partitions)

    def _drop(self, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            key = (tp.topic, tp.partition)
            self._windows.pop(key, None)
            self._epochs.pop(key, None)
            self._paused.discard(key)
        self.breaker.forget()
        self._reset()

    def _rewound(self) -> None:
        for key in list(self._windows):
            self._windows[key] = PartitionWindow()
            self._epochs[key] = next(self._epoch_ids)
        if self._paused:
            self.consumer.resume([TopicPartition(t, p) for t, p in self._paused])
            self._paused.clear()
        self._reset()

    # --- flow control and depth --------------------------------------------------------------
    def _flow_control(self) -> None:
        high = self.config.max_open_per_partition
        for key, window in self._windows.items():
            if key not in self._paused and window.open >= high:
                self.consumer.pause([TopicPartition(*key)])
                self._paused.add(key)
            elif key in self._paused and window.open < high // 2:
                self.consumer.resume([TopicPartition(*key)])
                self._paused.discard(key)

    def _observe_depth(self) -> None:
        depth = dict.fromkeys(ev.Lane, 0)
        for (topic, partition), window in self._windows.items():
            try:
                _, high = self.consumer.get_watermark_offsets(
                    TopicPartition(topic, partition), cached=True
                )
            except Exception:  # no fetch yet for this partition
                continue
            point = window.commit_point()
            if high is not None and high >= 0 and point is not None:
                depth[self._lane_of[topic]] += max(0, high - point)
        for lane, n in depth.items():
            self.metrics.lane_depth.labels(lane.value).set(n)
