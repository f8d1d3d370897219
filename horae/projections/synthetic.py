"""Synthetic history records for tests and benchmarks (the planner and dispatcher are separate).

Builds valid events with the contracts' types and real fire keys, as :class:`~horae.ports.Emit`
records built by the one routing table (:class:`~horae.contracts.routing.Router`) under a prefix,
partitioned as the catalogue says (a fire's ledger record, attempts and outcome on its trigger's
partition number), and produces them. Deterministic for a given seed.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, timedelta

from confluent_kafka import Producer

from horae.contracts import events as ev
from horae.contracts.routing import Router
from horae.contracts.topics import (
    PRODUCER_DEFAULTS,
    Topic,
    fire_partition,
    partition_for,
    topic_name,
)
from horae.domain.keys import FireKey
from horae.kafka.config import client_config
from horae.kafka.txn import UNASSIGNED
from horae.ports import Emit

START = datetime(2026, 3, 1, tzinfo=UTC)


def definition(
    tenant: str, trigger: str, version: int = 1, at: datetime = START
) -> ev.TriggerDefinition:
    return ev.TriggerDefinition(
        tenant=tenant,
        trigger_id=trigger,
        version=version,
        state=ev.DefinitionState.LIVE,
        recurrence=ev.Recurrence(kind=ev.RecurrenceKind.CRON, expr="* * * * *"),
        target=ev.Target(kind=ev.TargetKind.WEBHOOK, url="https://example.com/hook"),
        authored_at=at,
        author="dev@" + tenant,
        description=f"{trigger} v{version}",
        labels={"team": "ops"},
    )


def fire(
    tenant: str,
    trigger: str,
    scheduled: datetime,
    state: ev.FireState = ev.FireState.FIRED,
    decided_delay: timedelta = timedelta(milliseconds=40),
    cause: str | None = None,
    sequence: int = 0,
) -> ev.FireRecord:
    key = FireKey(tenant, trigger, int(scheduled.timestamp()), sequence, ev.Origin.SCHEDULED)
    return ev.FireRecord(
        fire_key=key.canonical(),
        key_hash=key.short_hash(),
        tenant=tenant,
        trigger_id=trigger,
        origin=ev.Origin.SCHEDULED,
        scheduled_at=scheduled,
        sequence=sequence,
        jitter_ms=0,
        due_at=scheduled,
        decided_at=scheduled + decided_delay,
        state=state,
        trigger_version=1,
        tzdata_version="2025b",
        target_kind=ev.TargetKind.WEBHOOK,
        lane=ev.Lane.ON_TIME if state is ev.FireState.FIRED else None,
        cause=cause,
    )


def attempt(f: ev.FireRecord, n: int, late: timedelta, ok: bool = True) -> ev.Attempt:
    started = f.due_at + late
    return ev.Attempt(
        fire_key=f.fire_key,
        key_hash=f.key_hash,
        tenant=f.tenant,
        trigger_id=f.trigger_id,
        n=n,
        lane=ev.Lane.ON_TIME if n == 1 else ev.Lane.RETRY,
        started_at=started,
        ended_at=started + timedelta(milliseconds=120),
        transport_result=ev.TransportResult.OK if ok else ev.TransportResult.HTTP_ERROR,
        duration_ms=120,
        http_status=200 if ok else 503,
    )


def outcome(f: ev.FireRecord, attempts: list[ev.Attempt]) -> ev.WorkOutcome:
    last = attempts[-1]
    ok = last.transport_result is ev.TransportResult.OK
    return ev.WorkOutcome(
        fire_key=f.fire_key,
        key_hash=f.key_hash,
        tenant=f.tenant,
        trigger_id=f.trigger_id,
        state=ev.OutcomeState.SUCCEEDED if ok else ev.OutcomeState.EXHAUSTED,
        attempts=len(attempts),
        decided_at=last.ended_at,
        first_attempt_at=attempts[0].started_at,
        last_attempt_at=last.started_at,
        http_status=last.http_status,
    )


def schedule_event(f: ev.FireRecord, seed: int) -> ev.ScheduleEvent:
    return ev.ScheduleEvent(
        event_id=str(uuid.UUID(int=random.Random(f"{seed}{f.fire_key}").getrandbits(128))),
        type=ev.ScheduleEventType.TRIGGERED.value,
        tenant=f.tenant,
        trigger_id=f.trigger_id,
        emitted_at=f.decided_at,
        trigger_version=f.trigger_version,
        fire_key=f.fire_key,
        key_hash=f.key_hash,
        origin=f.origin,
        scheduled_at=f.scheduled_at,
        due_at=f.due_at,
    )


def audit(tenant: str, i: int) -> ev.AuditEntry:
    return ev.AuditEntry(
        audit_id=f"{tenant}-audit-{i}",
        tenant=tenant,
        principal=tenant + "-policy",  # the signing key id
        role=ev.Role.POLICY,
        action="horizon.above_default",  # a definition using its tenant's horizon grant
        at=START + timedelta(minutes=i),
        allowed=True,
        detail={"version": "2"},
    )


def _trigger_of(i: int, tenants: int, triggers: int) -> tuple[str, str]:
    return f"tenant-{i % tenants}", f"trigger-{(i // tenants) % triggers}"


def history(
    n_fires: int,
    tenants: int = 3,
    triggers: int = 5,
    seed: int = 7,
    dispatch_share: float = 0.2,
    start_index: int = 0,
    with_definitions: bool = True,
    *,
    prefix: str,
    partitions: int,
) -> Iterator[Emit]:
    """Definitions for every trigger, then ``n_fires`` fire records (one per instant, a minute
    apart per trigger; ~5 % not fired, with a cause); ``dispatch_share`` of the fired ones get
    attempts (sometimes a failed first one), an outcome and a schedule event. Records go to the
    topics under ``prefix``, on their trigger's partition of ``partitions`` (audit: by key)."""
    router = Router(prefix)
    rng = random.Random(seed + start_index)
    if with_definitions:
        for t in range(tenants):
            for k in range(triggers):
                tenant, trig = f"tenant-{t}", f"trigger-{k}"
                part = fire_partition(tenant, trig, partitions)
                yield router.emit(definition(tenant, trig), part)
        for t in range(tenants):
            yield router.emit(audit(f"tenant-{t}", start_index), None)
    per_instant = tenants * triggers
    for i in range(start_index, start_index + n_fires):
        tenant, trig = _trigger_of(i, tenants, triggers)
        part = fire_partition(tenant, trig, partitions)
        scheduled = START + timedelta(minutes=i // per_instant)
        roll = rng.random()
        if roll < 0.05:
            f = fire(tenant, trig, scheduled, ev.FireState.SKIPPED, cause="skipped: overlap")
        else:
            f = fire(tenant, trig, scheduled)
        yield router.emit(f, part)
        if f.state is ev.FireState.FIRED and rng.random() < dispatch_share:
            late = timedelta(milliseconds=rng.randint(5, 900))
            tries = [attempt(f, 1, late, ok=rng.random() > 0.2)]
            if tries[0].transport_result is not ev.TransportResult.OK:
                tries.append(attempt(f, 2, late + timedelta(seconds=2)))
            for a in tries:
                yield router.emit(a, part)
            yield router.emit(outcome(f, tries), part)
            yield router.emit(schedule_event(f, seed), part)


class HistoryProducer:
    """Produces :class:`~horae.ports.Emit` records (a record without a partition: by key) and
    raw ones under ``prefix``."""

    def __init__(self, bootstrap: str, prefix: str, extra: dict[str, object] | None = None):
        conf: dict[str, object] = client_config(
            bootstrap,
            {**PRODUCER_DEFAULTS, "linger.ms": 20, "compression.type": "lz4", **(extra or {})},
        )
        self.producer = Producer(conf)
        self.prefix = prefix
        self._partitions: dict[str, int] = {}

    def partitions(self, topic: str) -> int:
        """The topic's partition count (waits out the moment after creation when the metadata
        does not list its partitions yet)."""
        deadline = time.monotonic() + 30
        while topic not in self._partitions:
            meta = self.producer.list_topics(topic, timeout=10).topics.get(topic)
            if meta is not None and meta.error is None and meta.partitions:
                self._partitions[topic] = len(meta.partitions)
            elif time.monotonic() > deadline:
                raise RuntimeError(f"topic {topic} has no partitions in the metadata")
            else:
                time.sleep(0.2)
        return self._partitions[topic]

    def send(self, records: Iterable[Emit]) -> int:
        n = 0
        for rec in records:
            part = UNASSIGNED if rec.partition is None else rec.partition
            while True:
                try:
                    self.producer.produce(rec.topic, rec.value, rec.key, partition=part)
                    break
                except BufferError:
                    self.producer.poll(0.05)
            n += 1
            if n % 1000 == 0:
                self.producer.poll(0)
        return n

    def send_raw(self, topic: Topic, key: str, value: bytes, by: str) -> None:
        """One record of any bytes on ``topic``, on the partition of the key ``by``."""
        name = topic_name(topic, self.prefix)
        self.send([Emit(name, key.encode(), value, partition_for(by, self.partitions(name)))])

    def flush(self) -> None:
        remaining = self.producer.flush(30)
        if remaining:
            raise RuntimeError(f"{remaining} records not delivered")
