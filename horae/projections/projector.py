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

Reading: through the consumer port (:class:`~horae.ports.RecordConsumer`: a consumer that never
commits, told where each partition starts; :class:`~horae.kafka.consumer.KafkaConsumer` by
default, any other given as ``consumer``), so the loop names no Kafka client.

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
from typing import Any, Generic, Protocol, TypeVar, cast, overload

import psycopg
from confluent_kafka.admin import AdminClient

from horae.contracts.codec import Codec, default_codec
from horae.contracts.topics import Topic, events_pattern, is_events_topic, topic_name
from horae.kafka.config import client_config
from horae.kafka.consumer import KafkaConsumer
from horae.kafka.txn import LOOP_DEADLINE_S, HangWatch
from horae.ports import ReadModelStore, RecordConsumer, TopicPartitionKey
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

TP = TopicPartitionKey
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


class ConnectedStore(ReadModelStore, Protocol):
    """The :class:`~horae.ports.ReadModelStore` with its connection (``ProjectionStore``;
    :class:`~horae.testing.InMemoryStore` has nothing to open): :meth:`connect` raises
    ``psycopg.Error`` while the database is unavailable."""

    def connect(self) -> None: ...

    def close(self) -> None: ...


S = TypeVar("S", bound=ConnectedStore)


class Projector(Generic[S]):
    """See the module docstring. ``on_batch`` is called after each committed batch. It reads
    through a :class:`~horae.ports.RecordConsumer` (``consumer``; by default a
    :class:`~horae.kafka.consumer.KafkaConsumer` of the config's, made by :meth:`run`) into a
    store (``store``; by default the config's PostgreSQL schema)."""

    @overload
    def __init__(
        self: Projector[ProjectionStore],
        config: ProjectorConfig,
        metrics: ProjectionMetrics | None = None,
        codec: Codec | None = None,
        on_batch: BatchHook | None = None,
        consumer: RecordConsumer | None = None,
        store: None = None,
    ) -> None: ...

    @overload
    def __init__(
        self: Projector[S],
        config: ProjectorConfig,
        metrics: ProjectionMetrics | None = None,
        codec: Codec | None = None,
        on_batch: BatchHook | None = None,
        consumer: RecordConsumer | None = None,
        *,
        store: S,
    ) -> None: ...

    def __init__(
        self,
        config: ProjectorConfig,
        metrics: ProjectionMetrics | None = None,
        codec: Codec | None = None,
        on_batch: BatchHook | None = None,
        consumer: RecordConsumer | None = None,
        store: Any = None,
    ) -> None:
        self.config = config
        self._given_consumer = consumer
        self.metrics = metrics or ProjectionMetrics()
        self.topics = config.topics
        self.mapper = RecordMapper(codec or default_codec(), self.topics)
        self.stage_topics = {  # schedule events come from many topics (rows merge by event id)
            stage: topic_name(t, config.topic_prefix)
            for t, (_, stage) in PROJECTED.items()
            if t not in _PER_TENANT
        }
        self.store: S = (  # the overloads: S is ProjectionStore when no store is given
            store
            if store is not None
            else cast(
                S,
                ProjectionStore(config.database_url, config.schema, stage_topics=self.stage_topics),
            )
        )
        self.stats = ProjectorStats()
        self.on_batch = on_batch
        self.positions: dict[TP, int] = {}  # next offset committed, per assigned partition
        self._stop = threading.Event()
        self._consumer: RecordConsumer | None = None
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
        consumer = self._given_consumer or KafkaConsumer(self._consumer_config())
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
                if self._inflight is None and self._replay_done(consumer):
                    break
                self._step(consumer)
            self._drain(resync=False)
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
    def _with_stored(self, partitions: Sequence[TP]) -> dict[TP, int | None]:
        """Where each partition starts: its stored offset, or the beginning (None)."""
        stored: dict[TP, int] = {}

        def read() -> None:
            stored.update(self.store.stored_offsets())

        self._db(read)
        out: dict[TP, int | None] = {}
        for tp in partitions:
            out[tp] = stored.get(tp)
            self.positions[tp] = stored.get(tp, 0)
        return out

    def _on_assign(self, partitions: Sequence[TP]) -> dict[TP, int | None]:
        self._drain(resync=False)
        log.info("assigned %d partitions", len(partitions))
        return self._with_stored(partitions)

    def _on_revoke(self, partitions: Sequence[TP]) -> None:
        self._drain(resync=False)
        for tp in partitions:
            self.positions.pop(tp, None)
            for gauge in (self.metrics.lag_records, self.metrics.lag_seconds):
                with contextlib.suppress(KeyError):  # never set for this partition
                    gauge.remove(self.config.schema, tp[0], str(tp[1]))

    def _assign_all(self, consumer: RecordConsumer) -> None:
        assert self.config.stop_at is not None
        consumer.assign(self._with_stored(list(self.config.stop_at)))

    def _replay_done(self, consumer: RecordConsumer) -> bool:
        stop_at = self.config.stop_at
        if stop_at is None:
            return False
        ends = consumer.ends_reached()
        return all(
            self.positions.get(tp, 0) >= end or ends.get(tp, -1) >= end
            for tp, end in stop_at.items()
        )

    def _resync(self) -> None:
        """Seek every assigned partition back to the stored offsets (after a failed batch)."""
        self.stats.resyncs += 1
        consumer = self._consumer
        assignment = consumer.assignment() if consumer is not None else []
        if consumer is None or not assignment:
            return
        consumer.seek(self._with_stored(assignment))

    # --- one batch -----------------------------------------------------------------------
    def _step(self, consumer: RecordConsumer) -> None:
        cfg = self.config
        messages = consumer.consume(cfg.batch_records, cfg.batch_ms / 1000.0)
        batch = Batch()
        for msg in messages:
            topic, partition = msg.topic(), msg.partition()
            assert topic is not None and partition is not None
            offset = msg.offset()
            assert offset is not None
            _, ts = msg.timestamp()
            self.mapper.add(
                batch, topic, partition, offset, msg.key(), msg.value(), ts, msg.headers()
            )
        if not self._drain(resync=True):
            return  # the batch in flight failed: this one was read past it, drop it
        if batch.records:
            future = self._writer.submit(self._write, batch)
            self._inflight = (batch, time.monotonic(), future)
        self._update_lag(consumer, time.time(), force=bool(batch.records))

    def _drain(self, resync: bool) -> bool:
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
            self._recover(resync)
            return False
        except psycopg.Error as exc:
            log.warning("batch not written (%s); retrying from the stored offsets", exc)
            self._count_retry()
            self._recover(resync)
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

    def _recover(self, resync: bool) -> None:
        self.store.close()
        if self._db(self.store.connect) and resync:
            self._resync()

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

    def _update_lag(self, consumer: RecordConsumer, now: float, force: bool) -> None:
        if not force and now - self._last_lag_update < 1.0:
            return
        self._last_lag_update = now
        schema = self.config.schema
        for (topic, partition), position in list(self.positions.items()):
            high = consumer.end(topic, partition)
            if high is None:
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
