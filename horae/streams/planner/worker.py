"""The planner process: a consumer-group member that owns partitions of the definitions and
commands topics and turns due instants into committed fire records.

Per loop iteration (about every ``tick_s``, sooner when an earlier instant becomes due):
1. consume definitions and commands (read_committed) and apply them to the owned due indexes;
2. if the clock gate is open, decide every instant due at ``now − ε``;
3. commit, in ONE Kafka transaction, every record this produced (fire records, planner-state
   updates, accepted definitions, dispatch orders, schedule events, audit, quarantine) and the
   consumed offsets with the group metadata (KIP-447: a fenced or stale member cannot commit).

State lives in Kafka only: on assignment (and after any aborted transaction) each owned partition's
index is rebuilt from the compacted planner-state changelog and the accepted definitions (both
written in the transactions that commit the input offsets), so restart, rebalance and failover
take the same path as a cold start.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from confluent_kafka import Consumer, Message, TopicPartition

from horae.contracts import events as ev
from horae.contracts.codec import encode
from horae.contracts.ingress import TenantKeys
from horae.contracts.topics import Topic, lane_topic, topic_name
from horae.domain.trigger import Limits
from horae.kafka.txn import OutRecord, TransactionalProcessor, TransactionFailed, member_configs
from horae.streams.planner.clock import ClockGate, clock_topic
from horae.streams.planner.decide import Decider
from horae.streams.planner.index import DueIndex
from horae.streams.planner.metrics import PlannerMetrics
from horae.streams.planner.rebuild import long_lived, rebuild_partition
from horae.streams.planner.records import Output

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PlannerConfig:
    bootstrap: str
    prefix: str
    slot: str  # stable per worker slot: the transactional.id derives from it
    tick_s: float = 1.0
    epsilon_s: float = 0.0  # decide instants due at now − ε
    max_skew_s: float = 2.0
    batch_limit: int = 20_000  # most decisions per transaction
    session_timeout_ms: int = 10_000
    tenant_keys: TenantKeys | None = None  # definition- and command-signing keys
    min_interval_s: int = 60  # platform limit on how often a trigger may fire


class Planner:
    """One planner worker. ``run(stop)`` loops until ``stop`` is set."""

    def __init__(
        self,
        config: PlannerConfig,
        clock: Callable[[], float] = time.time,
        metrics: PlannerMetrics | None = None,
    ) -> None:
        self.config = config
        self.clock = clock
        self.metrics = metrics or PlannerMetrics()
        self.decider = Decider(config.tenant_keys, Limits(min_interval_s=config.min_interval_s))
        self.indexes: dict[int, DueIndex] = {}
        self._topics = {t: topic_name(t, config.prefix) for t in Topic}
        consumer_config, producer_config = member_configs(
            config.bootstrap,
            f"{config.prefix}planner",
            config.slot,
            config.session_timeout_ms,
            min_poll_interval_ms=30_000,
            linger_ms=5,
        )
        self.consumer = Consumer(consumer_config)
        self.txn = TransactionalProcessor(self.consumer, producer_config, self._rebuild_all)
        self.gate = ClockGate(
            config.bootstrap, clock_topic(config.prefix), clock, config.max_skew_s
        )
        self._subscribed = False

    # --- group membership ----------------------------------------------------------------
    def _subscribe(self) -> None:
        self.consumer.subscribe(
            [self._topics[Topic.DEFINITIONS], self._topics[Topic.COMMANDS]],
            on_assign=self._on_assign,
            on_revoke=self._on_revoke,
            on_lost=self._on_revoke,
        )
        self._subscribed = True

    def _release(self) -> None:
        self.consumer.unsubscribe()
        self.indexes.clear()
        self._subscribed = False
        self.metrics.partitions_owned.set(0)

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        numbers = sorted({tp.partition for tp in partitions})
        started = time.monotonic()
        with long_lived():
            for p in numbers:
                self.indexes[p] = self._rebuild(p)
        self.metrics.partitions_owned.set(len(self.indexes))
        log.info(
            "assigned partitions %s: %d triggers indexed in %.2f s",
            numbers,
            sum(len(self.indexes[p]) for p in numbers),
            time.monotonic() - started,
        )

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # every batch is committed before the next poll, so nothing is pending here
        for tp in partitions:
            self.indexes.pop(tp.partition, None)
        self.metrics.partitions_owned.set(len(self.indexes))

    def _rebuild(self, p: int) -> DueIndex:
        return rebuild_partition(
            self.config.bootstrap,
            p,
            accepted_topic=self._topics[Topic.ACCEPTED],
            state_topic=self._topics[Topic.PLANNER_STATE],
            decider=self.decider,
            now=self.clock(),
        )

    def _rebuild_all(self) -> None:
        with long_lived():
            for p in list(self.indexes):
                self.indexes[p] = self._rebuild(p)

    # --- the loop -----------------------------------------------------------------------
    def run(self, stop: threading.Event) -> None:
        self.gate.wait_first_reading()
        try:
            while not stop.is_set():
                self.step()
        finally:
            self.close()

    def close(self) -> None:
        self.gate.close()
        self.txn.close()
        self.consumer.close()

    def step(self) -> None:
        self.gate.poll()
        self.metrics.clock_offset.set(self.gate.reading.offset_s if self.gate.reading else 0.0)
        if not self.gate.open:
            if self._subscribed:
                log.error("clock gate closed (reading %s): releasing partitions", self.gate.reading)
                self.metrics.clock_gate_closed.inc()
                self._release()
            time.sleep(min(self.config.tick_s, 0.5))
            return
        if not self._subscribed:
            self._subscribe()
        messages = self.consumer.consume(1000, timeout=self._wait_s())
        now = self.clock()
        outputs: list[Output] = []
        for msg in messages:
            outputs.extend(self._apply(msg, now))
        decide_until = now - self.config.epsilon_s
        for index in self.indexes.values():
            outputs.extend(
                self.decider.decide_due(index, decide_until, now, self.config.batch_limit)
            )
        if messages or outputs:
            self._commit(outputs, messages, now)
        earliest = [d for i in self.indexes.values() if (d := i.earliest_due()) is not None]
        self.metrics.oldest_due_age.set(max(0.0, now - min(earliest)) if earliest else 0.0)

    def _wait_s(self) -> float:
        due = [d for i in self.indexes.values() if (d := i.earliest_due()) is not None]
        if not due:
            return self.config.tick_s
        until = min(due) + self.config.epsilon_s - self.clock()
        return max(0.0, min(self.config.tick_s, until))

    def _apply(self, msg: Message, now: float) -> list[Output]:
        if msg.error() is not None:
            log.warning("consume error: %s", msg.error())
            return []
        index = self.indexes.get(msg.partition() or 0)
        if index is None:
            return []
        if msg.topic() == self._topics[Topic.DEFINITIONS]:
            return self.decider.on_definition_record(index, msg, now)
        return self.decider.on_command_record(index, msg, now)

    def _commit(self, outputs: Sequence[Output], messages: Sequence[Message], now: float) -> None:
        records = [self._record(out) for out in outputs]
        offsets = [
            tp for tp in self.consumer.position(self.consumer.assignment()) if tp.offset >= 0
        ]
        try:
            self.txn.commit(records, offsets)
        except TransactionFailed as exc:
            self.metrics.transaction_aborts.inc()
            log.warning("transaction aborted, state rebuilt from Kafka: %s", exc)
            return
        self.metrics.observe_committed(outputs, now)

    def _record(self, out: Output) -> OutRecord:
        event, partition = out.event, out.partition
        topic: Topic
        key: str
        if isinstance(event, ev.FireRecord):
            topic, key = Topic.FIRES, event.fire_key
        elif isinstance(event, ev.PlannerState):
            topic, key = Topic.PLANNER_STATE, ev.trigger_key(event.tenant, event.trigger_id)
        elif isinstance(event, ev.DispatchOrder):
            topic, key = lane_topic(event.lane), event.fire.fire_key
        elif isinstance(event, ev.TriggerDefinition):
            topic, key = Topic.ACCEPTED, ev.trigger_key(event.tenant, event.trigger_id)
        elif isinstance(event, ev.ScheduleEvent):
            topic, key = Topic.SCHEDULE_EVENTS, ev.trigger_key(event.tenant, event.trigger_id)
        elif isinstance(event, ev.Quarantined):
            topic, key = Topic.QUARANTINE, (event.original_key or b"").decode(errors="replace")
        elif isinstance(event, ev.AuditEntry):
            topic, key, partition = Topic.AUDIT, event.tenant, None
        else:  # pragma: no cover - the decider emits only the types above
            raise TypeError(f"unexpected output {type(event).__name__}")
        return OutRecord(self._topics[topic], key.encode(), encode(event), partition)
