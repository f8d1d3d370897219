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

from hypothesis import given, settings
from hypothesis import strategies as st

from horae.contracts import events as ev
from horae.contracts import signing
from horae.contracts.codec import encode
from horae.contracts.grants import Grants
from horae.contracts.routing import Router
from horae.domain.keys import FireKey
from horae.domain.trigger import Limits
from horae.outbound.results import AttemptResult, SendResult
from horae.ports import Emit, Record
from horae.streams.dispatcher.conclude import Sent, conclude
from horae.streams.dispatcher.records import OrderHeaders
from horae.streams.planner.commands import SUSPENDED
from horae.streams.planner.decide import Decider
from horae.streams.planner.index import DueIndex, TriggerEntry, make_index
from horae.streams.planner.records import STATE_OF_CAUSE
from tests.unit.dispatcher.builders import fire_record
from tests.unit.planner.builders import KEY_ID, SECRET, TENANT, definition

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
PLATFORM_KEY_ID, PLATFORM_SECRET = "horae-platform", b"platform-secret"
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


class Driver:
    """The planner's decision core (:class:`Decider`, one due index) driven by definitions,
    commands (signed: a tenant's and the platform's), outcomes and time, as the worker drives
    it; every record it emits is kept."""

    def __init__(self) -> None:
        roles = {TENANT: {KEY_ID: frozenset({ev.Role.AUTHOR, ev.Role.POLICY})}}
        self.decider = Decider(
            {TENANT: {KEY_ID: SECRET, PLATFORM_KEY_ID: PLATFORM_SECRET}},
            Limits(min_interval_s=1),
            grants=Grants(roles=roles),
        )
        self.index = make_index(0)
        self.now = float(T0)
        self.version = 0
        self.offset = 0
        self.out: list[Emit] = []

    def _record(self, topic: str, key: str | bytes, value: bytes) -> Record:
        self.offset += 1
        raw = key.encode() if isinstance(key, str) else key
        return Record(topic, 0, self.offset, raw, value)

    def define(self, d: ev.TriggerDefinition) -> None:
        self.version += 1
        d = signing.sign(replace(d, version=self.version, signature=None), KEY_ID, SECRET)
        msg = self._record("unit.definitions", f"{TENANT}/{d.trigger_id}", encode(d))
        self.out += self.decider.on_definition_record(self.index, msg, self.now)

    def command(self, kind: ev.CommandKind, platform: bool = False, **fields: object) -> None:
        trigger_id = ev.TENANT_WIDE if platform else "t"
        c = ev.Command(
            command_id=f"c{self.offset}",
            tenant=TENANT,
            trigger_id=trigger_id,
            kind=kind,
            requested_by="tester",
            role=ev.Role.PLATFORM if platform else ev.Role.POLICY,
            requested_at=datetime.fromtimestamp(int(self.now), UTC),
            expires_at=datetime.fromtimestamp(self.now + 600, UTC),
        )
        c = replace(c, **fields)  # type: ignore[arg-type]
        signed = signing.sign(c, PLATFORM_KEY_ID if platform else KEY_ID,
                              PLATFORM_SECRET if platform else SECRET)  # fmt: skip
        msg = self._record("unit.commands", f"{TENANT}/{trigger_id}", encode(signed))
        self.out += self.decider.on_command_record(self.index, msg, self.now)

    def outcome(self) -> None:
        """The outcome of a running fire, if any (the decider looks only at the key)."""
        for key in list(self.index.running)[:1]:
            msg = self._record("unit.outcomes", key, b"")
            self.out += self.decider.on_outcome_record(self.index, msg, self.now)

    def advance(self, seconds: float) -> None:
        self.now += seconds
        self.out += self.decider.decide_due(self.index, self.now, self.now, 1000)
        self.index.settle()

    def fires(self) -> list[ev.FireRecord]:
        return [o.event for o in self.out if isinstance(o.event, ev.FireRecord)]


EXPRS = ("* * * * * *", "*/7 * * * * *", "* * * * *", "0 * * * *")
POLICIES = st.builds(
    ev.Policies,
    misfire=st.sampled_from(ev.Misfire),
    max_catchup=st.integers(1, 5),
    horizon_s=st.sampled_from((60, 600, 86_400)),
    overlap=st.sampled_from(ev.Overlap),
    misfire_grace_s=st.sampled_from((1, 60)),
)


