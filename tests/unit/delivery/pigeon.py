"""A throwaway third target kind, as a new kind's module would be: a carrier pigeon, flown by
the dispatcher to a ``pigeon://`` loft, signed with its tenant's secrets. Nothing but the
:class:`~horae.delivery.port.Deliverer` it implements; registered by one table row in
``test_port.py``."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any, cast

from horae.contracts import events as ev
from horae.delivery.port import Deliverer, HandOver
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

    def validate(self, tenant: str, target: ev.Target) -> None:
        if not (target.url or "").startswith("pigeon://"):
            raise ValidationError("target.url", target.url, "a pigeon needs a pigeon:// loft")

    def egress_url(self, target: ev.Target) -> str | None:
        return target.url

    def describe(self, target: Mapping[str, Any]) -> str:
        return f"pigeon to {target.get('url')}"
