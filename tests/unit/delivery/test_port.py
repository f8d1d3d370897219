"""The Deliverer port: every module that treats target kinds differently asks the table, so a
third kind is one new module (``pigeon.py``) plus one row (``monkeypatch.setitem`` below), and
no module outside ``horae/delivery/`` compares a target's kind."""

from __future__ import annotations

import ast
import asyncio
import base64
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import horae
from horae.cli.triggers import target as cli_target
from horae.console.routes import definition as console_form
from horae.console.routes import target_kinds
from horae.console.words import target_words
from horae.contracts import events as ev
from horae.contracts.grants import Grants
from horae.contracts.ingress import validate_definition
from horae.contracts.routing import Router
from horae.contracts.topics import lane_topic
from horae.delivery.event import EventDeliverer
from horae.delivery.port import Deliverer, HandOver
from horae.delivery.table import DELIVERERS, deliverer
from horae.delivery.webhook import WebhookDeliverer
from horae.domain.errors import ValidationError
from horae.ports import Emit
from horae.streams.dispatcher.config import DispatcherConfig
from horae.streams.dispatcher.deliver import attempt_once
from horae.streams.dispatcher.records import UNSENDABLE
from horae.streams.planner.records import fire_outputs
from horae.testing import RecordingSender, VirtualClock
from tests.unit.contracts.samples import definition
from tests.unit.delivery.pigeon import PIGEON, PigeonDeliverer

ROUTER = Router("unit.")


class _Unencoded(Router):
    """The router without the wire: the throwaway kind has no ``TargetKind`` symbol to encode
    (a real kind adds one, readable from contracts v5 on), so its records carry no value."""

    def emit(self, event: ev.Event, partition: int | None, **kw: Any) -> Emit:
        return super().emit(event, partition, **{**kw, "value": b""})


UNENCODED = _Unencoded("unit.")
LOFT = "pigeon://loft.acme.example/nightly"
SECRET = "whsec_" + base64.b64encode(b"unit-pigeon-secret-0123456").decode()
DISPATCHER = DispatcherConfig(
    bootstrap="unused:9092", prefix="unit.", slot="a",
    webhook_secrets={"acme": {"whsec-1": SECRET}}, callback_secret=b"unit-callback-secret",
)  # fmt: skip


@pytest.fixture
def pigeon(monkeypatch: pytest.MonkeyPatch) -> Iterator[ev.TriggerDefinition]:
    """The one row that registers the third kind, and a definition targeting it."""
    monkeypatch.setitem(DELIVERERS, PIGEON, PigeonDeliverer())
    d = definition()
    yield replace(d, target=replace(d.target, kind=PIGEON, url=LOFT), quotas=ev.Quotas())


def test_the_table_has_a_row_for_every_target_kind_and_each_row_is_its_kind() -> None:
    assert set(DELIVERERS) == set(ev.TargetKind)
    for kind, row in DELIVERERS.items():
        assert row.kind is kind
    assert isinstance(deliverer(ev.TargetKind.WEBHOOK), WebhookDeliverer)
    assert isinstance(deliverer(ev.TargetKind.EVENT), EventDeliverer)
    assert deliverer(ev.TargetKind.WEBHOOK).in_flight
    assert not deliverer(ev.TargetKind.EVENT).in_flight
    # nothing unsigned leaves the dispatcher: every dispatched kind is signed
    assert all(d.signed for d in DELIVERERS.values() if d.hand_over is HandOver.DISPATCH)


def test_a_kind_without_a_row_is_named() -> None:
    with pytest.raises(KeyError, match="pigeon"):
        deliverer(PIGEON)


def test_a_third_kind_is_one_module_plus_one_row(pigeon: ev.TriggerDefinition) -> None:
    assert len(DELIVERERS) == len(ev.TargetKind) + 1
    assert isinstance(deliverer(PIGEON), Deliverer)
    # validation at ingress: its own rule, and the rules common to every kind
    validate_definition(pigeon)
    with pytest.raises(ValidationError, match="pigeon:// loft"):
        validate_definition(replace(pigeon, target=replace(pigeon.target, url="https://x.example")))
    with pytest.raises(ValidationError, match="timeout_ms"):
        validate_definition(replace(pigeon, target=replace(pigeon.target, timeout_ms=0)))
    # ownership and secrets: a signed kind needs a ref its tenant owns
    grants = Grants(secret_refs={"acme": frozenset({"whsec-1", "whsec-2"})})
    assert grants.check_secret_refs(pigeon) is None
    unsigned = replace(pigeon, target=replace(pigeon.target, secret_refs=()))
    assert grants.check_secret_refs(unsigned) == (
        "target.secret_refs: a pigeon target needs a signing secret ref"
    )
    # SSRF: the URL the API's policy checks
    assert deliverer(PIGEON).egress_url(pigeon.target) == LOFT
    # the hand-over: dispatched, on its lane, like a webhook; no extra topic
    assert ROUTER.topics_of(pigeon) == [ROUTER.events_topic("acme")]
    outputs = fire_outputs(
        UNENCODED, pigeon, 0, scheduled=1_743_318_000, origin=ev.Origin.SCHEDULED,
        lane=ev.Lane.ON_TIME, now=1_743_318_000.5,
    )  # fmt: skip
    order = outputs[1].event
    assert isinstance(order, ev.DispatchOrder) and order.target.kind is PIGEON
    assert outputs[1].topic == ROUTER.names[lane_topic(ev.Lane.ON_TIME)]
    # one line for people (the CLI's listings, the console's)
    assert cli_target({"target": {"kind": "pigeon", "url": LOFT}}) == f"pigeon to {LOFT}"
    assert target_words({"kind": "pigeon", "url": LOFT}) == f"pigeon to {LOFT}"
    # the console's create form offers it and builds its target
    assert ("pigeon", PigeonDeliverer.label) in target_kinds()
    fields = {"target_kind": "pigeon", "url": LOFT, "secret_ref": "whsec-1", "expr": "0 3 * * *"}
    assert console_form(fields, "acme")["target"] == {
        "kind": "pigeon",
        "url": LOFT,
        "secret_refs": ["whsec-1"],
    }
    # the dispatcher's send path: the call the row says, signed with the tenant's secrets
    sender = RecordingSender()
    sent = asyncio.run(attempt_once(order, DISPATCHER, sender, VirtualClock(1_743_318_001.0)))
    assert sent.result is not None and sent.not_sent is None
    (call,) = sender.sent
    assert (call.url, call.method, call.body) == (LOFT, "POST", order.payload)
    assert call.headers["Content-Type"] == "application/x-pigeon"
    assert call.headers["webhook-id"] == order.fire.fire_key and "webhook-signature" in call.headers