def _definition(
    expr: str, policies: ev.Policies, state: ev.DefinitionState, event: bool, count: int | None
) -> ev.TriggerDefinition:
    target = ev.Target(kind=ev.TargetKind.EVENT, topic=f"events.{TENANT}") if event else None
    d = definition("t", expr, policies=policies, state=state, target=target)
    return replace(d, recurrence=replace(d.recurrence, count=count))


DEFINITIONS = st.builds(
    _definition,
    st.sampled_from(EXPRS),
    POLICIES,
    st.sampled_from((*[ev.DefinitionState.LIVE] * 3, *ev.DefinitionState)),  # mostly live
    st.booleans(),
    st.one_of(st.none(), st.integers(1, 5)),
)  # fmt: skip
ADVANCES = (0.5, 1, 1, 7, 30, 61, 61, 600, 3600, 20_000)  # seconds; mostly short
SUSPENSION = (ev.CommandKind.PAUSE, ev.CommandKind.RESUME)  # suspend, lift
STEP = st.one_of(
    st.tuples(st.just("define"), DEFINITIONS),
    st.tuples(st.just("advance"), st.sampled_from(ADVANCES)),
    st.tuples(st.just("command"), st.sampled_from(ev.CommandKind)),
    st.tuples(st.just("suspend"), st.sampled_from(SUSPENSION)),
    st.tuples(st.just("outcome"), st.none()),
)
STEPS = st.tuples(st.just("define"), DEFINITIONS).flatmap(
    lambda first: st.lists(STEP, min_size=1, max_size=30).map(lambda rest: [first, *rest])
)


def drive(driver: Driver, steps: list[tuple[str, object]]) -> None:
    for step, arg in steps:
        if step == "define":
            assert isinstance(arg, ev.TriggerDefinition)
            driver.define(arg)
        elif step == "advance":
            assert isinstance(arg, float | int)
            driver.advance(float(arg))
        elif step == "command":
            assert isinstance(arg, ev.CommandKind)
            window = (
                datetime.fromtimestamp(driver.now - 30, UTC),
                datetime.fromtimestamp(driver.now - 1, UTC),
            )
            driver.command(arg, backfill_from=window[0], backfill_to=window[1])
        elif step == "suspend":
            assert isinstance(arg, ev.CommandKind)
            driver.command(arg, platform=True)
        else:
            driver.outcome()


@settings(max_examples=150, deadline=None)
@given(steps=STEPS)
def test_no_planner_path_writes_a_reserved_fire_state(steps: list[tuple[str, object]]) -> None:
    """Whatever definitions, commands, outcomes and time the planner's decision core is given,
    no fire record it writes has a reserved state, and each one's state is what its hand-over
    and cause say (fired with a lane, else by ``STATE_OF_CAUSE``, else skipped)."""
    driver = Driver()
    drive(driver, steps)
    for f in driver.fires():
        assert name(f.state) not in RESERVED, f
        if f.lane is not None:
            assert f.state is ev.FireState.FIRED, f
        else:
            assert f.state is STATE_OF_CAUSE.get(f.cause or "", ev.FireState.SKIPPED), f


def test_the_planners_paths_write_every_fire_state_not_reserved() -> None:
    """One script through the decision core writes every fire state that is not reserved: fired
    and skipped, expired past the horizon, paused while the tenant is suspended, replaced by a
    newer fire (overlap ``replace``)."""
    driver = Driver()
    hourly = ev.Policies(horizon_s=600, overlap=ev.Overlap.REPLACE)
    driver.define(definition("t", "* * * * *", policies=hourly))
    driver.advance(61)  # fires, and runs on (no outcome)
    driver.advance(60)  # the next one replaces it
    driver.advance(3600)  # an outage: skipped (fire_once), expired (past the horizon)
    driver.command(ev.CommandKind.PAUSE, platform=True)  # the tenant is suspended
    driver.advance(120)
    produced = {name(f.state) for f in driver.fires()}
    assert produced == {name(s) for s in ev.FireState} - RESERVED


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
