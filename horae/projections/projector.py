"""The projector: consumes the projected topics and maintains one schema of read models.

Contract (exactly-once effect): every batch's rows and the next offsets of the records it covers
are committed in one PostgreSQL transaction (:mod:`.store`); Kafka offsets are never committed.
On assignment — and after any database error or a schema swap — the consumer seeks every
partition to the offset stored in the schema (or the beginning). So a crash at any instant
(SIGKILL mid-batch included) leaves either the whole batch or none of it, and the restart resumes
exactly after the last committed batch.

Modes:
- group (``horae projector``): a member of the consumer group ``<prefix>projector.<schema>``
  (auto-commit off, read_committed); scales out by partitions;
- replay (rebuild): assigns every partition itself and stops once it has reached the end offsets
  snapshotted at start (``stop_at``).

Topics: the projected catalogue topics and, by pattern (every ``<prefix>events.*`` topic), every
tenant's events topic; a tenant's topic created later joins within the metadata refresh (5 s)
and is read from its beginning (no stored offset), in the same exactly-once batches.

Batches: up to ``batch_records`` records or ``batch_ms`` milliseconds. Records that fail to
decode are counted, kept in ``projection_errors`` and skipped. A batch the store refuses because
of a record's values (:func:`~.store.is_record_fault`: a NUL byte in a description, say) is
retried ``record_retries`` times, ``retry_backoff_s`` seconds apart and doubling; then it is split
to find the records it cannot hold, which are set aside in ``projection_errors`` (cause ``store``)
in one transaction with the offset after them, counted in ``horae_projection_errors_total`` and
logged, while every other record of the batch is projected (:mod:`.isolate`): one tenant's
record never stalls the others. Other database errors are retried with backoff until
``stop_event`` is set; nothing is lost meanwhile (the batch is dropped and re-read).
Pipelining: a writer thread commits batch N while the consumer thread decodes batch N+1 (PostgreSQL
works on the other core). Batches still commit strictly in order; when batch N fails, batch N+1 is
dropped and every partition reseeks to the stored offsets. Rebalance callbacks first wait for the
batch in flight.

Library use: ``Projector(config).run(stop_event)`` runs until the event is set (or, replaying, until
the end).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import psycopg
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from horae.contracts.codec import Codec, default_codec
from horae.contracts.topics import Topic, events_pattern, is_events_topic, topic_name
from horae.kafka.config import client_config
from horae.kafka.txn import LOOP_DEADLINE_S, HangWatch, is_fatal
from horae.projections.isolate import STORE_CAUSE, isolate
from horae.projections.metrics import ProjectionMetrics
from horae.projections.rows import PROJECTED, Batch, RecordMapper, Stage
from horae.projections.store import (
    ApplyResult,
    GenerationChanged,
    ProjectionStore,
    describe_fault,
    is_record_fault,
)

log = logging.getLogger(__name__)
#: the name the loop beats under (:class:`~horae.kafka.txn.HangWatch`)
LOOP = "projector loop"

TP = tuple[str, int]
#: projected topics that exist once per tenant (subscribed by pattern)
_PER_TENANT = (Topic.SCHEDULE_EVENTS,)


@dataclass
class ProjectorConfig:
    bootstrap: str
    database_url: str
    schema: str = "horae"
    topic_prefix: str = "horae."
    batch_records: int = 5000
    batch_ms: int = 200
    group_id: str | None = None  # default <prefix>projector.<schema>
    stop_at: dict[TP, int] | None = None  # replay mode: stop at these end offsets
    record_retries: int = 2  # applies of a batch a record's values refuse, before splitting it
    retry_backoff_s: float = 1.0  # the wait before the first of them (doubling)
    consumer_overrides: dict[str, Any] = field(default_factory=dict)

    @property
    def topics(self) -> dict[str, Topic]:
        """The projected catalogue topics (full name → topic); the tenants' events topics are
        matched by :func:`~horae.contracts.topics.events_pattern` instead."""
        return {topic_name(t, self.topic_prefix): t for t in PROJECTED if t not in _PER_TENANT}

    @property
    def subscription(self) -> list[str]:
        """The catalogue topics and the pattern of every tenant's events topic."""
        return [*self.topics, events_pattern(self.topic_prefix)]

    def existing_topics(self) -> list[str]:
        """Every projected topic on the cluster now (the tenants' events topics included)."""
        admin = AdminClient(client_config(self.bootstrap))
        names = admin.list_topics(timeout=30).topics
        return [n for n in names if n in self.topics or is_events_topic(n, self.topic_prefix)]


