"""The one table that knows every target kind: ``TargetKind`` -> its
:class:`~horae.delivery.port.Deliverer`. Adding a kind adds a row here (and its module).

Every module that would ask a target's kind asks :func:`deliverer` instead. The table is read at
each call, never copied, so a test may add a row for the length of one test
(``monkeypatch.setitem(DELIVERERS, kind, deliverer)``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from horae.contracts import events as ev
from horae.delivery.event import EventDeliverer
from horae.delivery.port import Deliverer
from horae.delivery.webhook import WebhookDeliverer

DELIVERERS: dict[ev.TargetKind, Deliverer] = {
    ev.TargetKind.WEBHOOK: WebhookDeliverer(),
    ev.TargetKind.EVENT: EventDeliverer(),
}


def deliverer(kind: ev.TargetKind) -> Deliverer:
    """The deliverer of ``kind`` (``KeyError`` naming it when no row has it)."""
    try:
        return DELIVERERS[kind]
    except KeyError:
        raise KeyError(f"no deliverer for target kind {kind!r} (horae.delivery.table)") from None


def named(kind: str) -> Deliverer | None:
    """The deliverer of the kind named ``kind`` in a target's JSON form (or a form field), or
    ``None`` for a name no row has (a newer server's kind)."""
    return next((d for k, d in DELIVERERS.items() if k.value == kind), None)


def describe(target: Mapping[str, Any]) -> str:
    """A target's JSON form (as the API returns it) in one line, by its kind's deliverer; a
    kind this table does not know (a newer server's) is shown by its name."""
    kind = target.get("kind") or ev.TargetKind.WEBHOOK.value
    found = named(kind)
    return f"{kind} target" if found is None else found.describe(target)
