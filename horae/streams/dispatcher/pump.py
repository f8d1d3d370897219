"""The dispatcher's Kafka side: a consumer thread and a committer thread.

The asyncio loop that sends only receives orders (``deliver``) and hands finished attempts back
(:meth:`Pump.finish`, a thread-safe queue); it never calls Kafka.

- *Consumer thread*: reads through the consumer port (:class:`~horae.ports.RecordConsumer`;
  :class:`~horae.kafka.consumer.KafkaConsumer` unless another is given) the five lane topics in
  one group (``<prefix>dispatcher``; range assignment, so partition *p* of every lane — one
  trigger's whole story — belongs to one member),
  read_committed, auto-commit off, static membership per slot; registers each offset in its
  partition's :class:`~.offsets.PartitionWindow` and tags the order with the partition's *epoch*.
  It never waits for a transaction (only a rebalance does).
- *Committer thread*: about every ``commit_interval_s``, ONE transaction
  (:class:`~horae.kafka.txn.TransactionalProcessor`, ``transactional.id`` stable per slot, so a
  restarted dispatcher fences its killed predecessor) carries every finished attempt's records
  (attempt, retry order, outcome, DLQ, events) and each partition's commit point: a lane offset is
  committed only together with, or after, the records that finish it.
- A failed transaction: every epoch changes at once (the loop drops what it holds; attempts of old
  epochs are discarded), and the consumer thread seeks every partition back to its committed
  offset before it consumes anything more, so the orders are consumed (and sent) again.
- Revoked partitions: the consumer thread commits what is finished (waiting at most
  ``REVOKE_WAIT_S`` for the committer's transaction in progress, which may itself wait on the
  rebalance), then drops them the same way.
- A partition with ``max_open_per_partition`` unfinished orders is paused until half drain.
- Every assignment and revocation hands the loop the share of the lane partitions this process
  owns (``share``), so the tenants' limits hold across the group (:mod:`.admission`).
- A *cancel marker* (an order with ``cancel`` set, written by the planner after the order it
  cancels, on the same lane partition) is finished as soon as it is consumed: the order it
  cancels has a lower offset, so the commit point cannot pass that order before it is finished.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from confluent_kafka import KafkaException, TopicPartition

from horae.contracts import events as ev
from horae.contracts.codec import DecodeError, decode, default_codec
from horae.contracts.quarantine import quarantine
from horae.contracts.routing import Router
from horae.contracts.topics import lane_topic
from horae.kafka.consumer import KafkaConsumer
from horae.kafka.txn import (
    LOOP_DEADLINE_S,
    HangWatch,
    TransactionalProcessor,
    TransactionFailed,
    member_configs,
)
from horae.ports import (
    SYSTEM_CLOCK,
    Clock,
    ConsumedRecord,
    Emit,
    Fenced,
    RecordConsumer,
    TopicPartitionKey,
)
from horae.streams.dispatcher.breaker import Breaker, trip_outputs
from horae.streams.dispatcher.conclude import Conclusion
from horae.streams.dispatcher.config import DispatcherConfig
from horae.streams.dispatcher.metrics import DispatcherMetrics
from horae.streams.dispatcher.offsets import PartitionWindow
from horae.streams.dispatcher.records import OrderHeaders, Verdict

log = logging.getLogger(__name__)
TP = TopicPartitionKey


@dataclass(slots=True)
class Item:
    """One consumed order, where it came from, and the epoch of its partition then."""

    topic: str
    partition: int
    offset: int
    epoch: int
    order: ev.DispatchOrder
    carried: OrderHeaders


@dataclass(slots=True)
class Finished:
    item: Item
    conclusion: Conclusion


class CommitterView:
    """The consumer as the committer thread's transactions see it (a
    :class:`~horae.kafka.txn.GroupMember`): the group metadata cached by the consumer thread
    (librdkafka's ``consumer_group_metadata()`` blocks while another thread is inside
    ``consume()``), and no assignment, so a failed transaction's rewind only notifies (the
    consumer thread then seeks, :meth:`Pump._seek_committed`)."""

    def __init__(self, metadata: object | None = None) -> None:
        self.metadata = metadata

    def consumer_group_metadata(self) -> object | None:
        return self.metadata

    def assignment(self) -> list[TopicPartition]:
        return []

    def committed(
        self, partitions: list[TopicPartition], timeout: float = -1
    ) -> list[TopicPartition]:
        raise RuntimeError("the committer's view owns no partitions; the consumer thread seeks")

    def seek(self, partition: TopicPartition) -> None:
        raise RuntimeError("the committer's view owns no partitions; the consumer thread seeks")


#: the names the two threads' loops beat under (:class:`~horae.kafka.txn.HangWatch`)
CONSUMER_LOOP, COMMITTER_LOOP = "dispatcher consumer loop", "dispatcher committer loop"
#: how long a revocation waits for the committer's transaction in progress (see _on_revoke)
REVOKE_WAIT_S = 1.0
#: most orders handed to the loop at once
BATCH = 2000
#: the longest the consumer thread waits for an order before it looks at flow control again
IDLE_WAIT_S = 0.05
#: most orders taken with the first one after an idle wait: a burst's first sends start while
#: the rest of it is decoded (a whole batch's decoding held its first send back ~80 ms)
FIRST_BATCH = 64


class Pump:
    """See the module docstring. ``deliver(items)`` and ``reset()`` are called on the Kafka
    threads; they must hand over to the loop themselves (``call_soon_threadsafe``)."""

    def __init__(
        self,
        config: DispatcherConfig,
        metrics: DispatcherMetrics,
        deliver: Callable[[list[Item]], None],
        reset: Callable[[], None],
        *,
        clock: Clock = SYSTEM_CLOCK,
        share: Callable[[float], None] | None = None,
        consumer: RecordConsumer | None = None,
    ) -> None:
        self.config = config
        self.metrics = metrics
        self.clock = clock
        self._deliver = deliver
        self._reset = reset
        self._share = share
        self._lane_partitions = 0  # of the five lane topics together (0: not known yet)
        self.router = Router(config.prefix)
        default_codec().warm([ev.DispatchOrder])  # not on a burst's first order
        self._topics = self.router.names
        self._lane_of = {self._topics[lane_topic(lane)]: lane for lane in ev.Lane}
        consumer_config, producer_config = member_configs(
            config.bootstrap,
            f"{config.prefix}dispatcher",
            config.slot,
            config.session_timeout_ms,
            min_poll_interval_ms=60_000,
            linger_ms=2,
        )
        #: the lane reader (:class:`~horae.ports.RecordConsumer`); its offsets are committed by
        #: the committer's transactions, with its group metadata
        self.consumer: RecordConsumer = consumer or KafkaConsumer(
            {**consumer_config, "fetch.wait.max.ms": 100}, ends=False
        )
        self._view = CommitterView()
        self.txn = TransactionalProcessor(self._view, producer_config, self._rewound)
        self.breaker = Breaker(config.breaker_threshold)
        self._finished: queue.SimpleQueue[Finished] = queue.SimpleQueue()
        self._lock = threading.Lock()  # windows, epochs, paused, pending records (brief holds)
        self._txn_lock = threading.Lock()  # one transaction at a time
        self._rewind_pending = threading.Event()
        self._windows: dict[TP, PartitionWindow] = {}
        self._epochs: dict[TP, int] = {}
        self._epoch_ids = itertools.count(1)
        self._pending: list[Emit] = []  # quarantine and breaker records for the next txn
        self._paused: set[TP] = set()
        self.stop = threading.Event()
        self.watch = HangWatch(LOOP_DEADLINE_S)  # both threads beat; stuck: the process ends
        #: why the Kafka threads stopped by themselves (a fatal consumer error, fenced)
        self.failed: KafkaException | Fenced | None = None
        self._threads: list[threading.Thread] = []

    # --- the loop side's interface -----------------------------------------------------------
    def start(self) -> None:
        for target, name in ((self.run, "consumer"), (self._commit_loop, "committer")):
            thread = threading.Thread(target=target, name=f"dispatcher-{name}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def join(self, timeout: float | None = None) -> None:
        for thread in self._threads:
            thread.join(timeout)

    def finish(self, finished: Finished) -> None:
        """Hand a concluded attempt over for the next transaction (thread-safe)."""
        self._finished.put(finished)

    def is_current(self, item: Item) -> bool:
        """False once the item's partition was rewound or revoked: drop it, do not send it."""
        return self._epochs.get((item.topic, item.partition)) == item.epoch

    # --- consumer thread ---------------------------------------------------------------------
    def run(self) -> None:
        lanes = [self._topics[lane_topic(lane)] for lane in ev.Lane]
        self._lane_partitions = self._count_partitions(lanes)
        self.consumer.subscribe(
            lanes, on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost
        )
        last_depth = self.clock.monotonic()
        try:
            while not self.stop.is_set():
                self.watch.beat(CONSUMER_LOOP)
                if self._rewind_pending.is_set():
                    self._seek_committed()
                messages = self._consume()
                if messages:
                    self._accept(messages)
                self._flow_control()
                if self.clock.monotonic() - last_depth >= 1.0:
                    self._observe_depth()
                    last_depth = self.clock.monotonic()
        except KafkaException as exc:  # a fatal consumer error (fenced): the worker must stop
            self.failed = exc
            self.stop.set()
            raise
        finally:
            self.watch.done(CONSUMER_LOOP)
            for thread in self._threads:
                if thread is not threading.current_thread():
                    thread.join()  # the committer's last transaction
            self.consumer.close()  # it leaves: its revocation commits what finished meanwhile
            self.txn.close()

    def _consume(self) -> list[ConsumedRecord]:
        """What librdkafka holds now, up to :data:`BATCH`; when it holds nothing, the first order
        to arrive within :data:`IDLE_WAIT_S` and what came with it, up to :data:`FIRST_BATCH`.
        A batch consume with a timeout would hold an order back until the batch is full or the
        timeout ends."""
        messages = list(self.consumer.consume(BATCH, 0))
        if messages:
            return messages
        messages = list(self.consumer.consume(1, IDLE_WAIT_S))
        if messages:
            messages += self.consumer.consume(FIRST_BATCH - 1, 0)
        return messages

    def _accept(self, messages: list[ConsumedRecord]) -> None:
        decoded: list[tuple[ConsumedRecord, ev.DispatchOrder | DecodeError]] = []
        for msg in messages:  # records only: the consumer logs error events, raises fatal ones
            try:
                decoded.append((msg, decode(msg.value() or b"", ev.DispatchOrder)))
            except DecodeError as exc:
                decoded.append((msg, exc))
        items: list[Item] = []
        with self._lock:
            for msg, order in decoded:
                topic, partition, offset = msg.topic() or "", msg.partition() or 0, msg.offset()
                epoch = self._epochs.get((topic, partition))
                if epoch is None or offset is None:
                    continue
                window = self._windows[(topic, partition)]
                window.consumed(offset)
                if isinstance(order, DecodeError):
                    now = datetime.fromtimestamp(self.clock.now(), UTC)
                    record = quarantine(msg, order.cause, order.detail, now)
                    self._pending.append(self.router.emit(record, partition))
                    window.finished(offset)
                    continue
                headers = msg.headers()
                if isinstance(headers, Mapping):
                    headers = list(headers.items())
                carried = OrderHeaders.from_headers(headers)
                items.append(Item(topic, partition, offset, epoch, order, carried))
                if order.cancel is not None:  # a cancel marker has nothing to send: finished
                    window.finished(offset)  # (the order it cancels is earlier: still open)
        if items:
            self._deliver(items)

    def _seek_committed(self) -> None:
        """After a failed transaction: new epochs, then every partition back to its committed
        offset (what was consumed since the abort is dropped and consumed again)."""
        self._rewind_pending.clear()
        self._new_epochs()
        with self._lock:
            paused, self._paused = self._paused, set()
        if paused:
            self.consumer.resume(list(paused))
        self.consumer.seek_committed()
        self._reset()

    # --- committer thread --------------------------------------------------------------------
    def _commit_loop(self) -> None:
        try:
            while not self.stop.wait(self.config.commit_interval_s):
                self.watch.beat(COMMITTER_LOOP)
                with self._txn_lock:
                    self._commit()
            self.watch.beat(COMMITTER_LOOP)
            with self._txn_lock:
                self._commit()
        finally:
            self.watch.done(COMMITTER_LOOP)

    def _commit(self) -> None:
        """One transaction with everything finished so far (caller holds ``_txn_lock``)."""
        finished: list[Finished] = []
        while True:
            try:
                finished.append(self._finished.get_nowait())
            except queue.Empty:
                break
        with self._lock:
            pending, self._pending = self._pending, []
            live = [f for f in finished if self.is_current(f.item)]
            for f in live:
                self._windows[(f.item.topic, f.item.partition)].finished(f.item.offset)
            points = {
                tp: (point, self._epochs[tp])
                for tp, w in self._windows.items()
                if (point := w.due_commit()) is not None
            }
        records = [r for f in live for r in f.conclusion.emits] + pending
        if not records and not points:
            return
        offsets = {tp: point for tp, (point, _) in points.items()}
        try:
            self.txn.commit(records, offsets)
        except Fenced as exc:  # a newer dispatcher of this slot: no commit is possible any more
            log.error("fenced by a newer dispatcher of this slot: stopping")
            self.failed = exc
            self.stop.set()
            return
        except TransactionFailed as exc:
            self.metrics.aborts.inc()
            log.warning("transaction aborted; lanes rewound to their commit points: %s", exc)
            return
        with self._lock:
            for tp, (point, epoch) in points.items():
                if self._epochs.get(tp) == epoch:
                    self._windows[tp].committed = point
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
        """Queue the trip's pause command and ``schedule.failed`` for the next transaction (no
        Kafka call here: the committer thread must never wait on a read)."""
        cause = f"breaker: {count} consecutive failed fires (last: {f.conclusion.cause})"[:500]
        outputs = trip_outputs(
            f.item.order.fire,
            cause,
            platform_key_id=self.config.platform_key_id,
            platform_key=self.config.platform_key,
            command_ttl_s=self.config.command_ttl_s,
            now=datetime.fromtimestamp(self.clock.now(), UTC),
        )
        self.metrics.breaker_trips.inc()
        emits = [self.router.emit(e, f.item.partition) for e in outputs]
        with self._lock:
            self._pending.extend(emits)

    # --- rebalance and rewind ----------------------------------------------------------------
    def _on_assign(self, partitions: Sequence[TP]) -> None:
        """Each partition starts at its committed offset (the consumer's default)."""
        with self._lock:
            for tp in partitions:
                self._windows[tp] = PartitionWindow()
                self._epochs[tp] = next(self._epoch_ids)
        self._view.metadata = self.consumer.group_metadata()  # new generation
        self._owned_changed()

    def _count_partitions(self, topics: list[str]) -> int:
        counts = [self.consumer.partitions(t) for t in topics]
        if any(n is None for n in counts):
            log.warning("lane partitions unknown: each process applies whole limits")
        return sum(n for n in counts if n is not None)

    def _owned_changed(self) -> None:
        """Hand the share of lane partitions this process owns to the loop (its part of every
        tenant's limits, :meth:`~.admission.Admission.set_share`)."""
        with self._lock:
            owned = len(self._windows)
        total = max(self._lane_partitions, owned)
        share = owned / total if total else 1.0
        self.metrics.partition_share.set(share)
        log.info("owning %d of %d lane partitions: share %.3f of each tenant's limits",
                 owned, total, share)  # fmt: skip
        if self._share is not None:
            self._share(share)

    def _on_revoke(self, partitions: Sequence[TP]) -> None:
        """Commit what is finished, then drop the partitions. A transaction of the committer's
        in progress is waited for at most :data:`REVOKE_WAIT_S`: its offsets can wait on this
        very rebalance (the group coordinator holds a TxnOffsetCommit of a rebalancing group),
        which cannot end before this callback returns. Not waiting longer is safe: that
        transaction commits with this member's generation or aborts, and an order whose offset
        was not committed is consumed (and sent, under the same key) again by the next owner."""
        if self._txn_lock.acquire(timeout=REVOKE_WAIT_S):
            try:
                self._commit()
            finally:
                self._txn_lock.release()
        else:
            log.warning("revoked while a transaction waits; its unfinished orders are redelivered")
        self._drop(partitions)

    def _on_lost(self, partitions: Sequence[TP]) -> None:
        self._drop(partitions)

    def _drop(self, partitions: Sequence[TP]) -> None:
        with self._lock:
            for key in partitions:
                self._windows.pop(key, None)
                self._epochs.pop(key, None)
                self._paused.discard(key)
        self.breaker.forget()
        self._owned_changed()
        self._reset()

    def _new_epochs(self) -> None:
        with self._lock:
            for key in list(self._windows):
                self._windows[key] = PartitionWindow()
                self._epochs[key] = next(self._epoch_ids)

    def _rewound(self) -> None:
        """The transaction failed (any thread): old epochs are void at once; the consumer thread
        seeks back before it consumes again."""
        self._new_epochs()
        self._rewind_pending.set()
        self._reset()

    # --- flow control and depth (consumer thread) ---------------------------------------------
    def _flow_control(self) -> None:
        high = self.config.max_open_per_partition
        pause: list[TP] = []
        resume: list[TP] = []
        with self._lock:
            for key, window in self._windows.items():
                if key not in self._paused and window.open >= high:
                    pause.append(key)
                    self._paused.add(key)
                elif key in self._paused and window.open < high // 2:
                    resume.append(key)
                    self._paused.discard(key)
        if pause:
            self.consumer.pause(pause)
        if resume:
            self.consumer.resume(resume)

    def _observe_depth(self) -> None:
        depth = dict.fromkeys(ev.Lane, 0)
        with self._lock:
            points = {tp: w.commit_point() for tp, w in self._windows.items()}
        for (topic, partition), point in points.items():
            high = self.consumer.end(topic, partition)  # None: no fetch yet
            if high is not None and point is not None:
                depth[self._lane_of[topic]] += max(0, high - point)
        for lane, n in depth.items():
            self.metrics.lane_depth.labels(lane.value).set(n)
