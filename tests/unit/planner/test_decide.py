"""The planner's decisions on a virtual clock (no Kafka): versions, pause/resume, delete."""

from __future__ import annotations

from dataclasses import replace

from horae.contracts import events as ev
from horae.ports import Emit
from horae.streams.planner.decide import Decider
from horae.streams.planner.index import DueIndex, TriggerEntry, make_index
from tests.unit.planner.builders import definition

T0 = 1_800_000_000 - 1_800_000_000 % 3600  # an hour boundary
KEY = "acme/hourly"


def _fires(outputs: list[Emit]) -> list[ev.FireRecord]:
    return [o.event for o in outputs if isinstance(o.event, ev.FireRecord)]


def _events(outputs: list[Emit]) -> list[str]:
    return [o.event.type for o in outputs if isinstance(o.event, ev.ScheduleEvent)]


def _setup(expr: str = "0 * * * *") -> tuple[Decider, DueIndex, ev.TriggerDefinition]:
    decider, index = Decider(), make_index(0)
    d = definition("hourly", expr)
    decider.apply_definition(index, KEY, None, d, T0 + 10)
    return decider, index, d


def _tick(decider: Decider, index: DueIndex, now: float) -> list[Emit]:
    out = decider.decide_due(index, now, now, 1000)
    index.settle()  # as the planner does after each iteration
    return out


def test_each_hour_fires_once_on_time_and_the_version_is_recorded() -> None:
    decider, index, _ = _setup()
    fired = []
    for hour in range(1, 6):
        now = T0 + hour * 3600 + 0.2
        fired += _fires(_tick(decider, index, now))
        assert _fires(_tick(decider, index, now + 1)) == []  # nothing twice
    assert [int(f.scheduled_at.timestamp()) for f in fired] == [T0 + h * 3600 for h in range(1, 6)]
    assert {f.lane for f in fired} == {ev.Lane.ON_TIME} and {f.trigger_version for f in fired} == {
        1
    }


def test_amendment_takes_effect_for_later_instants() -> None:
    decider, index, d = _setup()
    _tick(decider, index, T0 + 3600.1)
    v2 = replace(d, version=2, recurrence=replace(d.recurrence, expr="30 * * * *"))
    decider.apply_definition(index, KEY, _held(index), v2, T0 + 3700)
    fires = _fires(_tick(decider, index, T0 + 5400.1)) + _fires(_tick(decider, index, T0 + 9000.1))
    assert [(int(f.scheduled_at.timestamp()), f.trigger_version, f.state) for f in fires] == [
        (T0 + 5400, 2, ev.FireState.FIRED),
        (T0 + 9000, 2, ev.FireState.FIRED),
    ]


def test_pause_is_one_record_and_resume_applies_the_misfire_policy() -> None:
    decider, index, d = _setup()
    paused = replace(d, version=2, state=ev.DefinitionState.PAUSED)
    out = decider.apply_definition(index, KEY, _held(index), paused, T0 + 100)
    assert _events(out) == ["schedule.paused"]
    silent = [_tick(decider, index, T0 + h * 3600 + 1) for h in range(1, 10)]
    assert all(o == [] for o in silent), "nothing decided while paused"
    live = replace(d, version=3, state=ev.DefinitionState.LIVE)
    out = decider.apply_definition(index, KEY, _held(index), live, T0 + 9 * 3600 + 600)
    fires = [f for f in _fires(out) if f.state is ev.FireState.FIRED]
    assert [int(f.scheduled_at.timestamp()) for f in fires] == [T0 + 9 * 3600]  # fire_once
    assert fires[0].lane is ev.Lane.CATCH_UP
    events = _events(out)
    assert events[0] == "schedule.resumed" and "schedule.skipped" in events
    assert len(out) < 10, "one summary, not a record per missed instant"


def test_deleted_then_recreated_starts_afresh() -> None:
    decider, index, d = _setup()
    gone = replace(d, version=2, state=ev.DefinitionState.DELETED)
    decider.apply_definition(index, KEY, _held(index), gone, T0 + 100)
    assert _tick(decider, index, T0 + 5 * 3600 + 1) == []
    again = replace(d, version=3)
    out = decider.apply_definition(index, KEY, _held(index), again, T0 + 5 * 3600 + 10)
    assert _fires(out) == [], "no late fire for the time it did not exist"
    fires = _fires(_tick(decider, index, T0 + 6 * 3600 + 1))
    assert [int(f.scheduled_at.timestamp()) for f in fires] == [T0 + 6 * 3600]


def test_index_copies_equal_the_definition_without_signature_and_share_value_objects() -> None:
    one = replace(
        definition("a", "0 * * * *"), signature=ev.Signature(key_id="k", value="00"), labels={}
    )
    two = replace(one, trigger_id="b", recurrence=replace(one.recurrence))
    index_copy = Decider().shared.index_copy
    held_one, held_two = index_copy(one), index_copy(two)
    assert held_one == replace(one, signature=None)
    assert held_two == replace(two, signature=None)
    assert held_one.recurrence is held_two.recurrence  # equal, so held once
    assert held_one.policies is held_two.policies
    assert index_copy(held_one) == held_one


def _held(index: DueIndex) -> TriggerEntry:
    entry = index.get(KEY)
    assert entry is not None
    return entry
