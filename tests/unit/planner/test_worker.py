"""The planner process on the in-memory log and a virtual clock: ingest, stale versions, commands,
backfill ceilings, the clock gate and aborted transactions — each in milliseconds, no Kafka."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from horae.contracts import events as ev
from horae.contracts import signing
from horae.contracts.topics import Topic
from tests.unit.planner.builders import KEY_ID, command, definition
from tests.unit.planner.rig import T0, Rig


def _instants(fires: list[ev.FireRecord]) -> list[int]:
    return sorted(int(f.scheduled_at.timestamp()) for f in fires)


def test_a_valid_definition_is_accepted_and_fires_each_second_once(rig: Rig) -> None:
    rig.put(definition("tick"))
    rig.step()
    assert [d.trigger_id for d in rig.read(Topic.ACCEPTED, ev.TriggerDefinition)] == ["tick"]
    assert rig.quarantined() == []
    for _ in range(3):
        rig.step(1.0)
    assert _instants(rig.fires()) == [int(T0) + 1, int(T0) + 2, int(T0) + 3]
    orders = rig.read(Topic.LANE_ON_TIME, ev.DispatchOrder)
    assert sorted(o.fire.fire_key for o in orders) == sorted(f.fire_key for f in rig.fires())
    assert rig.log.committed, "the input offsets commit with the records"
    definitions = rig.name(Topic.DEFINITIONS)
    assert sum(o for (t, _), o in rig.log.committed.items() if t == definitions) == 1


def test_a_badly_signed_definition_is_quarantined_and_changes_nothing(rig: Rig) -> None:
    forged = signing.sign(replace(definition("tick"), signature=None), KEY_ID, b"wrong")
    rig.put(forged)
    rig.step()
    rig.step(2.0)
    assert rig.quarantined() == ["signature"]
    assert rig.read(Topic.ACCEPTED, ev.TriggerDefinition) == [] and rig.fires() == []


def test_an_invalid_definition_is_quarantined_with_its_cause(rig: Rig) -> None:
    rig.put(definition("bad", expr="not a cron"))
    rig.put(definition("often", expr="* * * * * *", version=1))  # valid: min_interval_s=1
    rig.step()
    assert rig.quarantined() == ["invalid"]
    assert [d.trigger_id for d in rig.read(Topic.ACCEPTED, ev.TriggerDefinition)] == ["often"]


def test_a_stale_version_is_quarantined_and_the_newer_one_stays(rig: Rig) -> None:
    rig.put(definition("tick", version=2))
    rig.step()
    rig.put(definition("tick", expr="0 * * * *", version=1))
    rig.step()
    assert rig.quarantined() == ["stale-version"]
    rig.step(1.0)
    assert {f.trigger_version for f in rig.fires()} == {2}


def test_pause_resume_and_delete(rig: Rig) -> None:
    rig.put(definition("tick"))
    rig.step()
    rig.step(1.0)
    rig.send(command("tick", ev.CommandKind.PAUSE, rig.clock.now()))
    rig.step()
    paused_at = len(rig.fires())
    rig.step(1.0)
    rig.step(1.0)
    assert len(rig.fires()) == paused_at, "nothing decided while paused"
    rig.send(command("tick", ev.CommandKind.RESUME, rig.clock.now()))
    rig.step()
    assert rig.events() == [ev.ScheduleEventType.PAUSED.value, ev.ScheduleEventType.RESUMED.value]
    rig.put(definition("tick", version=2, state=ev.DefinitionState.DELETED))
    rig.step()
    deleted_at = len(rig.fires())
    rig.step(1.0)
    rig.step(1.0)
    assert len(rig.fires()) == deleted_at, "nothing decided once deleted"
    rig.send(command("tick", ev.CommandKind.PAUSE, rig.clock.now()))
    rig.step()
    assert rig.quarantined() == ["unknown-trigger"]


def test_an_unsigned_command_is_quarantined(rig: Rig) -> None:
    rig.put(definition("tick"))
    rig.step()
    rig.send(replace(command("tick", ev.CommandKind.PAUSE, T0), signature=None))
    rig.step()
    assert rig.quarantined() == ["unsigned"] and rig.events() == []


def test_a_manual_run_fires_once_on_the_manual_lane(rig: Rig) -> None:
    rig.put(definition("hourly", expr="0 * * * *"))
    rig.step()
    rig.send(command("hourly", ev.CommandKind.MANUAL_RUN, T0 + 30))
    rig.step(0.5)
    (fire,) = rig.fires()
    assert fire.origin is ev.Origin.MANUAL and fire.lane is ev.Lane.MANUAL
    assert int(fire.scheduled_at.timestamp()) == int(T0) + 30
    (order,) = rig.read(Topic.LANE_MANUAL, ev.DispatchOrder)
    assert order.fire.fire_key == fire.fire_key


def _backfill(rig: Rig, trigger: str, start: float, end: float, role: ev.Role) -> None:
    window = {
        "backfill_from": datetime.fromtimestamp(start, UTC),
        "backfill_to": datetime.fromtimestamp(end, UTC),
    }
    rig.send(command(trigger, ev.CommandKind.BACKFILL, rig.clock.now(), role, **window))
    rig.step()


def test_backfill_within_the_ceiling_fires_every_instant_over_it_is_refused(rig: Rig) -> None:
    rig.put(definition("m", expr="* * * * *", quotas=ev.Quotas(backfill_max_fires=3)))
    rig.step()
    _backfill(rig, "m", T0 - 300, T0 - 120, ev.Role.POLICY)  # 3 minutes: at the ceiling
    assert _instants(rig.fires()) == [int(T0) - 300, int(T0) - 240, int(T0) - 180]
    assert {f.lane for f in rig.fires()} == {ev.Lane.BACKFILL}
    _backfill(rig, "m", T0 - 600, T0 - 300, ev.Role.POLICY)  # 5 minutes: over it
    _backfill(rig, "m", T0 - 600, T0 - 540, ev.Role.AUTHOR)  # no policy grant
    assert len(rig.fires()) == 3
    assert rig.events() == [ev.ScheduleEventType.REJECTED.value] * 2
    audit = rig.read(Topic.AUDIT, ev.AuditEntry)
    assert [a.allowed for a in audit] == [True, False, False]
    assert "volume ceiling" in (audit[1].detail or {}).get("cause", "")


def test_a_skewed_clock_closes_the_gate_and_releases_the_partitions(rig: Rig) -> None:
    rig.put(definition("tick"))
    rig.step()
    rig.step(1.0)
    assert rig.planner.indexes
    rig.broker.skew_s = 10.0  # the broker's clock is 10 s ahead: ours is off
    for _ in range(6):  # the next probe (every 5 s) notices
        rig.step(1.0)
    assert not rig.planner.gate.open and rig.planner.indexes == {}
    decided = len(rig.fires())
    for _ in range(6):
        rig.step(1.0)
    assert len(rig.fires()) == decided, "nothing decided on a bad clock"
    rig.broker.skew_s = 0.0
    for _ in range(6):
        rig.step(1.0)
    assert rig.planner.gate.open and len(rig.fires()) > decided


def test_a_broker_that_stops_answering_closes_the_gate_a_stale_reading_is_refreshed(
    rig: Rig,
) -> None:
    gate = rig.planner.gate
    rig.step()
    assert gate.open
    rig.clock.advance(31.0)  # busy elsewhere (a long rebuild): the reading is stale now
    assert not gate.open
    gate.poll()  # the broker answers: refreshed, open again
    assert gate.open
    rig.broker.answering = False
    rig.clock.advance(31.0)
    gate.poll()
    assert not gate.open


def test_an_aborted_transaction_rewinds_and_commits_each_decision_once(rig: Rig) -> None:
    rig.put(definition("tick"))
    rig.step()
    rig.log.fail_next_commit()
    rig.step(1.0)
    assert rig.log.aborts == 1 and rig.fires() == []
    rig.step(1.0)
    rig.step(1.0)
    instants = _instants(rig.fires())
    assert instants == [int(T0) + 1, int(T0) + 2, int(T0) + 3], "no instant lost or doubled"


class _CountingReader:
    def __init__(self, inner: object) -> None:
        self.inner, self.reads = inner, 0

    def read(self, topic: str, partition: int, start: int = 0, stop: int | None = None) -> object:
        self.reads += 1
        return self.inner.read(topic, partition, start, stop)  # type: ignore[attr-defined]


def test_a_partition_given_straight_back_in_a_rebalance_is_not_rebuilt_a_lost_one_is(
    rig: Rig,
) -> None:
    rig.put(definition("tick"))
    rig.step()
    rig.step(1.0)
    reader = _CountingReader(rig.planner.reader)
    rig.planner.reader = reader  # type: ignore[assignment]
    owned = rig.log.assignment()
    rig.planner._on_revoke(owned)  # an eager rebalance: everything revoked, then assigned
    rig.planner._on_assign(owned)
    assert reader.reads == 0
    rig.step(1.0)
    rig.planner._on_lost(owned)  # lost: another member may have decided meanwhile
    rig.planner._on_assign(owned)
    assert reader.reads > 0
    rig.step(1.0)
    assert _instants(rig.fires()) == [int(T0) + 1, int(T0) + 2, int(T0) + 3]


def test_a_command_read_before_its_triggers_definition_waits_for_it(rig: Rig) -> None:
    """Definitions and commands are two topics: a run sent right after its trigger's create can
    be read first. It is tried again a moment later (the commands partition held at it), not
    refused, and fires once the definition is read; a command whose trigger never comes is
    refused ``unknown-trigger`` after its last try, and the partition goes on."""
    rig.send(command("late", ev.CommandKind.MANUAL_RUN, T0))
    rig.step()
    assert rig.quarantined() == [] and rig.fires() == []
    rig.put(definition("late", expr="0 0 * * *"))
    rig.step(0.05)  # the definition read; the command still held
    rig.step(0.1)  # its retry: applied now
    (fire,) = rig.fires()
    assert fire.origin is ev.Origin.MANUAL and fire.trigger_id == "late"
    rig.send(command("never", ev.CommandKind.MANUAL_RUN, rig.clock.now()))
    rig.send(command("late", ev.CommandKind.MANUAL_RUN, rig.clock.now() + 1))
    for _ in range(8):
        rig.step(0.2)
    assert rig.quarantined() == ["unknown-trigger"]
    assert len(rig.fires()) == 2  # the command after the refused one was applied
