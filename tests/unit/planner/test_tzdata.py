"""The tzdata release travels with every planner record, and a planner restarted on another
release recomputes the next instants: ``schedule.recomputed`` where one moved, and the
recomputed instant governs (on the in-memory log and a virtual clock)."""

from __future__ import annotations

import pytest

from horae.contracts import events as ev
from horae.contracts.topics import Topic
from horae.domain.tzdb import tzdata_version
from horae.testing import ShiftedZones
from tests.unit.planner.builders import command, definition
from tests.unit.planner.rig import Rig

HOUR = 3600
SYSTEM = tzdata_version("UTC")


def _states(rig: Rig) -> list[ev.PlannerState]:
    return [s for s in rig.read(Topic.PLANNER_STATE, ev.PlannerState) if s.trigger_id == "h"]


def _events(rig: Rig) -> list[ev.ScheduleEvent]:
    return rig.read(Topic.SCHEDULE_EVENTS, ev.ScheduleEvent)


#: what each overlap policy writes when an instant comes while the fire before it runs
OVERLAP_EVENTS = {
    ev.Overlap.ALLOW: set(),
    ev.Overlap.SKIP: {"schedule.skipped"},
    ev.Overlap.BUFFER_ONE: set(),
    ev.Overlap.REPLACE: {"schedule.replaced"},
}
OVERLAP_STATES = {
    ev.Overlap.ALLOW: {ev.FireState.FIRED},
    ev.Overlap.SKIP: {ev.FireState.FIRED, ev.FireState.SKIPPED},
    ev.Overlap.BUFFER_ONE: {ev.FireState.FIRED},
    ev.Overlap.REPLACE: {ev.FireState.FIRED, ev.FireState.REPLACED},
}


@pytest.mark.parametrize("overlap", list(ev.Overlap))
def test_every_fire_state_and_event_carries_the_release(rig: Rig, overlap: ev.Overlap) -> None:
    """Every overlap policy's path (a fire running when the next instant comes: skipped,
    buffered, replaced), a manual run, a pause and a resume: every fire record, state record and
    event names the release."""
    rig.put(definition("h", "0 * * * *", policies=ev.Policies(overlap=overlap)))
    rig.step()
    rig.step(HOUR + 1)  # the first instant fires; no outcome: it runs on
    rig.step(HOUR)  # the next one while it runs
    rig.step(31)  # past the running fire's deadline + attempt time: a buffered fire is released
    now = rig.clock.now()
    rig.send(command("h", ev.CommandKind.MANUAL_RUN, now))
    rig.send(command("h", ev.CommandKind.PAUSE, now))
    rig.step()
    rig.send(command("h", ev.CommandKind.RESUME, now + 1))
    rig.step(1)
    fires = rig.fires()
    assert {f.state for f in fires} == OVERLAP_STATES[overlap], "each policy's path was taken"
    assert {f.tzdata_version for f in fires} == {SYSTEM}
    assert {f.origin for f in fires} == {ev.Origin.SCHEDULED, ev.Origin.MANUAL}
    states = _states(rig)
    if overlap is not ev.Overlap.ALLOW:
        assert any(s.running_fire_key for s in states), "states with a fire in flight"
    assert {s.tzdata_version for s in states} == {SYSTEM}
    events = _events(rig)
    assert {e.type for e in events} >= {"schedule.paused", "schedule.resumed"}
    assert {e.type for e in events} >= OVERLAP_EVENTS[overlap]
    assert {e.tzdata_version for e in events} == {SYSTEM}


