"""Overlap applied by the planner (on the in-memory log and a virtual clock): it learns that a
fire ended from the outcomes topic (the trigger's partition, read in its transactional loop), or
from the fire's deadline passing; ``skip`` records ``skipped: overlap``, ``buffer_one`` holds one
fire and releases it, ``replace`` records ``replaced`` and writes a cancel marker; the state
survives a restart."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from horae.contracts import events as ev
from horae.contracts.codec import encode
from horae.contracts.topics import Topic, events_topic
from horae.domain.keys import canonical_text, short_hash_of
from horae.domain.overlap import CAUSE_BUFFER_FULL, CAUSE_BUFFERED, CAUSE_OVERLAP, CAUSE_REPLACED
from tests.unit.planner.builders import TENANT, definition
from tests.unit.planner.rig import T0, Rig

MINUTE = 60
ATTEMPT_S = 30.0  # the planner's default overlap_attempt_s
ID = "job"


def _trigger(rig: Rig, overlap: ev.Overlap) -> None:
    rig.put(definition(ID, "* * * * *", policies=ev.Policies(overlap=overlap)))
    rig.step()  # accepted at T0: the first instant is T0 + 60


def _key(instant: float) -> str:
    return canonical_text(TENANT, ID, int(instant), 0, ev.Origin.SCHEDULED)


def _at(instant: float) -> datetime:
    return datetime.fromtimestamp(instant, UTC)


def _outcome(rig: Rig, instant: float, state: ev.OutcomeState = ev.OutcomeState.SUCCEEDED) -> None:
    """The dispatcher's outcome of the fire of ``instant``, on the trigger's partition."""
    key = _key(instant)
    partition = next(r.partition() for r in rig.log.records(rig.name(Topic.FIRES)))
    outcome = ev.WorkOutcome(
        fire_key=key,
        key_hash=short_hash_of(key),
        tenant=TENANT,
        trigger_id=ID,
        state=state,
        attempts=1,
        decided_at=_at(rig.clock.now()),
    )
    rig.log.produce(rig.name(Topic.OUTCOMES), key.encode(), encode(outcome), partition)


def _fires(rig: Rig) -> list[tuple[datetime, ev.FireState, str | None]]:
    return [(f.scheduled_at, f.state, f.cause) for f in rig.fires()]


def _orders(rig: Rig) -> list[ev.DispatchOrder]:
    return rig.read(Topic.LANE_ON_TIME, ev.DispatchOrder)


def _state(rig: Rig) -> ev.PlannerState:
    return rig.read(Topic.PLANNER_STATE, ev.PlannerState)[-1]


def test_skip_records_the_instant_skipped_while_the_previous_fire_runs(rig: Rig) -> None:
    _trigger(rig, ev.Overlap.SKIP)
    rig.step(MINUTE)  # T0+60 fires
    state = _state(rig)
    assert state.running_fire_key == _key(T0 + 60)
    assert state.running_until == _at(T0 + 120 + ATTEMPT_S)  # its deadline + one attempt
    assert state.running_lane is ev.Lane.ON_TIME
    rig.step(MINUTE)  # T0+120: the fire of T0+60 has no outcome yet
    assert _fires(rig)[-1] == (_at(T0 + 120), ev.FireState.SKIPPED, CAUSE_OVERLAP)
    assert [o.fire.fire_key for o in _orders(rig)] == [_key(T0 + 60)], "no order for a skip"
    skipped = rig.read(Topic.SCHEDULE_EVENTS, ev.ScheduleEvent)[-1]
    assert (skipped.type, skipped.fire_key, skipped.cause) == (
        ev.ScheduleEventType.SKIPPED.value,
        _key(T0 + 120),
        CAUSE_OVERLAP,
    )
    assert rig.fires()[-1].cause_detail == f"fire {_key(T0 + 60)} still running"
    _outcome(rig, T0 + 60)
    rig.step(1)  # the outcome is read in the planner's loop
    assert _state(rig).running_fire_key is None
    rig.step(MINUTE - 1)  # T0+180
    assert _fires(rig)[-1] == (_at(T0 + 180), ev.FireState.FIRED, None)
    assert _state(rig).running_fire_key == _key(T0 + 180)


def test_an_outcome_of_another_fire_changes_nothing(rig: Rig) -> None:
    _trigger(rig, ev.Overlap.SKIP)
    rig.step(MINUTE)
    _outcome(rig, T0 + 3600)  # not the running fire
    rig.step(MINUTE)
    assert _fires(rig)[-1] == (_at(T0 + 120), ev.FireState.SKIPPED, CAUSE_OVERLAP)


def test_a_fire_that_never_reports_an_end_stops_blocking_at_its_deadline(rig: Rig) -> None:
    _trigger(rig, ev.Overlap.SKIP)
    rig.step(MINUTE)  # T0+60 fires, and never reports
    rig.step(MINUTE)  # T0+120 skipped: T0+60 runs until T0+150
    rig.step(MINUTE)  # T0+180: past it
    assert [s for _, s, _ in _fires(rig)] == [
        ev.FireState.FIRED,
        ev.FireState.SKIPPED,
        ev.FireState.FIRED,
    ]
    assert _state(rig).running_fire_key == _key(T0 + 180)


def test_buffer_one_holds_one_and_releases_it_when_the_running_fire_ends(rig: Rig) -> None:
    _trigger(rig, ev.Overlap.BUFFER_ONE)
    rig.planner.decider.overlap_attempt_s = 600.0  # a long attempt: only the outcome ends it
    rig.step(MINUTE)  # T0+60 runs
    rig.step(MINUTE)  # T0+120 buffered: nothing on the ledger, nothing ordered
    assert len(rig.fires()) == 1
    state = _state(rig)
    assert (state.buffered_fire_key, state.buffered_lane) == (_key(T0 + 120), ev.Lane.ON_TIME)
    rig.step(MINUTE)  # T0+180: the buffer is full
    assert _fires(rig)[-1] == (_at(T0 + 180), ev.FireState.SKIPPED, CAUSE_BUFFER_FULL)
    rig.restart()  # the running and the buffered fire come back from the state
    rig.step()
    _outcome(rig, T0 + 60)
    rig.step(5)
    released = rig.fires()[-1]
    assert (released.scheduled_at, released.state, released.cause) == (
        _at(T0 + 120),
        ev.FireState.FIRED,
        CAUSE_BUFFERED,
    )
    assert released.decided_at == _at(T0 + 185)
    assert f"held until {_key(T0 + 60)} ended: its outcome was read" == released.cause_detail
    assert [o.fire.fire_key for o in _orders(rig)] == [_key(T0 + 60), _key(T0 + 120)]
    state = _state(rig)
    assert (state.running_fire_key, state.buffered_fire_key) == (_key(T0 + 120), None)


def test_a_buffered_fire_is_released_when_the_running_fire_deadline_passes(rig: Rig) -> None:
    _trigger(rig, ev.Overlap.BUFFER_ONE)
    rig.step(MINUTE)  # T0+60 runs until T0+150 at most
    rig.step(MINUTE)  # T0+120 buffered
    rig.restart()
    rig.step()
    due = [i.earliest_due() for i in rig.planner.indexes.values() if i.earliest_due()]
    assert due == [T0 + 120 + ATTEMPT_S], "the release is due at the running fire's deadline"
    rig.step(T0 + 150 - rig.clock.now())
    released = rig.fires()[-1]
    assert (released.scheduled_at, released.state, released.decided_at) == (
        _at(T0 + 120),
        ev.FireState.FIRED,
        _at(T0 + 150),
    )
    assert "its deadline" in (released.cause_detail or "")
    assert _state(rig).running_fire_key == _key(T0 + 120)
    assert len(_orders(rig)) == 2


def test_replace_starts_the_new_fire_and_cancels_the_running_one(rig: Rig) -> None:
    _trigger(rig, ev.Overlap.REPLACE)
    rig.step(MINUTE)
    rig.step(MINUTE)  # T0+120 replaces T0+60
    replaced = [f for f in rig.fires() if f.state is ev.FireState.REPLACED]
    assert [(f.fire_key, f.cause) for f in replaced] == [(_key(T0 + 60), CAUSE_REPLACED)]
    assert replaced[0].cause_detail == f"replaced by {_key(T0 + 120)}"
    lane = rig.log.records(rig.name(Topic.LANE_ON_TIME))
    orders = rig.read(Topic.LANE_ON_TIME, ev.DispatchOrder)
    assert [(o.fire.fire_key, o.cancel) for o in orders] == [
        (_key(T0 + 60), None),
        (_key(T0 + 60), CAUSE_REPLACED),  # the marker, after the order, same partition
        (_key(T0 + 120), None),
    ]
    assert len({r.partition() for r in lane}) == 1
    event = rig.read(Topic.SCHEDULE_EVENTS, ev.ScheduleEvent)[-1]
    assert (event.type, event.fire_key) == (ev.ScheduleEventType.REPLACED.value, _key(T0 + 60))
    assert _state(rig).running_fire_key == _key(T0 + 120)
    _outcome(rig, T0 + 60, ev.OutcomeState.CANCELLED)  # the replaced fire's end: not running
    rig.step(1)
    assert _state(rig).running_fire_key == _key(T0 + 120)


def test_a_restart_keeps_the_running_fire(rig: Rig) -> None:
    _trigger(rig, ev.Overlap.SKIP)
    rig.step(MINUTE)
    rig.restart()
    rig.step()
    rig.step(MINUTE)  # T0+120
    assert _fires(rig)[-1] == (_at(T0 + 120), ev.FireState.SKIPPED, CAUSE_OVERLAP)
    _outcome(rig, T0 + 60)
    rig.restart()  # the outcome is read after the rebuild
    rig.step()
    rig.step(MINUTE)  # T0+180
    assert _fires(rig)[-1] == (_at(T0 + 180), ev.FireState.FIRED, None)


@pytest.mark.parametrize("overlap", [ev.Overlap.ALLOW, ev.Overlap.SKIP])
def test_allow_and_event_targets_track_nothing(rig: Rig, overlap: ev.Overlap) -> None:
    target = ev.Target(kind=ev.TargetKind.EVENT, topic=events_topic(TENANT))
    policies = ev.Policies(overlap=overlap)
    rig.put(definition("events", "* * * * *", policies=policies, target=target))
    rig.put(definition(ID, "* * * * *"))  # allow
    rig.step()
    rig.step(MINUTE)
    rig.step(MINUTE)
    assert all(f.state is ev.FireState.FIRED for f in rig.fires())
    assert len(rig.fires()) == 4
    assert all(s.running_fire_key is None for s in rig.read(Topic.PLANNER_STATE, ev.PlannerState))
    assert not any(i.flights for i in rig.planner.indexes.values())


def test_outcomes_that_change_nothing_are_committed_within_a_tick(rig: Rig) -> None:
    _trigger(rig, ev.Overlap.ALLOW)
    rig.step(MINUTE)  # T0+60 fires; nothing is tracked
    rig.step()  # commits the snapshot owed, with snapshots on
    commits = rig.log.commits
    _outcome(rig, T0 + 60)
    topic = rig.name(Topic.OUTCOMES)
    partition = next(r.partition() for r in rig.log.records(topic))
    rig.step(0.5)  # read: a miss, no transaction for it alone
    assert rig.log.commits == commits
    assert rig.log.committed.get((topic, partition), 0) == 0
    rig.step(1.0)  # a tick later its position is committed
    assert rig.log.commits == commits + 1
    assert rig.log.committed[(topic, partition)] == 1
    assert len(rig.fires()) == 1


def test_replace_after_buffer_one_replaces_the_running_and_the_held_fire(rig: Rig) -> None:
    _trigger(rig, ev.Overlap.BUFFER_ONE)
    rig.planner.decider.overlap_attempt_s = 600.0
    rig.step(MINUTE)  # T0+60 runs
    rig.step(MINUTE)  # T0+120 held
    policies = ev.Policies(overlap=ev.Overlap.REPLACE)
    rig.put(definition(ID, "* * * * *", version=2, policies=policies))
    rig.step(1)  # applied at T0+121: the fires in flight stay
    assert (_state(rig).running_fire_key, _state(rig).buffered_fire_key) == (
        _key(T0 + 60),
        _key(T0 + 120),
    )
    rig.step(MINUTE - 1)  # T0+180 replaces both
    replaced = [f for f in rig.fires() if f.state is ev.FireState.REPLACED]
    assert sorted(f.fire_key for f in replaced) == [_key(T0 + 60), _key(T0 + 120)]
    markers = [o.fire.fire_key for o in _orders(rig) if o.cancel]
    assert markers == [_key(T0 + 60)], "the held fire was never ordered: no marker"
    assert [o.fire.fire_key for o in _orders(rig) if not o.cancel] == [
        _key(T0 + 60),
        _key(T0 + 180),
    ]
    state = _state(rig)
    assert (state.running_fire_key, state.buffered_fire_key) == (_key(T0 + 180), None)
