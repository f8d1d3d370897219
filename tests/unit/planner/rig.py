"""A planner on the in-memory log and a virtual clock (no Kafka): the ``rig`` fixture of the
planner's unit tests (``conftest.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from horae.contracts import events as ev
from horae.contracts.codec import decode, encode
from horae.contracts.grants import Grants
from horae.contracts.topics import Topic, events_topic, topic_name
from horae.ports import SYSTEM_ZONES, ZoneSource
from horae.streams.planner.snapshot import snapshot_topic
from horae.streams.planner.worker import Planner, PlannerConfig
from horae.testing import InMemoryLog, InMemoryReader, VirtualBrokerClock, VirtualClock
from tests.unit.planner.builders import KEY_ID, TENANT, TENANT_KEYS

PREFIX = "t."
T0 = 1_800_000_000.0  # a minute boundary
E = TypeVar("E", bound=ev.Event)


@dataclass
class Rig:
    log: InMemoryLog
    clock: VirtualClock
    broker: VirtualBrokerClock
    planner: Planner
    snapshot_changes: int = 0

    def name(self, topic: Topic) -> str:
        if topic is Topic.SCHEDULE_EVENTS:  # the tenant's own events topic
            return events_topic(TENANT, PREFIX)
        return topic_name(topic, PREFIX)

    def put(self, d: ev.TriggerDefinition) -> None:
        key = ev.trigger_key(d.tenant, d.trigger_id).encode()
        self.log.produce(self.name(Topic.DEFINITIONS), key, encode(d))

    def send(self, c: ev.Command) -> None:
        key = ev.trigger_key(c.tenant, c.trigger_id).encode()
        self.log.produce(self.name(Topic.COMMANDS), key, encode(c))

    def step(self, advance_s: float = 0.0) -> None:
        self.clock.advance(advance_s)
        self.planner.step()

    def restart(self, zones: ZoneSource = SYSTEM_ZONES) -> None:
        """A new planner on the same log and clock (and ``zones``, its time-zone database):
        its indexes are rebuilt from the log."""
        self.planner.close()
        self.planner = _planner(self.log, self.clock, self.broker, zones, self.snapshot_changes)

    def read(self, topic: Topic, kind: type[E]) -> list[E]:
        return [
            decode(value, kind)
            for r in self.log.records(self.name(topic))
            if (value := r.value()) is not None
        ]

    def fires(self) -> list[ev.FireRecord]:
        return self.read(Topic.FIRES, ev.FireRecord)

    def events(self) -> list[str]:
        return [e.type for e in self.read(Topic.SCHEDULE_EVENTS, ev.ScheduleEvent)]

    def quarantined(self) -> list[str]:
        return [q.cause for q in self.read(Topic.QUARANTINE, ev.Quarantined)]


def _planner(
    log: InMemoryLog,
    clock: VirtualClock,
    broker: VirtualBrokerClock,
    zones: ZoneSource = SYSTEM_ZONES,
    snapshot_changes: int = 0,
) -> Planner:
    def ensure_topics(names: Sequence[str]) -> None:
        for name in names:
            log.create_topic(name, 4)

    roles = {TENANT: {KEY_ID: frozenset({ev.Role.AUTHOR, ev.Role.POLICY})}}  # backfills too
    config = PlannerConfig(
        "unused:9092",
        PREFIX,
        "a",
        tenant_keys=TENANT_KEYS,
        min_interval_s=1,
        grants=Grants(roles=roles),
        snapshot_changes=snapshot_changes,
    )
    return Planner(
        config,
        clock,
        txn=log,
        reader=InMemoryReader(log),
        broker_clock=broker,
        ensure_topics=ensure_topics,
        zones=zones,
    )


def make_rig(snapshot_changes: int = 0) -> Rig:
    """A rig; with ``snapshot_changes`` its planners snapshot their compact indexes (see
    :mod:`horae.streams.planner.snapshot`) and start from the snapshots."""
    log = InMemoryLog()
    for t in Topic:
        log.create_topic(topic_name(t, PREFIX), 4)
    log.create_topic(snapshot_topic(PREFIX), 4)
    clock = VirtualClock(T0)
    broker = VirtualBrokerClock(clock)
    planner = _planner(log, clock, broker, snapshot_changes=snapshot_changes)
    return Rig(log, clock, broker, planner, snapshot_changes)
