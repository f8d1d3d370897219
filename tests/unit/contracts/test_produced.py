"""Every value the contracts define is produced by some path, or is reserved (docs/contracts.md,
"Who produces each value"): the planner's fire states, causes and summary events on a virtual
clock, the dispatcher's transport results, outcome states and fire events through its pure
conclusion. A reserved value is produced by no path (an Avro enum symbol cannot be removed
compatibly, so it stays in the schema); a new symbol fails here until it is produced or reserved,
and until the table names it."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path

from horae.contracts import events as ev
from horae.contracts.routing import Router
from horae.domain.keys import FireKey
from horae.outbound.results import AttemptResult, SendResult
from horae.ports import Emit
from horae.streams.dispatcher.conclude import Sent, conclude
from horae.streams.dispatcher.records import OrderHeaders
from horae.streams.planner.commands import SUSPENDED
from horae.streams.planner.decide import Decider
from horae.streams.planner.index import DueIndex, TriggerEntry, make_index
from horae.streams.planner.records import STATE_OF_CAUSE
from tests.unit.dispatcher.builders import fire_record
from tests.unit.planner.builders import definition

#: Produced by no path (documented as reserved in events.py and docs/contracts.md).
RESERVED: frozenset[str] = frozenset(
    {
        "FireState.REJECTED",
        "FireState.SHED",
        "TransportResult.PRODUCE_ERROR",
    }
)
#: Produced by the overlap policy (issue 12 item 2), not covered here.
OVERLAP: frozenset[str] = frozenset({"FireState.REPLACED", "OutcomeState.CANCELLED"})

T0 = 1_800_000_000 - 1_800_000_000 % 3600  # an hour boundary
KEY = "acme/hourly"
ENUMS: tuple[type[StrEnum], ...] = (
    ev.FireState,
    ev.OutcomeState,
    ev.TransportResult,
    ev.ScheduleEventType,
)


def name(value: StrEnum) -> str:
    return f"{type(value).__name__}.{value.name}"


def produced_by_the_planner() -> tuple[set[str], set[tuple[ev.FireState, str | None]]]:
    """An hourly trigger with a 6 h horizon decided after a 10 h outage, then paused for 20 h and
    resumed: every state and cause the planner's misfire path writes, and its summary events."""
    decider, index = Decider(), make_index(0)
    d = definition("hourly", "0 * * * *", policies=ev.Policies(horizon_s=6 * 3600))
    outputs: list[Emit] = list(decider.apply_definition(index, KEY, None, d, T0 + 10))
    outputs += decider.decide_due(index, T0 + 10 * 3600 + 1, T0 + 10 * 3600 + 1, 1000)
    paused = replace(d, version=2, state=ev.DefinitionState.PAUSED)
    outputs += decider.apply_definition(index, KEY, _held(index), paused, T0 + 36_005)
    live = replace(d, version=3, state=ev.DefinitionState.LIVE)
    outputs += decider.apply_definition(index, KEY, _held(index), live, T0 + 30 * 3600 + 9)
    events = {o.event.type for o in outputs if isinstance(o.event, ev.ScheduleEvent)}
    fires = {(o.event.state, o.event.cause) for o in outputs if isinstance(o.event, ev.FireRecord)}
    return events, fires


def test_the_planner_writes_each_fire_state_and_cause_of_its_misfire_path() -> None:
    events, fires = produced_by_the_planner()
    assert fires == {
        (ev.FireState.FIRED, None),
        (ev.FireState.SKIPPED, "skipped: misfire policy"),
        (ev.FireState.EXPIRED, "expired: past horizon"),
    }
    assert events == {"schedule.paused", "schedule.resumed", "schedule.skipped", "schedule.expired"}
    # a suspended tenant's instants are ``paused`` (the path: tests/unit/planner/test_commands.py)
    assert STATE_OF_CAUSE[SUSPENDED] is ev.FireState.PAUSED


def test_no_planner_path_writes_a_reserved_fire_state() -> None:
    producible = {ev.FireState.FIRED, ev.FireState.SKIPPED, *STATE_OF_CAUSE.values()}
    assert {name(s) for s in producible}.isdisjoint(RESERVED)
    expected = {name(s) for s in ev.FireState} - RESERVED - OVERLAP
    assert expected <= {name(s) for s in producible}


def concluded(sent: Sent) -> list[ev.Event]:
    """The records of a fire's only allowed attempt ending as ``sent`` says."""
    fire = fire_record(FireKey("acme", "g", T0), ev.Lane.ON_TIME)
    order = ev.DispatchOrder(
        fire=fire,
        target=ev.Target(kind=ev.TargetKind.WEBHOOK, url="https://x.example/h"),
        lane=ev.Lane.ON_TIME,
        attempt=1,
        not_before=datetime.fromtimestamp(T0, UTC),
        retry=ev.RetryPolicy(max_attempts=1),
    )
    c = conclude(order, OrderHeaders(), sent, Router("unit."), 0)
    return [e.event for e in c.emits]


def test_the_dispatcher_writes_every_transport_result_outcome_and_fire_event() -> None:
    start = T0 * 1000
    records: list[ev.Event] = concluded(Sent(None, start, start, "nothing sent"))
    for result in SendResult:
        status = {SendResult.OK: 200, SendResult.HTTP_ERROR: 503}.get(result)
        records += concluded(Sent(AttemptResult(result, status), start, start + 5))
    produced = {name(r.transport_result) for r in records if isinstance(r, ev.Attempt)}
    produced |= {name(r.state) for r in records if isinstance(r, ev.WorkOutcome)}
    types = {r.type for r in records if isinstance(r, ev.ScheduleEvent)}
    assert types == {"schedule.succeeded", "schedule.failed"}
    mine = {name(v) for e in (ev.TransportResult, ev.OutcomeState) for v in e}
    assert mine - RESERVED - OVERLAP <= produced
    assert produced.isdisjoint(RESERVED)


def test_the_contracts_table_names_every_value() -> None:
    doc = (Path(__file__).parents[3] / "docs" / "contracts.md").read_text()
    rows = set(re.findall(r"^\| `(\w+\.\w+)`", doc, re.MULTILINE))
    assert {name(v) for e in ENUMS for v in e} <= rows
    for value in RESERVED:
        row = next(line for line in doc.splitlines() if line.startswith(f"| `{value}`"))
        assert "reserved" in row


def _held(index: DueIndex) -> TriggerEntry:
    entry = index.get(KEY)
    assert entry is not None
    return entry
