"""The list route's pieces: a list item of a decoded definition carries the same TriggerOut JSON
as a single GET, a stored recurrence column parses back to the definition's recurrence (defaults
filling fields a row projected before they existed lacks), next instants of live triggers only.
The SQL rendering is checked on PostgreSQL by tests/integration/api/test_list_render.py."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from horae.api.ports import StoredTrigger
from horae.api.render import listed, stored_body, stored_recurrence, upcoming_instants
from horae.contracts import events as ev
from horae.projections.rows import MAPPERS, STAGE_COLUMNS, Stage
from horae.projections.synthetic import definition as synthetic
from tests.unit.contracts.samples import definition as sample

T = datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)


def _row(d: ev.TriggerDefinition, first: datetime) -> dict[str, Any]:
    """The staging row the projector writes (JSON columns as text)."""
    mapped = MAPPERS[Stage.DEFINITIONS](d, "t", 0, 0)
    return dict(zip(STAGE_COLUMNS[Stage.DEFINITIONS], mapped, strict=True))


def cases() -> list[ev.TriggerDefinition]:
    base = sample()
    every = replace(
        base,
        recurrence=ev.Recurrence(
            kind=ev.RecurrenceKind.EVERY, interval_s=90, anchor=T, end=T + timedelta(days=400)
        ),
        payload=b"\x00\xffbin",
    )
    at = replace(
        base,
        recurrence=ev.Recurrence(
            kind=ev.RecurrenceKind.AT, instants=(T + timedelta(days=1), T + timedelta(days=2))
        ),
        state=ev.DefinitionState.PAUSED,
        description=None,
        labels={},
    )
    event = replace(
        synthetic("acme", "ev"),
        target=ev.Target(kind=ev.TargetKind.EVENT, topic="events.acme"),
        recurrence=ev.Recurrence(kind=ev.RecurrenceKind.CRON, expr="*/5 * * * *", count=9),
    )
    return [base, every, at, event, replace(base, state=ev.DefinitionState.DELETED)]


@pytest.mark.parametrize("d", cases(), ids=lambda d: f"{d.recurrence.kind}-{d.state}")
def test_a_list_item_carries_the_trigger_out_of_the_definition(d: ev.TriggerDefinition) -> None:
    stored = StoredTrigger(d, T - timedelta(days=3), d.authored_at)
    item = listed(stored)
    assert json.loads(item.body) == stored_body(stored)
    assert (item.trigger_id, item.version, item.state) == (d.trigger_id, d.version, d.state)
    staged = _row(d, T)
    assert stored_recurrence(staged["recurrence"]) == d.recurrence


def test_a_recurrence_projected_before_a_field_existed_takes_its_default() -> None:
    d = sample()
    column = json.loads(_row(d, T)["recurrence"])
    del column["count"], column["end"]
    assert stored_recurrence(json.dumps(column)) == d.recurrence


def test_upcoming_instants_of_a_live_trigger_only() -> None:
    r = ev.Recurrence(kind=ev.RecurrenceKind.CRON, expr="0 * * * *")
    now = int(datetime(2026, 1, 1, 10, 30, tzinfo=UTC).timestamp())
    assert upcoming_instants("live", r, now) == [
        "2026-01-01T11:00:00Z",
        "2026-01-01T12:00:00Z",
        "2026-01-01T13:00:00Z",
    ]
    assert upcoming_instants("paused", r, now) == []
