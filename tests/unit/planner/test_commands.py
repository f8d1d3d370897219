"""Commands apply exactly once, expire, and tenants are suspended — the planner on the in-memory
log (horae.testing) and a virtual clock, restarts included; no Kafka."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import TypeVar

import pytest

from horae.contracts import events as ev
from horae.contracts import signing
from horae.contracts.codec import decode, encode
from horae.contracts.topics import Topic, topic_name
from horae.streams.planner.worker import Planner, PlannerConfig
from horae.testing import InMemoryLog, InMemoryReader, VirtualBrokerClock, VirtualClock
from tests.unit.planner.builders import KEY_ID, SECRET, TENANT, TENANT_KEYS, command, definition

PREFIX = "t."
T0 = 1_800_000_000.0  # a minute boundary
PARTITIONS = 4
PLATFORM_KEY_ID, PLATFORM_SECRET = "horae-platform", b"platform-secret"
KEYS = {TENANT: {**TENANT_KEYS[TENANT], PLATFORM_KEY_ID: PLATFORM_SECRET}}
E = TypeVar("E", bound=ev.Event)


class Rig:
    def __init__(self) -> None:
        self.log = InMemoryLog()
        for t in Topic:
            self.log.create_topic(topic_name(t, PREFIX), PARTITIONS)
        self.clock = VirtualClock(T0)
        self.planner = self.start()

    def start(self) -> Planner:
        """A new planner process on the same log (state rebuilt from it)."""
        config = PlannerConfig("unused:9092", PREFIX, "a", tenant_keys=KEYS, min_interval_s=1)
        broker = VirtualBrokerClock(self.clock)
        reader = InMemoryReader(self.log)
        return Planner(config, self.clock, txn=self.log, reader=reader, broker_clock=broker)

    def restart(self) -> None:
        self.log.unsubscribe()
        self.planner = self.start()

    def name(self, topic: Topic) -> str:
        return topic_name(topic, PREFIX)

    def put(self, d: ev.TriggerDefinition) -> None:
        self.log.produce(
            self.name(Topic.DEFINITIONS), f"{d.tenant}/{d.trigger_id}".encode(), encode(d)
        )

    def send(self, c: ev.Command, partition: int | None = None) -> None:
        key = ev.trigger_key(c.tenant, c.trigger_id).encode()
        self.log.produce(self.name(Topic.COMMANDS), key, encode(c), partition)

    def suspend(self, kind: ev.CommandKind, role: ev.Role = ev.Role.PLATFORM) -> None:
        """A tenant-wide command to every partition (as ``horae tenants`` does)."""
        c = as_platform(command(ev.TENANT_WIDE, kind, self.clock.now(), role))
        for p in range(PARTITIONS):
            self.send(c, p)

    def step(self, advance_s: float = 0.0) -> None:
        self.clock.advance(advance_s)
        self.planner.step()

    def read(self, topic: Topic, kind: type[E]) -> list[E]:
        return [decode(v, kind) for r in self.log.records(self.name(topic)) if (v := r.value())]

    def fires(self) -> list[ev.FireRecord]:
        return self.read(Topic.FIRES, ev.FireRecord)

    def quarantined(self) -> list[str]:
        return [q.cause for q in self.read(Topic.QUARANTINE, ev.Quarantined)]

    def audit(self) -> list[tuple[str, bool, str]]:
        return [
            (a.action, a.allowed, a.detail.get("cause", ""))
            for a in self.read(Topic.AUDIT, ev.AuditEntry)
        ]


def as_platform(c: ev.Command) -> ev.Command:
    """``c`` signed by the platform key (which grants every role)."""
    return signing.sign(replace(c, signature=None), PLATFORM_KEY_ID, PLATFORM_SECRET)


@pytest.fixture
def rig() -> Rig:
    r = Rig()
    r.put(definition("daily", "0 0 1 1 *"))  # never due during a test
    r.step()
    return r


def _manual(rig: Rig, **fields: object) -> ev.Command:
    return command("daily", ev.CommandKind.MANUAL_RUN, rig.clock.now(), ev.Role.AUTHOR, **fields)


def test_a_replayed_manual_run_fires_once_and_is_quarantined_and_audited(rig: Rig) -> None:
    c = _manual(rig)
    rig.send(c)
    rig.step()
    rig.send(c)
    rig.step(1.0)
    assert len(rig.fires()) == 1
    assert rig.quarantined() == ["replayed"]
    assert ("manual_run.request", False, "replayed") in rig.audit()
    assert ("manual_run.request", True, "") in rig.audit()


def test_the_applied_command_survives_a_restart(rig: Rig) -> None:
    c = _manual(rig)
    rig.send(c)
    rig.step()
    rig.restart()
    rig.step(1.0)  # rebuilt from the planner state
    rig.send(c)
    rig.step(1.0)
    assert len(rig.fires()) == 1 and rig.quarantined() == ["replayed"]


def test_expiry_missing_past_or_too_far_is_refused_with_its_cause(rig: Rig) -> None:
    now = rig.clock.now()
    rig.send(_manual(rig, expires_at=None))
    rig.send(_manual(rig, command_id="old", expires_at=datetime.fromtimestamp(now - 1, UTC)))
    rig.send(_manual(rig, command_id="far", expires_at=datetime.fromtimestamp(now + 7200, UTC)))
    rig.step()
    assert rig.fires() == []
    assert rig.quarantined() == ["no-expiry", "expired", "expiry-too-far"]
    assert [cause for _, allowed, cause in rig.audit() if not allowed] == rig.quarantined()


def test_applied_ids_are_forgotten_once_expired(rig: Rig) -> None:
    """A manual run is remembered until its command expires or its instant leaves the
    requested-time window (an hour), whichever is later."""
    c = _manual(rig)
    rig.send(c)
    rig.step()
    rig.step(601.0)  # its command expired; its instant is still in the window: kept
    rig.step(3000.0)
    state = rig.read(Topic.PLANNER_STATE, ev.PlannerState)
    assert state[-1].applied_commands and state[-1].applied_commands[0].command_id == c.command_id
    rig.send(_manual(rig, command_id="later"))
    rig.step()
    last = rig.read(Topic.PLANNER_STATE, ev.PlannerState)[-1]
    assert [a.command_id for a in last.applied_commands] == ["later"]
    rig.send(c)  # its own expiry has passed too: refused as expired, not fired
    rig.step()
    assert rig.quarantined() == ["expired"] and len(rig.fires()) == 2


def test_two_manual_runs_in_one_second_get_distinct_fire_keys(rig: Rig) -> None:
    rig.send(_manual(rig, command_id="one"))
    rig.send(_manual(rig, command_id="two"))
    rig.step()
    fires = rig.fires()
    assert sorted(f.sequence for f in fires) == [0, 1]
    assert len({f.fire_key for f in fires}) == 2


def test_a_replayed_backfill_does_nothing(rig: Rig) -> None:
    rig.put(definition("minutely", "* * * * *", version=1))
    rig.step()
    now = rig.clock.now()
    c = as_platform(
        command(
            "minutely",
            ev.CommandKind.BACKFILL,
            now,
            ev.Role.POLICY,
            backfill_from=datetime.fromtimestamp(now - 300, UTC),
            backfill_to=datetime.fromtimestamp(now - 60, UTC),
        )
    )
    rig.send(c)
    rig.step()
    first = [f for f in rig.fires() if f.origin is ev.Origin.BACKFILL]
    assert len(first) == 4
    rig.send(c)
    rig.step()
    assert [f for f in rig.fires() if f.origin is ev.Origin.BACKFILL] == first
    assert rig.quarantined() == ["replayed"]


def test_a_suspended_tenant_records_each_instant_and_resumes_on_lift(rig: Rig) -> None:
    rig.put(definition("tick", "* * * * * *"))
    rig.step()
    rig.step(1.0)
    assert [f.state for f in rig.fires()] == [ev.FireState.FIRED]
    rig.suspend(ev.CommandKind.PAUSE)
    rig.step()
    for _ in range(3):
        rig.step(1.0)
    suspended = [f for f in rig.fires() if f.cause == "tenant suspended"]
    assert len(suspended) == 3 and all(f.lane is None for f in suspended)
    assert {f.state for f in suspended} == {ev.FireState.PAUSED}
    rig.send(_manual(rig))  # refused while suspended
    rig.step()
    assert rig.quarantined() == ["suspended"]
    rig.restart()  # the suspension is in the planner state
    rig.step(1.0)
    assert rig.fires()[-1].cause == "tenant suspended"
    rig.suspend(ev.CommandKind.RESUME)
    rig.step()
    rig.step(1.0)
    assert rig.fires()[-1].state is ev.FireState.FIRED
    assert [a for a in rig.audit() if a[0].startswith("tenant.")] == (
        [("tenant.suspend", True, "")] * PARTITIONS + [("tenant.resume", True, "")] * PARTITIONS
    )


def test_suspension_needs_the_platform_role(rig: Rig) -> None:
    rig.put(definition("tick", "* * * * * *"))
    rig.step()
    now = rig.clock.now()
    for role in (ev.Role.PLATFORM, ev.Role.AUTHOR):  # signed by the tenant's own key
        c = command(ev.TENANT_WIDE, ev.CommandKind.PAUSE, now, role, command_id=f"s-{role}")
        for p in range(PARTITIONS):
            rig.send(c, p)
    rig.suspend(ev.CommandKind.PAUSE, ev.Role.AUTHOR)  # the platform key, declaring author
    rig.step()
    rig.step(1.0)
    assert rig.quarantined() == ["forbidden"] * PARTITIONS * 3
    assert all(f.state is ev.FireState.FIRED for f in rig.fires())
    assert ("tenant.suspend", False, "forbidden") in rig.audit()


def test_a_tenant_wide_command_must_be_signed_by_its_tenant(rig: Rig) -> None:
    c = command(ev.TENANT_WIDE, ev.CommandKind.PAUSE, rig.clock.now(), ev.Role.PLATFORM)
    forged = signing.sign(replace(c, signature=None, tenant=TENANT), KEY_ID, SECRET + b"x")
    rig.send(forged, 0)
    rig.step()
    assert rig.quarantined() == ["signature"]
