"""``policies.action_after_completion`` ``delete`` (EventBridge's ``ActionAfterCompletion``): a
bounded trigger's completion deletes its definition (the next version, ``deleted``, on
``definitions.accepted``), audited, once, also across a restart; refused on a trigger that never
completes (in-memory log, virtual clock)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from horae.contracts import events as ev
from horae.contracts import signing
from horae.contracts.ingress import validate_definition
from horae.contracts.topics import Topic
from horae.domain.errors import ValidationError
from horae.streams.planner.decide import COMPLETION_AUTHOR
from tests.unit.planner.builders import KEY_ID, SECRET, definition
from tests.unit.planner.rig import Rig

DELETE = ev.Policies(action_after_completion=ev.ActionAfterCompletion.DELETE)


def _counted(trigger_id: str, count: int, policies: ev.Policies = DELETE) -> ev.TriggerDefinition:
    d = definition(trigger_id, "* * * * *", policies=policies)
    recurrence = replace(d.recurrence, count=count)
    return signing.sign(replace(d, recurrence=recurrence, signature=None), KEY_ID, SECRET)


def test_completion_deletes_the_definition_once_and_audits_it(rig: Rig) -> None:
    rig.put(_counted("twice", 2))
    rig.put(_counted("kept", 2, ev.Policies()))
    rig.step()
    for _ in range(3):
        rig.step(60.0)
    rig.restart()
    rig.step(600.0)
    fired = [f for f in rig.fires() if f.state is ev.FireState.FIRED]
    assert sorted(f.trigger_id for f in fired) == ["kept", "kept", "twice", "twice"]
    accepted = [
        d for d in rig.read(Topic.ACCEPTED, ev.TriggerDefinition) if d.trigger_id == "twice"
    ]
    assert [(d.version, d.state) for d in accepted] == [
        (1, ev.DefinitionState.LIVE),
        (2, ev.DefinitionState.DELETED),
    ]
    gone = accepted[-1]
    assert (gone.author, gone.role, gone.signature) == (COMPLETION_AUTHOR, ev.Role.PLATFORM, None)
    first = accepted[0]
    restored = replace(
        gone, version=1, state=ev.DefinitionState.LIVE, authored_at=first.authored_at,
        author=first.author, role=first.role,
    )  # fmt: skip
    assert restored == replace(first, signature=None)  # everything else is the last version's
    kept = [
        d.version for d in rig.read(Topic.ACCEPTED, ev.TriggerDefinition) if d.trigger_id == "kept"
    ]
    assert kept == [1]
    completed = {
        e.trigger_id: e.cause
        for e in rig.read(Topic.SCHEDULE_EVENTS, ev.ScheduleEvent)
        if e.type == ev.ScheduleEventType.COMPLETED.value
    }
    assert completed == {
        "twice": "completed: fired 2 times; deleted: version 2 (action_after_completion delete)",
        "kept": "completed: fired 2 times",
    }
    audits = [a for a in rig.read(Topic.AUDIT, ev.AuditEntry) if a.action == "completion.delete"]
    assert [(a.trigger_id, a.principal, a.allowed, a.detail["version"]) for a in audits] == [
        ("twice", COMPLETION_AUTHOR, True, "2")
    ]
    last = {s.trigger_id: s for s in rig.read(Topic.PLANNER_STATE, ev.PlannerState)}
    assert (last["twice"].trigger_version, last["twice"].state) == (2, ev.DefinitionState.DELETED)
    # re-created by its tenant later: a new version above the deleted one, live again
    again = replace(_counted("twice", 1, ev.Policies()), version=3, signature=None)
    rig.put(signing.sign(again, KEY_ID, SECRET))
    rig.step()
    rig.step(60.0)
    assert (
        len([f for f in rig.fires() if f.trigger_id == "twice" and f.state is ev.FireState.FIRED])
        == 3
    )


@pytest.mark.parametrize(
    ("recurrence", "ok"),
    [
        (ev.Recurrence(kind=ev.RecurrenceKind.CRON, expr="* * * * *"), False),
        (ev.Recurrence(kind=ev.RecurrenceKind.EVERY, interval_s=300), False),
        (ev.Recurrence(kind=ev.RecurrenceKind.CRON, expr="* * * * *", count=3), True),
    ],
)
def test_delete_after_completion_needs_a_trigger_that_completes(
    recurrence: ev.Recurrence, ok: bool
) -> None:
    d = replace(definition("x", policies=DELETE), recurrence=recurrence)
    if ok:
        validate_definition(d)
        return
    with pytest.raises(ValidationError) as info:
        validate_definition(d)
    assert info.value.field == "policies.action_after_completion"
    assert "never completes" in info.value.message
