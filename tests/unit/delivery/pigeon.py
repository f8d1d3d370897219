"""A throwaway third target kind, as a new kind's module would be: a carrier pigeon, flown by
the dispatcher to a ``pigeon://`` loft, signed with its tenant's secrets. Nothing but the
:class:`~horae.delivery.port.Deliverer` it implements; registered by one table row in
``test_port.py``."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any, cast

from horae.contracts import events as ev
from horae.delivery.port import Call, Deliverer, HandOver, NotCalled
from horae.domain.errors import ValidationError


class _Kinds(StrEnum):
    PIGEON = "pigeon"


#: the kind's wire symbol (a real kind adds it to ``TargetKind``; readers from v5 on read it as
#: ``event`` until they know it)
PIGEON = cast(ev.TargetKind, _Kinds.PIGEON)


class PigeonDeliverer(Deliverer):
    kind = PIGEON
    hand_over = HandOver.DISPATCH
    signed = True
    label = "carrier pigeon (signed, to a loft)"

    def validate(self, tenant: str, target: ev.Target) -> None:
        if not (target.url or "").startswith("pigeon://"):
            raise ValidationError("target.url", target.url, "a pigeon needs a pigeon:// loft")

    def egress_url(self, target: ev.Target) -> str | None:
        return target.url

    def describe(self, target: Mapping[str, Any]) -> str:
        return f"pigeon to {target.get('url')}"

    def call(self, order: ev.DispatchOrder) -> Call | NotCalled:
        """The pigeon carries the raw payload to its loft, told by its own media type."""
        loft = order.target.url or ""
        return Call(loft, order.payload, "application/x-pigeon", "POST", 5.0)

    def form(self, fields: Mapping[str, str], tenant: str) -> dict[str, Any]:
        target: dict[str, Any] = {"kind": self.kind.value, "url": fields.get("url", "")}
        if fields.get("secret_ref"):
            target["secret_refs"] = [fields["secret_ref"]]
        return target
