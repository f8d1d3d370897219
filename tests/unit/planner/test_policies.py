"""Declared policies take effect in the planner (on the in-memory log and a virtual clock):
jitter judged against the jittered due time, deterministic across a restart."""

from __future__ import annotations

import pytest

from horae.contracts import events as ev
from horae.contracts.topics import Topic
from horae.domain.jitter import jitter_offset
from tests.unit.planner.builders import TENANT, definition
from tests.unit.planner.rig import Rig

HOUR = 3600
JITTER_S = 300


def _run_until(rig: Rig, until: float, late_s: float) -> None:
    """Step the planner as its loop would: wake ``late_s`` after each earliest due time."""
    while True:
        due = [d for i in rig.planner.indexes.values() if (d := i.earliest_due()) is not None]
        wake = min(due) + late_s if due else until
        if wake > until:
            return
        rig.step(max(0.0, wake - rig.clock.now()))


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
