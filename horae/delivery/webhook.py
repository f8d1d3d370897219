"""The webhook deliverer: a signed HTTP call made by the dispatcher.

Ingress wants an ``http(s)`` URL; the tenant's signing secrets are required and owned by it; the
URL passes the SSRF policy (at the API, and again at the dispatcher's pinned sender); the planner
hands the fire over as a ``DispatchOrder``, whose body (the Standard Webhooks envelope or the raw
payload, :mod:`horae.outbound.envelope`) the dispatcher builds, signs and sends, with retries.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from horae.contracts import events as ev
from horae.delivery.port import Deliverer, HandOver
from horae.domain.errors import ValidationError


class WebhookDeliverer(Deliverer):
    kind = ev.TargetKind.WEBHOOK
    hand_over = HandOver.DISPATCH
    signed = True

    def validate(self, tenant: str, target: ev.Target) -> None:
        if not (target.url or "").startswith(("https://", "http://")):
            raise ValidationError("target.url", target.url, "a webhook needs an http(s) URL")

    def egress_url(self, target: ev.Target) -> str | None:
        return target.url or ""

    def describe(self, target: Mapping[str, Any]) -> str:
        return f"{target.get('method') or 'POST'} {target.get('url')}"
