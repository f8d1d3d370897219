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
- fenced (a newer producer initialised the same ``transactional.id``: the slot was restarted):
  :class:`~horae.ports.Fenced`, no new producer (it would fence the newer member in turn) and no
  rewind; every later commit raises it again and the owner stops;
- other fatal or ambiguous errors (timeout on commit/offsets): destroy the producer, create a
  new one (``init_transactions`` fences and aborts what the old one left open) and rewind as
  above;
- a call that never returns (librdkafka's ``send_offsets_to_transaction`` does not check its
  timeout while the group coordinator is unreachable, so a broker outage in the middle of it
  blocks it for good): :class:`HangWatch` ends the process for its supervisor to restart.
"""

from __future__ import annotations

import faulthandler
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

from horae.contracts.topics import PRODUCER_DEFAULTS
from horae.failpoints import failpoint
from horae.kafka.config import client_config
from horae.kafka.reader import Seekable, seek_to_committed
from horae.ports import Emit, Fenced, Offsets, TopicPartitionKey, TransactionFailed

log = logging.getLogger(__name__)

COMMIT_TIMEOUT_S = 30.0
#: members learn of a rebalance at their next heartbeat: a drained member's partitions move in
#: about this long
HEARTBEAT_MS = 500
LEAVE_TIMEOUT_S = 2.0
#: a transaction call still blocked this long after it began is hung (every call is given
#: ``COMMIT_TIMEOUT_S``; a transaction open past ``transaction.timeout.ms``, 60 s, is aborted by
#: the broker anyway)
HANG_DEADLINE_S = COMMIT_TIMEOUT_S + 10
#: the exit status of a process ended by :class:`HangWatch` (``EX_SOFTWARE``)
EXIT_HUNG = 70


def leave_group(consumer: Consumer, timeout_s: float = LEAVE_TIMEOUT_S) -> None:
    """Leave the consumer group now. A static member (``group.instance.id``) sends no LeaveGroup
    on ``close()``, so its partitions would wait for its session timeout; unsubscribing does send
    one once the revocation is served (polled here, records polled meanwhile are dropped: nothing
    after the last commit is committed)."""
    try:
        consumer.unsubscribe()
    except KafkaException:  # a fenced (fatal) consumer cannot leave: it is closed as it is
        return
    deadline = time.monotonic() + timeout_s
    while consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(0.05)
    consumer.poll(0)


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
    consumer = client_config(
        bootstrap,
        {
            "group.id": group,
            "group.instance.id": member,
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "partition.assignment.strategy": "range",
            "session.timeout.ms": session_timeout_ms,
            "heartbeat.interval.ms": HEARTBEAT_MS,
            "max.poll.interval.ms": max(min_poll_interval_ms, session_timeout_ms * 3),
            "log_level": 4,
        },
    )
    producer = client_config(
        bootstrap,
        {
            **PRODUCER_DEFAULTS,
            "transactional.id": member,
            "transaction.timeout.ms": 60_000,
            "linger.ms": linger_ms,
            "batch.num.messages": 10_000,
            "queue.buffering.max.messages": 1_000_000,
            "log_level": 4,
        },
    )
    return consumer, producer


def exit_hung(call: str, blocked_s: float) -> None:
    """End the process at once: log why, dump every thread's stack to stderr, exit ``EXIT_HUNG``
    (no clean-up: a clean-up would call into the same blocked client)."""
    log.critical("%s blocked for %.0f s: exiting (%d) to be restarted", call, blocked_s, EXIT_HUNG)
    faulthandler.dump_traceback(all_threads=True)
    os._exit(EXIT_HUNG)


class HangWatch:
    """Ends the process when a watched call outlives ``deadline_s``, or a watched loop stops
    coming round for that long.

    *Calls* (:meth:`call`): librdkafka's ``send_offsets_to_transaction`` does not check its own
    timeout while the group coordinator is unreachable (librdkafka issue 5456) and, after a broker
    outage, may never send its request again: the call blocks for good, the transaction stays open
    and the consumer is no longer polled, so the group fences the member. Nothing in the process
    can cancel a blocked C call.

    *Loops* (:meth:`beat` once per iteration, :meth:`done` when the loop ends): the threads of
    the planner, dispatcher and projector each report that they come round, so a thread stuck
    anywhere (a read that never ends, a lock never released) is seen, not only a transaction call.

    A daemon thread checks about once a second and, once a call or loop is overdue, calls
    ``on_hang(name, blocked_s)`` (by default :func:`exit_hung`: a log line, every thread's stack,
    exit status 70). The supervisor restarts the process; its successor's ``init_transactions``
    fences the transactional id and aborts the open transaction: nothing is lost or decided twice.

    :meth:`call` and :meth:`beat` cost a clock read and a dict write; the thread starts with the
    first of them.
    """

    def __init__(
        self,
        deadline_s: float = HANG_DEADLINE_S,
        on_hang: Callable[[str, float], None] = exit_hung,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.deadline_s = deadline_s
        self._on_hang = on_hang
        self._clock = clock
        self._since: dict[str, float] = {}  # call or loop -> when it began / last came round
        self._thread: threading.Thread | None = None

    @contextmanager
    def call(self, name: str) -> Iterator[None]:
        """Watch the blocking call made inside the ``with`` block."""
        self.beat(name)
        try:
            yield
        finally:
            self.done(name)

    def beat(self, name: str) -> None:
        """Loop (or call) ``name`` is making progress now."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._watch, name="hang-watch", daemon=True)
            self._thread.start()
        self._since[name] = self._clock()

    def done(self, name: str) -> None:
        """``name`` ended: no longer watched."""
        self._since.pop(name, None)

    def overdue(self, now: float) -> tuple[str, float] | None:
        """A call or loop past the deadline and how long it has blocked, if any."""
        for name, since in list(self._since.items()):
            if now - since >= self.deadline_s:
                return name, now - since
        return None

    def _watch(self) -> None:
        period = min(1.0, self.deadline_s / 4)
        while True:
            time.sleep(period)
            if (hung := self.overdue(self._clock())) is not None:
                self._on_hang(*hung)
                return