@pytest.mark.parametrize("overlap", [o for o in ev.Overlap if o is not ev.Overlap.ALLOW])
def test_a_restart_on_a_new_release_recomputes_a_trigger_with_a_fire_running(
    rig: Rig, overlap: ev.Overlap
) -> None:
    """A trigger whose fire is running when the planner restarts on a release that moves its
    zone: ``schedule.recomputed`` from the release its state names."""
    rig.put(definition("h", "0 * * * *", policies=ev.Policies(overlap=overlap)))
    rig.step()
    rig.step(HOUR + 1)  # fires, and runs on (no outcome)
    state = _states(rig)[-1]
    assert state.running_fire_key is not None and state.tzdata_version == SYSTEM
    rig.step()
    rig.restart(ShiftedZones("2099z", 1800))
    rig.step()
    recomputed = [e for e in _events(rig) if e.type == ev.ScheduleEventType.RECOMPUTED]
    assert len(recomputed) == 1
    assert recomputed[0].cause is not None and f"tzdata {SYSTEM} -> 2099z" in recomputed[0].cause
    state = _states(rig)[-1]
    assert state.tzdata_version == "2099z" and state.running_fire_key is not None


def test_a_restart_on_a_release_that_moved_the_zone_recomputes_and_the_new_instant_governs(
    rig: Rig,
) -> None:
    rig.put(definition("h", "0 * * * *"))
    rig.step()
    start = rig.clock.now()
    old_next = int(start) // HOUR * HOUR + HOUR
    assert _states(rig)[-1].next_instant is not None
    assert int(_states(rig)[-1].next_instant.timestamp()) == old_next  # type: ignore[union-attr]
    rig.step()  # with snapshots: the one owed is committed, the restart starts from it

    rig.restart(ShiftedZones("2099z", 1800))
    rig.step()
    if rig.snapshot_changes:  # a snapshot of another release: its instants derived again
        assert rig.planner.snapshots is not None and rig.planner.snapshots.loaded == 1
    recomputed = [e for e in _events(rig) if e.type == ev.ScheduleEventType.RECOMPUTED]
    assert len(recomputed) == 1
    assert recomputed[0].tzdata_version == "2099z"
    assert recomputed[0].cause is not None and f"tzdata {SYSTEM} -> 2099z" in recomputed[0].cause
    state = _states(rig)[-1]
    assert state.tzdata_version == "2099z"
    assert state.next_instant is not None
    new_next = old_next - 1800  # every instant half an hour later: the next is half past
    assert int(state.next_instant.timestamp()) == new_next

    rig.step(new_next + 1 - rig.clock.now())
    rig.step(old_next + 60 - rig.clock.now())  # past the old instant: nothing decided there
    fires = rig.fires()
    assert [int(f.scheduled_at.timestamp()) for f in fires] == [new_next]
    assert fires[0].tzdata_version == "2099z" and fires[0].state is ev.FireState.FIRED

    rig.restart(ShiftedZones("2099z", 1800))  # the same release again: nothing to recompute
    rig.step()
    assert len([e for e in _events(rig) if e.type == ev.ScheduleEventType.RECOMPUTED]) == 1


def test_a_new_release_that_moves_nothing_emits_nothing_until_the_next_decision(
    rig: Rig,
) -> None:
    rig.put(definition("h", "0 * * * *"))
    rig.step()
    before = _states(rig)
    rig.restart(ShiftedZones("2099z", 0))
    rig.step()
    assert ev.ScheduleEventType.RECOMPUTED not in rig.events()
    assert _states(rig) == before, "no state rewritten for a trigger that did not move"
    rig.step(HOUR + 1)  # the next decision records the release
    assert _states(rig)[-1].tzdata_version == "2099z"
    assert [f.tzdata_version for f in rig.fires()] == ["2099z"]


def test_a_paused_trigger_is_not_announced_as_recomputed(rig: Rig) -> None:
    rig.put(definition("h", "0 * * * *", state=ev.DefinitionState.PAUSED))
    rig.step()
    before = _states(rig)
    rig.restart(ShiftedZones("2099z", 1800))
    rig.step()
    assert ev.ScheduleEventType.RECOMPUTED not in rig.events()
    assert _states(rig) == before  # no next instant, before or after