def test_a_topic_kind_is_handed_over_on_its_topic(
    pigeon: ev.TriggerDefinition, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same row with a ``topic`` hand-over: the planner writes the event, no order."""

    class Roost(PigeonDeliverer):
        hand_over = HandOver.TOPIC

    monkeypatch.setitem(DELIVERERS, PIGEON, Roost())
    d = replace(pigeon, target=replace(pigeon.target, topic="events.acme.roost"))
    assert ROUTER.topics_of(d) == [ROUTER.events_topic("acme"), "unit.events.acme.roost"]
    outputs = fire_outputs(
        UNENCODED, d, 0, scheduled=1_743_318_000, origin=ev.Origin.SCHEDULED,
        lane=ev.Lane.ON_TIME, now=1_743_318_000.5,
    )  # fmt: skip
    assert isinstance(outputs[1].event, ev.ScheduleEvent)
    assert outputs[1].topic == "unit.events.acme.roost"
    assert not deliverer(PIGEON).in_flight


#: modules that still tell target kinds apart themselves, with who removes it (none is)
PENDING: dict[str, str] = {}


def _kind_compares(tree: ast.AST) -> Iterator[int]:
    """Lines comparing with a ``TargetKind`` member or a kind's name (``"webhook"``/``"event"``
    beside something named ``kind``)."""
    names = {k.value for k in ev.TargetKind}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        text = ast.unparse(node)
        sides = [node.left, *node.comparators]
        member = any(isinstance(s, ast.Attribute) and "TargetKind" in ast.unparse(s) for s in sides)
        literal = "kind" in text and any(
            isinstance(s, ast.Constant) and s.value in names for s in sides
        )
        if member or literal:
            yield node.lineno


def test_no_module_outside_the_table_compares_a_target_kind() -> None:
    root = Path(horae.__file__).parent
    found = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent).as_posix()
        if rel.startswith("horae/delivery/"):
            continue
        lines = list(_kind_compares(ast.parse(path.read_text())))
        if lines:
            found[rel] = lines
    assert set(found) == set(PENDING), found


def test_an_order_of_a_kind_that_is_not_dispatched_is_unsendable(
    pigeon: ev.TriggerDefinition,
) -> None:
    """A kind handed over on its topic has no call: its order (a newer planner's kind, read as
    ``event``) is not sent and fails the fire as unsendable, whatever its URL."""
    outputs = fire_outputs(
        UNENCODED, pigeon, 0, scheduled=1_743_318_000, origin=ev.Origin.SCHEDULED,
        lane=ev.Lane.ON_TIME, now=1_743_318_000.5,
    )  # fmt: skip
    order = outputs[1].event
    assert isinstance(order, ev.DispatchOrder)
    order = replace(order, target=replace(order.target, kind=ev.TargetKind.EVENT))
    sender = RecordingSender()
    sent = asyncio.run(attempt_once(order, DISPATCHER, sender, VirtualClock(1_743_318_001.0)))
    assert sender.sent == [] and sent.result is None and sent.not_sent == UNSENDABLE
    assert sent.error == "unsendable: target kind event is not dispatched (hand-over topic)"


def test_a_dispatched_kind_that_is_not_signed_is_not_sent(
    pigeon: ev.TriggerDefinition, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A row that breaks the port's contract (dispatched, unsigned) sends nothing unsigned: the
    call is signed when the tenant's secrets are there, else the attempt is unsendable."""

    class Unsigned(PigeonDeliverer):
        signed = False

    monkeypatch.setitem(DELIVERERS, PIGEON, Unsigned())
    outputs = fire_outputs(
        UNENCODED, pigeon, 0, scheduled=1_743_318_000, origin=ev.Origin.SCHEDULED,
        lane=ev.Lane.ON_TIME, now=1_743_318_000.5,
    )  # fmt: skip
    order = outputs[1].event
    assert isinstance(order, ev.DispatchOrder)
    unsigned = replace(order, target=replace(order.target, secret_refs=()))
    sender = RecordingSender()
    sent = asyncio.run(attempt_once(unsigned, DISPATCHER, sender, VirtualClock(1_743_318_001.0)))
    assert sent.not_sent == UNSENDABLE and sent.result is None and sender.sent == []
    asyncio.run(attempt_once(order, DISPATCHER, sender, VirtualClock(1_743_318_001.0)))
    assert [bool(c.headers.get("webhook-signature")) for c in sender.sent] == [True]