#: a watched loop (:meth:`HangWatch.beat`) that has not come round for this long is stuck; longer
#: than anything a loop waits for on its own (a transaction call: ``HANG_DEADLINE_S``; a rebuild
#: beats between partitions)
LOOP_DEADLINE_S = 120.0


__all__ = [
    "COMMIT_TIMEOUT_S",
    "EXIT_HUNG",
    "HANG_DEADLINE_S",
    "LOOP_DEADLINE_S",
    "Fenced",
    "GroupMember",
    "HangWatch",
    "TransactionFailed",
    "TransactionalProcessor",
    "leave_group",
    "member_configs",
]

UNASSIGNED = -1  # librdkafka's RD_KAFKA_PARTITION_UA: the partitioner picks by key


#: consumer errors that no retry mends: the member's user lacks a grant it needs (the process
#: stops with the broker's error rather than log it for ever, consuming nothing)
_DENIED = frozenset({KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED})


def is_fatal(err: KafkaError) -> bool:
    """A consumer error the member cannot go on after: fenced (another member took its static
    ``group.instance.id``; as an event, librdkafka says so by its code, ``_FATAL``, not by its
    ``fatal()`` flag), or denied by the broker's ACLs."""
    return bool(err.fatal()) or err.code() == KafkaError._FATAL or err.code() in _DENIED


class GroupMember(Seekable, Protocol):
    """What the transactions need of the consumer: its group metadata (sent with the offsets)
    and, to rewind, what :func:`~horae.kafka.reader.seek_to_committed` needs. A
    ``confluent_kafka.Consumer``."""

    def consumer_group_metadata(self) -> Any: ...


#: what a producer whose transactional id a newer producer took is told
_FENCED = frozenset(
    {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH}
)


def is_fenced(err: KafkaError | None) -> bool:
    """The producer was fenced: a newer one initialised the same ``transactional.id``."""
    return err is not None and err.code() in _FENCED


def _kafka_error(exc: KafkaException) -> KafkaError | None:
    err = exc.args[0] if exc.args else None
    return err if isinstance(err, KafkaError) else None


