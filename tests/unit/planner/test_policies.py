"""Declared policies take effect in the planner (on the in-memory log and a virtual clock):
jitter judged against the jittered due time, deterministic across a restart; ``start``/``end``
bound the instants and a trigger past its end completes once."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from horae.contracts import events as ev
from horae.contracts import signing
from horae.contracts.topics import Topic
from horae.domain.jitter import jitter_offset
from tests.unit.planner.builders import KEY_ID, SECRET, TENANT, definition
from tests.unit.planner.rig import Rig

HOUR = 3600
JITTER_S = 300


def _run_until(rig: Rig, until: float, late_s: float) -> None:
    """Step the planner as its loop would: wake ``late_s`` after each earliest due time."""
    while True:
        due = [d for i in rig.planner.indexes.values() if (d := i.earliest_due()) is not None]
        if not due or min(due) + late_s > until:
            rig.step(max(0.0, until - rig.clock.now()))
            return
        rig.step(max(0.0, min(due) + late_s - rig.clock.now()))


@pytest.mark.parametrize("misfire", list(ev.Misfire))
def test_jitter_on_an_hourly_trigger_fires_every_instant_on_time_across_a_restart(
    rig: Rig, misfire: ev.Misfire
) -> None:
    policies = ev.Policies(jitter_s=JITTER_S, misfire=misfire)  # grace: the default 60 s
    rig.put(definition("hourly", "0 * * * *", policies=policies))
    rig.step()
    start = rig.clock.now()
    _run_until(rig, start + 24 * HOUR, late_s=30.0)  # each decision 30 s after its due time
    rig.restart()
    rig.step()
    _run_until(rig, start + 48 * HOUR, late_s=30.0)
    fires = rig.fires()
    first = (int(start) // HOUR + 1) * HOUR
    assert sorted(int(f.scheduled_at.timestamp()) for f in fires) == list(
        range(first, int(start) + 48 * HOUR, HOUR)
    )
    assert all(f.state is ev.FireState.FIRED and f.lane is ev.Lane.ON_TIME for f in fires)
    key = ev.trigger_key(TENANT, "hourly")
    for f in fires:
        t = int(f.scheduled_at.timestamp())
        assert f.jitter_ms == jitter_offset(key, t, JITTER_S * 1000, t + HOUR), "deterministic"
        assert f.due_at.timestamp() == t + f.jitter_ms / 1000
        assert f.decided_at.timestamp() >= f.due_at.timestamp(), "never decided before due"
    assert len({f.jitter_ms for f in fires}) > len(fires) // 2, "offsets spread"
    orders = rig.read(Topic.LANE_ON_TIME, ev.DispatchOrder)
    assert sorted(o.not_before for o in orders) == sorted(f.due_at for f in fires)


def test_an_instant_decided_past_its_jittered_due_time_plus_grace_follows_the_misfire_policy(
    rig: Rig,
) -> None:
    policies = ev.Policies(jitter_s=JITTER_S, misfire=ev.Misfire.SKIP, misfire_grace_s=60)
    rig.put(definition("hourly", "0 * * * *", policies=policies))
    rig.step()
    _run_until(rig, rig.clock.now() + 3 * HOUR + 400, late_s=61.0)  # past each due + grace
    fires = rig.fires()
    assert len(fires) == 3
    assert all(f.state is ev.FireState.SKIPPED for f in fires)
    assert {f.cause for f in fires} == {"skipped: misfire policy"}


def _bounded(
    trigger_id: str, expr: str, start: float | None, end: float | None
) -> ev.TriggerDefinition:
    d = definition(trigger_id, expr)
    at = {
        name: None if value is None else datetime.fromtimestamp(value, UTC)
        for name, value in (("start", start), ("end", end))
    }
    recurrence = replace(d.recurrence, **at)  # type: ignore[arg-type]
    return signing.sign(replace(d, recurrence=recurrence, signature=None), KEY_ID, SECRET)


def test_start_and_end_bound_the_instants_and_completion_is_emitted_once(rig: Rig) -> None:
    t0 = int(rig.clock.now())
    rig.put(_bounded("window", "* * * * *", t0 + 300, t0 + 600))
    rig.put(_bounded("from", "* * * * *", t0 + 300, None))
    rig.step()
    _run_until(rig, t0 + 1200, late_s=1.0)
    rig.restart()
    rig.step()
    _run_until(rig, t0 + 1800, late_s=1.0)
    window = sorted(
        int(f.scheduled_at.timestamp()) for f in rig.fires() if f.trigger_id == "window"
    )
    assert window == list(range(t0 + 300, t0 + 601, 60)), "nothing before start, after end"
    opened = sorted(int(f.scheduled_at.timestamp()) for f in rig.fires() if f.trigger_id == "from")
    assert opened == list(range(t0 + 300, t0 + 1801, 60))
    completed = [
        e
        for e in rig.read(Topic.SCHEDULE_EVENTS, ev.ScheduleEvent)
        if e.type == ev.ScheduleEventType.COMPLETED.value
    ]
    assert [(e.trigger_id, e.emitted_at.timestamp()) for e in completed] == [
        ("window", t0 + 601.0)
    ], "once, when the cursor passed the end"
    states = [s for s in rig.read(Topic.PLANNER_STATE, ev.PlannerState) if s.trigger_id == "window"]
    assert states[-1].next_instant is None and states[-1].state is ev.DefinitionState.LIVE


def test_a_definition_ending_in_the_past_is_refused_and_a_later_end_revives_a_completed_one(
    rig: Rig,
) -> None:
    t0 = int(rig.clock.now())
    rig.put(_bounded("old", "* * * * *", None, t0 - 60))
    rig.put(_bounded("short", "* * * * *", None, t0 + 120))
    rig.step()
    assert rig.quarantined() == ["invalid"]
    _run_until(rig, t0 + 300, late_s=1.0)
    assert rig.events() == [ev.ScheduleEventType.COMPLETED.value]
    longer = _bounded("short", "* * * * *", None, t0 + 600)
    rig.put(signing.sign(replace(longer, version=2, signature=None), KEY_ID, SECRET))
    rig.step()
    _run_until(rig, t0 + 900, late_s=1.0)
    short = sorted(int(f.scheduled_at.timestamp()) for f in rig.fires() if f.trigger_id == "short")
    assert short == [t0 + 60, t0 + 120, *range(t0 + 360, t0 + 601, 60)]
    assert rig.events() == [ev.ScheduleEventType.COMPLETED.value] * 2


def test_an_undecodable_state_is_rebuilt_from_the_definition_with_its_cause(rig: Rig) -> None:
    rig.put(definition("tick", "* * * * * *"))
    rig.step()
    rig.step(1.0)
    rig.log.produce(rig.name(Topic.PLANNER_STATE), b"acme/tick", b"\x00garbage")
    rig.log.produce(rig.name(Topic.PLANNER_STATE), b"acme/gone", b"\x00garbage")  # no definition
    rig.restart()
    restarted = rig.clock.now()
    rig.step()
    for _ in range(3):
        rig.step(1.0)
    after = sorted(
        int(f.scheduled_at.timestamp())
        for f in rig.fires()
        if f.scheduled_at.timestamp() > restarted
    )
    assert after == [int(restarted) + 1, int(restarted) + 2, int(restarted) + 3], "not dropped"
    quarantined = rig.read(Topic.QUARANTINE, ev.Quarantined)
    assert sorted((q.cause, q.original_key, q.trigger_id) for q in quarantined) == [
        ("state-undecodable", b"acme/gone", None),
        ("state-undecodable", b"acme/tick", "tick"),
    ]
    assert all(q.original == b"\x00garbage" for q in quarantined)
    assert "rebuilt from accepted version 1" in next(q.detail for q in quarantined if q.trigger_id)
    sample = rig.planner.metrics.registry.get_sample_value(
        "horae_planner_quarantined_records_total", {"cause": "state-undecodable"}
    )
    assert sample == 2.0
    rig.restart()  # its state is readable again: nothing more to quarantine for it
    rig.step()
    rig.step(1.0)
    again = [q.original_key or b"" for q in rig.read(Topic.QUARANTINE, ev.Quarantined)]
    # a full rebuild reads the record with no definition again (the changelog still holds it);
    # a snapshot taken since covers it
    assert sorted(again) == [b"acme/gone", b"acme/gone", b"acme/tick"][rig.snapshot_changes :]


def _counted(
    trigger_id: str, count: int, version: int = 1, **policies: object
) -> ev.TriggerDefinition:
    d = definition(trigger_id, "* * * * *", version=version, policies=ev.Policies(**policies))  # type: ignore[arg-type]
    recurrence = replace(d.recurrence, count=count)
    return signing.sign(replace(d, recurrence=recurrence, signature=None), KEY_ID, SECRET)


def test_a_remaining_fires_count_fires_n_scheduled_instants_then_completes(rig: Rig) -> None:
    t0 = int(rig.clock.now())
    rig.put(_counted("three", 3))
    rig.put(_counted("all", 4, misfire=ev.Misfire.FIRE_ALL, max_catchup=10))
    rig.step()
    _run_until(rig, t0 + 120, late_s=1.0)  # one instant each
    rig.restart()  # the count survives in the planner state
    rig.clock.advance(600.0)  # an outage: fire_all would fire ten, the count leaves two
    rig.step()
    _run_until(rig, t0 + 1800, late_s=1.0)

    def instants(name: str) -> list[int]:
        return sorted(
            int(f.scheduled_at.timestamp()) - t0
            for f in rig.fires()
            if f.trigger_id == name and f.state is ev.FireState.FIRED
        )

    assert instants("three") == [60, 120, 660], "fire_once: the latest missed one is the third"
    assert instants("all") == [60, 120, 180, 240], "fire_all cut at the count, in order"
    completed = [
        (e.trigger_id, e.cause)
        for e in rig.read(Topic.SCHEDULE_EVENTS, ev.ScheduleEvent)
        if e.type == ev.ScheduleEventType.COMPLETED.value
    ]
    assert sorted(completed) == [
        ("all", "completed: fired 4 times"),
        ("three", "completed: fired 3 times"),
    ]
    states = rig.read(Topic.PLANNER_STATE, ev.PlannerState)
    last = {s.trigger_id: s for s in states}
    assert (last["three"].fired, last["three"].next_instant) == (3, None)
    rig.put(_counted("three", 5, version=2))  # a higher count: two more
    rig.step()
    _run_until(rig, t0 + 2400, late_s=1.0)
    assert len(instants("three")) == 5


def test_a_count_below_one_is_refused(rig: Rig) -> None:
    rig.put(_counted("none", 0))
    rig.step()
    assert rig.quarantined() == ["invalid"]
