"""A tenant's cancel of one fire (``Command.cancel_fire_key``): the planner checks the key is a
decided fire of the command's own trigger, audits ``fire.cancel`` with the actor and writes a
cancel marker on every lane partition of the fire — on the in-memory log and a virtual clock;
no Kafka. What the dispatcher does with the markers: tests/unit/dispatcher/test_cancel.py."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from horae.contracts import events as ev
from horae.contracts.grants import Act, command_act
from horae.contracts.topics import Topic, events_topic, lane_topic
from horae.domain.cancel import CAUSE_BY, stops_retries
from horae.domain.keys import FireKey, Origin
from horae.domain.overlap import CAUSE_REPLACED
from tests.unit.planner.builders import command, definition
from tests.unit.planner.test_commands import PARTITIONS, PREFIX, Rig, as_platform


@pytest.fixture
def rig() -> Rig:
    r = Rig()
    r.put(definition("secondly"))  # every second
    r.put(definition("other"))
    r.step()
    r.step(3.0)
    return r


def fired_key(rig: Rig, trigger_id: str = "secondly") -> str:
    fired = [
        f.fire_key
        for f in rig.fires()
        if f.trigger_id == trigger_id and f.state is ev.FireState.FIRED
    ]
    assert fired, "the trigger fired"
    return fired[0]


def cancel(
    rig: Rig,
    fire_key: str,
    trigger_id: str = "secondly",
    kind: ev.CommandKind = ev.CommandKind.PAUSE,
    reason: str | None = None,
) -> ev.Command:
    c = command(trigger_id, kind, rig.clock.now(), cancel_fire_key=fire_key, reason=reason)
    rig.send(c)
    rig.step()
    return c


def markers(rig: Rig) -> list[ev.DispatchOrder]:
    return [
        o
        for lane in ev.Lane
        for o in rig.read(lane_topic(lane), ev.DispatchOrder)
        if o.cancel is not None
    ]


def test_a_cancel_marks_every_lane_of_its_fire_and_is_audited_with_the_actor(rig: Rig) -> None:
    key = fired_key(rig)
    cancel(rig, key, reason="deploy in progress")
    found = markers(rig)
    assert sorted(m.lane for m in found) == sorted(ev.Lane), "one marker on each lane"
    assert {m.fire.fire_key for m in found} == {key}
    assert {m.cancel for m in found} == {f"{CAUSE_BY}tester: deploy in progress"}
    partitions = {
        r.partition()
        for lane in ev.Lane
        for r in rig.log.records(rig.name(lane_topic(lane)))
        if r.key() == key.encode()
    }
    assert len(partitions) == 1, "the markers are on the fire's own partition, after its order"
    entries = [a for a in rig.read(Topic.AUDIT, ev.AuditEntry) if a.action == "fire.cancel"]
    assert [(a.allowed, a.detail["fire_key"], a.detail["requested_by"]) for a in entries] == [
        (True, key, "tester")
    ]
    before = len([f for f in rig.fires() if f.trigger_id == "secondly"])
    rig.step(2.0)
    after = len([f for f in rig.fires() if f.trigger_id == "secondly"])
    assert after > before, "a cancel never pauses the trigger: it goes on firing"


def test_a_replayed_cancel_is_refused(rig: Rig) -> None:
    c = cancel(rig, fired_key(rig))
    rig.send(c)
    rig.step()
    assert rig.quarantined() == ["replayed"]
    assert ("fire.cancel", False, "replayed") in rig.audit()
    assert len(markers(rig)) == len(ev.Lane)


def test_a_cancel_of_another_trigger_or_tenant_s_fire_is_refused(rig: Rig) -> None:
    other = fired_key(rig, "other")
    scheduled = FireKey.parse(other).scheduled
    foreign = FireKey("globex", "secondly", scheduled).canonical()
    cancel(rig, other)  # acme's other trigger, through a command naming "secondly"
    cancel(rig, foreign)  # another tenant's fire, signed by acme's key for acme's trigger
    assert rig.quarantined() == ["invalid", "invalid"]
    assert rig.audit().count(("fire.cancel", False, "invalid")) == 2
    details = [q.detail for q in rig.read(Topic.QUARANTINE, ev.Quarantined)]
    assert all("is not a fire of trigger acme/secondly" in d for d in details), details
    assert markers(rig) == []


def test_a_cancel_the_planner_cannot_apply_says_why(rig: Rig) -> None:
    key = fired_key(rig)
    ahead = FireKey("acme", "secondly", int(rig.clock.now()) + 3600).canonical()
    manual = FireKey("acme", "secondly", int(rig.clock.now()), 0, Origin.MANUAL).canonical()
    cancel(rig, ahead)  # not decided yet
    cancel(rig, key.replace("/0/", "/00/"))  # not the canonical text of any key
    cancel(rig, "v1/acme/secondly/yesterday/0/scheduled")
    cancel(rig, key, kind=ev.CommandKind.MANUAL_RUN)  # a cancel travels as pause
    tenant_wide = as_platform(
        command(ev.TENANT_WIDE, ev.CommandKind.PAUSE, rig.clock.now(), cancel_fire_key=key)
    )
    rig.send(tenant_wide)
    rig.step()
    details = [q.detail for q in rig.read(Topic.QUARANTINE, ev.Quarantined)]
    assert rig.quarantined() == ["invalid"] * 5, details
    assert "is not decided yet" in details[0]
    assert "is not canonical" in details[1]
    assert details[2].startswith("cancel_fire_key:")
    assert "travels as kind 'pause'" in details[3]
    assert "not a tenant" in details[4]
    assert markers(rig) == []
    cancel(rig, manual)  # a manual run's key is not checked against the schedule: applied
    assert {m.fire.fire_key for m in markers(rig)} == {manual}


def test_an_event_target_s_fire_has_nothing_to_cancel(rig: Rig) -> None:
    target = ev.Target(kind=ev.TargetKind.EVENT, topic="events.acme")
    rig.log.create_topic(events_topic("acme", PREFIX), PARTITIONS)  # where its events go
    rig.put(definition("evented", target=target))
    rig.step()
    rig.step(2.0)
    cancel(rig, fired_key(rig, "evented"), "evented")
    details = [q.detail for q in rig.read(Topic.QUARANTINE, ev.Quarantined)]
    assert rig.quarantined() == ["invalid"] and "event target" in details[0]


def test_a_cancel_is_its_own_act_and_only_it_stops_retries() -> None:
    at = datetime(2026, 6, 1, tzinfo=UTC).timestamp()
    c = command("secondly", ev.CommandKind.PAUSE, at, cancel_fire_key="v1/acme/x/y/0/scheduled")
    assert command_act(c) is Act.FIRE_CANCEL
    assert command_act(command("secondly", ev.CommandKind.PAUSE, at)) is Act.PAUSE
    assert stops_retries(f"{CAUSE_BY}alice") and not stops_retries(CAUSE_REPLACED)