@dataclass
class ProjectorStats:
    records: int = 0
    rows: int = 0
    batches: int = 0
    errors: int = 0
    duplicates: int = 0
    db_retries: int = 0
    resyncs: int = 0


BatchHook = Callable[[Batch, ApplyResult], None]


def _first_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}"


class _Stopped(Exception):
    """Stop was requested while a refused batch waited for its next try (nothing committed)."""


class Projector:
    """See the module docstring. ``on_batch`` is called after each committed batch."""

    def __init__(
        self,
        config: ProjectorConfig,
        metrics: ProjectionMetrics | None = None,
        codec: Codec | None = None,
        on_batch: BatchHook | None = None,
    ) -> None:
        self.config = config
        self.metrics = metrics or ProjectionMetrics()
        self.topics = config.topics
        self.mapper = RecordMapper(codec or default_codec(), self.topics)
        self.stage_topics = {  # schedule events come from many topics (rows merge by event id)
            stage: topic_name(t, config.topic_prefix)
            for t, (_, stage) in PROJECTED.items()
            if t not in _PER_TENANT
        }
        self.store = ProjectionStore(
            config.database_url, config.schema, stage_topics=self.stage_topics
        )
        self.stats = ProjectorStats()
        self.on_batch = on_batch
        self.positions: dict[TP, int] = {}  # next offset committed, per assigned partition
        self._eof: dict[TP, int] = {}
        self._stop = threading.Event()
        self._consumer: Consumer | None = None
        self._last_lag_update = 0.0
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="projector-writer")
        self._inflight: tuple[Batch, float, Future[ApplyResult]] | None = None
        self.watch = HangWatch(LOOP_DEADLINE_S)  # the loop beats; stuck: the process ends

    # --- lifecycle ---------------------------------------------------------------------
    def run(self, stop_event: threading.Event | None = None) -> None:
        """Project until ``stop_event`` is set (replay mode: until the end offsets)."""
        self._stop = stop_event or threading.Event()
        if not self._db(self.store.connect):
            return
        consumer = Consumer(self._consumer_config())
        self._consumer = consumer
        try:
            if self.config.stop_at is None:
                consumer.subscribe(
                    self.config.subscription, on_assign=self._on_assign, on_revoke=self._on_revoke,
                    on_lost=self._on_revoke,
                )  # fmt: skip
            else:
                self._assign_all(consumer)
            while not self._stop.is_set():
                self.watch.beat(LOOP)
                if self._inflight is None and self._replay_done():
                    break
                self._step(consumer)
            self._drain(consumer, resync=False)
        finally:
            self.watch.done(LOOP)
            self._consumer = None
            self._writer.shutdown(wait=True)
            consumer.close()
            self.store.close()

    def _consumer_config(self) -> dict[str, Any]:
        cfg = self.config
        conf: dict[str, Any] = client_config(
            cfg.bootstrap,
            {
                "group.id": cfg.group_id or f"{cfg.topic_prefix}projector.{cfg.schema}",
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "isolation.level": "read_committed",
                "auto.offset.reset": "earliest",
                "enable.partition.eof": cfg.stop_at is not None,
                "fetch.max.bytes": 52_428_800,
                "max.partition.fetch.bytes": 4_194_304,
                "queued.min.messages": 20_000,
                "fetch.wait.max.ms": 100,
                "topic.metadata.refresh.interval.ms": 5000,  # a new tenant's topic joins within 5 s
                "log_level": 3,
            },
        )
        conf.update(cfg.consumer_overrides)
        return conf

    # --- assignment ----------------------------------------------------------------------
    def _with_stored(self, partitions: Sequence[TopicPartition]) -> list[TopicPartition]:
        stored: dict[TP, int] = {}

        def read() -> None:
            stored.update(self.store.stored_offsets())

        self._db(read)
        out = []
        for tp in partitions:
            offset = stored.get((tp.topic, tp.partition), OFFSET_BEGINNING)
            out.append(TopicPartition(tp.topic, tp.partition, offset))
            self.positions[(tp.topic, tp.partition)] = max(offset, 0)
        return out

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._drain(consumer, resync=False)
        consumer.assign(self._with_stored(partitions))
        log.info("assigned %d partitions", len(partitions))

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._drain(consumer, resync=False)
        for tp in partitions:
            key = (tp.topic, tp.partition)
            self.positions.pop(key, None)
            for gauge in (self.metrics.lag_records, self.metrics.lag_seconds):
                with contextlib.suppress(KeyError):  # never set for this partition
                    gauge.remove(self.config.schema, tp.topic, str(tp.partition))
        consumer.unassign()

    def _assign_all(self, consumer: Consumer) -> None:
        assert self.config.stop_at is not None
        parts = [TopicPartition(t, p) for (t, p) in self.config.stop_at]
        consumer.assign(self._with_stored(parts))

    def _replay_done(self) -> bool:
        stop_at = self.config.stop_at
        if stop_at is None:
            return False
        return all(
            self.positions.get(tp, 0) >= end or self._eof.get(tp, -1) >= end
            for tp, end in stop_at.items()
        )

    def _resync(self, consumer: Consumer) -> None:
        """Seek every assigned partition back to the stored offsets (after a failed batch)."""
        self.stats.resyncs += 1
        self._eof.clear()
        assignment = consumer.assignment()
        if not assignment:
            return
        targets = self._with_stored(assignment)
        try:
            for tp in targets:
                consumer.seek(tp)
        except KafkaException as exc:  # a partition not fetching yet: re-assign instead
            log.info("seek failed (%s); re-assigning at the stored offsets", exc)
            consumer.assign(targets)

    # --- one batch -----------------------------------------------------------------------
    def _step(self, consumer: Consumer) -> None:
        cfg = self.config
        messages = consumer.consume(cfg.batch_records, cfg.batch_ms / 1000.0)
        batch = Batch()
        for msg in messages:
            err = msg.error()
            topic, partition = msg.topic(), msg.partition()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF and topic is not None:
                    self._eof[(topic, partition or 0)] = msg.offset() or 0
                elif is_fatal(err):
                    raise KafkaException(err)
                else:
                    log.warning("consumer error: %s", err)
                continue
            assert topic is not None and partition is not None
            offset = msg.offset()
            assert offset is not None
            _, ts = msg.timestamp()
            self.mapper.add(batch, topic, partition, offset, msg.key(), msg.value(), ts)
        if not self._drain(consumer, resync=True):
            return  # the batch in flight failed: this one was read past it, drop it
        if batch.records:
            future = self._writer.submit(self._write, batch)
            self._inflight = (batch, time.monotonic(), future)
        self._update_lag(consumer, time.time(), force=bool(batch.records))

    def _drain(self, consumer: Consumer, resync: bool) -> bool:
        """Wait for the batch in flight; account it, or recover (reconnect, and reseek when
        ``resync``). Returns False when it failed."""
        if self._inflight is None:
            return True
        batch, started, future = self._inflight
        self._inflight = None
        try:
            result = future.result()
        except _Stopped:
            return False
        except GenerationChanged as exc:
            log.warning("%s; reconnecting and reseeking", exc)
            self._recover(consumer, resync)
            return False
        except psycopg.Error as exc:
            log.warning("batch not written (%s); retrying from the stored offsets", exc)
            self._count_retry()
            self._recover(consumer, resync)
            return False
        for tp, offset in batch.next_offsets.items():
            if tp in self.positions or self.config.stop_at is not None:
                self.positions[tp] = max(self.positions.get(tp, 0), offset)
        self._account(batch, result, time.monotonic() - started)
        if self.on_batch is not None:
            self.on_batch(batch, result)
        return True

    def _write(self, batch: Batch) -> ApplyResult:
        """Apply ``batch`` (on the writer thread). A record fault: retried, then the batch split
        and the records the store cannot hold set aside (see the module docstring)."""
        cfg = self.config
        delay = cfg.retry_backoff_s
        for retry in range(cfg.record_retries + 1):
            try:
                return self.store.apply(batch)
            except Exception as exc:
                if not is_record_fault(exc):
                    raise
                failure: Exception = exc
            if retry == cfg.record_retries:
                break
            log.warning(
                "batch of %d records refused by the store (%s); trying again in %.1fs",
                batch.records, _first_line(failure), delay,
            )  # fmt: skip
            self._count_retry()
            if self._stop.wait(delay):
                raise _Stopped
            delay *= 2
        results, aside = isolate(batch, failure, self.store.apply, is_record_fault, describe_fault)
        total = ApplyResult()
        for result in results:
            total.add(result)
        total.set_aside.extend(aside)
        for record in aside:
            s = record.source
            log.error(
                "set aside %s[%d]@%d (key %r) in projection_errors: the store cannot hold it: %s",
                s.topic, s.partition, s.offset, s.key, record.detail,
            )  # fmt: skip
        return total

    def _recover(self, consumer: Consumer, resync: bool) -> None:
        self.store.close()
        if self._db(self.store.connect) and resync:
            self._resync(consumer)

    def _account(self, batch: Batch, result: ApplyResult, elapsed: float) -> None:
        m, schema, stats = self.metrics, self.config.schema, self.stats
        stats.batches += 1
        stats.records += batch.records
        stats.rows += result.total_rows
        stats.errors += batch.errors
        stats.duplicates += result.duplicates_identical + result.duplicates_different
        m.batch_seconds.labels(schema).observe(elapsed)
        for stage, n in result.rows.items():
            if stage is not Stage.ERRORS:
                m.rows.labels(schema, stage.value.removeprefix("stage_")).inc(n)
        m.observe_rows(schema, result.total_rows)
        if result.duplicates_different:
            m.duplicate_keys.labels(schema, "different").inc(result.duplicates_different)
        if result.duplicates_identical:
            m.duplicate_keys.labels(schema, "identical").inc(result.duplicates_identical)
        for row in batch.rows.get(Stage.ERRORS, ()):
            m.errors.labels(schema, str(row[3])).inc()
        stats.errors += len(result.set_aside)
        for _ in result.set_aside:
            m.errors.labels(schema, STORE_CAUSE).inc()
        now_ms = time.time() * 1000
        for tp, ts in batch.last_timestamp_ms.items():
            m.lag_seconds.labels(schema, tp[0], str(tp[1])).set(max(0.0, (now_ms - ts) / 1000))

    def _update_lag(self, consumer: Consumer, now: float, force: bool) -> None:
        if not force and now - self._last_lag_update < 1.0:
            return
        self._last_lag_update = now
        schema = self.config.schema
        for (topic, partition), position in list(self.positions.items()):
            try:
                _, high = consumer.get_watermark_offsets(
                    TopicPartition(topic, partition), cached=True
                )
            except KafkaException:
                continue
            if high < 0:
                continue
            behind = max(0, high - position)
            self.metrics.lag_records.labels(schema, topic, str(partition)).set(behind)
            if behind == 0:
                self.metrics.lag_seconds.labels(schema, topic, str(partition)).set(0.0)

    # --- database retries ----------------------------------------------------------------
    def _count_retry(self) -> None:
        self.stats.db_retries += 1
        self.metrics.db_retries.labels(self.config.schema).inc()

    def _db(self, fn: Callable[[], None]) -> bool:
        """Run ``fn`` until it succeeds (reconnecting, with backoff) or stop is requested."""
        delay = 0.2
        while not self._stop.is_set():
            try:
                fn()
                return True
            except psycopg.Error as exc:
                log.warning("database unavailable (%s); retrying in %.1fs", exc, delay)
                self.watch.beat(LOOP)  # waiting for the database on purpose is not stuck
                self.store.close()
                self._count_retry()
                self._stop.wait(delay)
                delay = min(delay * 2, 5.0)
        return False
