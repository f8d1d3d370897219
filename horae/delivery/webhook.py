"""The webhook deliverer: a signed HTTP call made by the dispatcher.

Ingress wants an ``http(s)`` URL; the tenant's signing secrets are required and owned by it; the
URL passes the SSRF policy (at the API, and again at the dispatcher's pinned sender); the planner
hands the fire over as a ``DispatchOrder``, whose call this module says: the target's URL and
method, its timeout, and the body (the Standard Webhooks envelope or the raw payload,
:mod:`horae.delivery.envelope`) that the dispatcher signs and sends, with retries. With
``target.oidc`` the dispatcher also sends an identity token per attempt (``Authorization:
Bearer``, :mod:`horae.outbound.oidc`), so the target may set no ``Authorization`` header of its
own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from horae.contracts import events as ev
from horae.delivery.envelope import webhook_body
from horae.delivery.port import Call, Deliverer, HandOver, NotCalled
from horae.domain.errors import ValidationError

NO_URL = NotCalled(ev.NotSent.NO_URL, "the webhook target has no URL")


class WebhookDeliverer(Deliverer):
    kind = ev.TargetKind.WEBHOOK
    hand_over = HandOver.DISPATCH
    signed = True
    label = "webhook (signed HTTP call)"

    def validate(self, tenant: str, target: ev.Target) -> None:
        if not (target.url or "").startswith(("https://", "http://")):
            raise ValidationError("target.url", target.url, "a webhook needs an http(s) URL")
        if target.oidc is not None:
            taken = next((h for h in target.headers if h.lower() == "authorization"), None)
            if taken is not None:
                raise ValidationError(
                    "target.headers",
                    taken,
                    "target.oidc sends the Authorization header (its Bearer token): a target "
                    "with an identity token sets no Authorization header of its own",
                )

    def egress_url(self, target: ev.Target) -> str | None:
        return target.url or ""

    def describe(self, target: Mapping[str, Any]) -> str:
        return f"{target.get('method') or 'POST'} {target.get('url')}"

    def call(self, order: ev.DispatchOrder) -> Call | NotCalled:
        target = order.target
        if not target.url:
            return NO_URL
        body, content_type = webhook_body(order)
        method = target.method or "POST"
        return Call(target.url, body, content_type, method, target.timeout_ms / 1000)

    def form(self, fields: Mapping[str, str], tenant: str) -> dict[str, Any]:
        target: dict[str, Any] = {"kind": self.kind.value, "url": fields.get("url", "")}
        if fields.get("secret_ref"):
            target["secret_refs"] = [fields["secret_ref"]]
        return target