class TransactionalProcessor:
    """A consumer plus its transactional producer: the Kafka :class:`horae.ports.TransactionalLog`.
    :meth:`commit` writes one batch atomically. The consume side (:meth:`subscribe`,
    :meth:`consume`, :meth:`positions`) needs a ``confluent_kafka.Consumer``; a caller that
    consumes on its own (the dispatcher) may pass any :class:`GroupMember`."""

    def __init__(
        self,
        consumer: GroupMember,
        producer_config: dict[str, Any],
        on_rewind: Callable[[], None] = lambda: None,
        watch: HangWatch | None = None,
    ) -> None:
        self.consumer = consumer
        self.watch = watch or HangWatch()
        self._producer_config = dict(producer_config)
        self._producer_config.setdefault("enable.idempotence", True)
        self._producer_config.setdefault("partitioner", "murmur2_random")
        self._producer_config.setdefault("linger.ms", 5)
        self._on_rewind = on_rewind
        self.aborts = 0
        self._closed = False
        self._fenced = False  # a newer member took the transactional id: no commit any more
        self.producer_restarts = 0
        self.producer = self._new_producer()

    def _new_producer(self) -> Producer:
        producer = Producer(self._producer_config)
        with self.watch.call("init_transactions"):
            producer.init_transactions(COMMIT_TIMEOUT_S)
        return producer

    def close(self) -> None:
        """Flush the producer, then leave the group and close the consumer when it is a
        ``Consumer`` (it then consumed through this processor). Idempotent. A fenced producer
        has nothing to flush (its flush raises the fence again)."""
        if not self._fenced:
            self.producer.flush(10)
        if isinstance(self.consumer, Consumer) and not self._closed:
            self._closed = True
            leave_group(self.consumer)
            self.consumer.close()

    # --- the consume side -----------------------------------------------------------------
    @property
    def _consumer(self) -> Consumer:
        assert isinstance(self.consumer, Consumer), "consuming needs a confluent_kafka.Consumer"
        return self.consumer

    def subscribe(
        self,
        topics: Sequence[str],
        on_assign: Callable[[Sequence[TopicPartitionKey]], None],
        on_revoke: Callable[[Sequence[TopicPartitionKey]], None],
        on_lost: Callable[[Sequence[TopicPartitionKey]], None] | None = None,
    ) -> None:
        lost_cb = on_lost or on_revoke

        def assigned(_: Consumer, partitions: list[TopicPartition]) -> None:
            on_assign([(tp.topic, tp.partition) for tp in partitions])

        def revoked(_: Consumer, partitions: list[TopicPartition]) -> None:
            on_revoke([(tp.topic, tp.partition) for tp in partitions])

        def lost(_: Consumer, partitions: list[TopicPartition]) -> None:
            lost_cb([(tp.topic, tp.partition) for tp in partitions])

        self._consumer.subscribe(list(topics), on_assign=assigned, on_revoke=revoked, on_lost=lost)

    def unsubscribe(self) -> None:
        self._consumer.unsubscribe()

    def consume(self, max_records: int, timeout_s: float) -> list[Any]:
        """Records only: error events are logged and dropped (see the port); a fatal one (this
        member was fenced) raises ``KafkaException``: the worker cannot go on."""
        messages = self._consumer.consume(max_records, timeout=timeout_s)
        for msg in messages:
            err = msg.error()
            if err is not None and is_fatal(err):
                raise KafkaException(err)
            if err is not None:
                log.warning("consume error: %s", err)
                return [m for m in messages if m.error() is None]
        return messages

    def assignment(self) -> list[TopicPartitionKey]:
        return [(tp.topic, tp.partition) for tp in self.consumer.assignment()]

    def positions(self) -> dict[TopicPartitionKey, int]:
        consumer = self._consumer
        return {
            (tp.topic, tp.partition): tp.offset
            for tp in consumer.position(consumer.assignment())
            if tp.offset >= 0
        }

    # --- the transaction ------------------------------------------------------------------
    def commit(
        self, records: Sequence[Emit], next_offsets: Offsets | Sequence[TopicPartition]
    ) -> None:
        """Produce ``records`` and commit ``next_offsets`` in one transaction (see
        :meth:`horae.ports.TransactionalLog.commit`). ``next_offsets`` may also be given as
        ``TopicPartition`` s.

        Raises :class:`TransactionFailed` after aborting and rewinding when it could not commit.
        """
        if self._fenced:
            self.aborts += 1
            raise Fenced("this member was fenced: a newer one has its transactional id")
        if isinstance(next_offsets, Mapping):
            offsets = [TopicPartition(t, p, o) for (t, p), o in next_offsets.items()]
        else:
            offsets = list(next_offsets)
        try:
            self.producer.begin_transaction()
            for rec in records:
                self._produce(rec)
            if offsets:
                with self.watch.call("send_offsets_to_transaction"):
                    self.producer.send_offsets_to_transaction(
                        offsets, self.consumer.consumer_group_metadata(), COMMIT_TIMEOUT_S
                    )
            with self.watch.call("flush"):
                self.producer.flush(COMMIT_TIMEOUT_S)
            failpoint("before_commit")
            self._commit_with_retries()
            failpoint("after_commit")
        except KafkaException as exc:
            if self._fenced or is_fenced(_kafka_error(exc)):
                self._fenced = True
                self.aborts += 1
                raise Fenced(str(exc)) from exc
            self._recover(exc)
            raise TransactionFailed(str(exc)) from exc

    def _produce(self, rec: Emit) -> None:
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
        for attempt in range(6):
            try:
                with self.watch.call("commit_transaction"):
                    self.producer.commit_transaction(COMMIT_TIMEOUT_S)
                return
            except KafkaException as exc:
                err = _kafka_error(exc)
                retriable = err is not None and err.retriable() and not err.txn_requires_abort()
                if retriable and attempt < 5:
                    continue
                raise

    def _recover(self, exc: KafkaException) -> None:
        err = _kafka_error(exc)
        self.aborts += 1
        abortable = err is not None and err.txn_requires_abort() and not err.fatal()
        if abortable:
            try:
                with self.watch.call("abort_transaction"):
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
        seek_to_committed(self.consumer)
        self._on_rewind()
