"""A planner fenced by a newer planner of its slot (the same transactional id: the slot was
restarted while the old one still ran) stops at its next commit, and nothing it decided
becomes visible; the newer one decides from the last commit."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from horae.contracts import events as ev
from horae.contracts.topics import Topic
from horae.ports import Fenced, Record
from horae.testing import InMemoryLog
from tests.unit.planner.builders import definition
from tests.unit.planner.rig import T0, Rig, _planner


def test_a_fenced_planner_stops_and_its_decisions_stay_invisible(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    rig.planner.close()
    old = rig.log.member(transactional_id="a")
    zombie = _planner(old, rig.clock, rig.broker)
    zombie.step()  # joined, nothing to decide yet
    newer: list[InMemoryLog] = []
    consume = old.consume

    def consume_then_fenced(max_records: int, timeout_s: float) -> Sequence[Record]:
        got = consume(max_records, timeout_s)
        if got and not newer:  # the slot restarts while the old planner decides
            newer.append(rig.log.member(transactional_id="a"))
        return got

    monkeypatch.setattr(old, "consume", consume_then_fenced)
    rig.put(definition("tick"))
    with pytest.raises(Fenced):
        zombie.step()
    assert rig.read(Topic.ACCEPTED, ev.TriggerDefinition) == [], "nothing of it is visible"
    rig.planner = _planner(newer[0], rig.clock, rig.broker)
    rig.step()
    assert [d.trigger_id for d in rig.read(Topic.ACCEPTED, ev.TriggerDefinition)] == ["tick"]
    rig.step(1.0)
    assert [int(f.scheduled_at.timestamp()) for f in rig.fires()] == [int(T0) + 1]
