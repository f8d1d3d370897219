"""The event deliverer: a ``schedule.triggered`` event on one of the tenant's own topics.

Ingress wants a topic inside the tenant's namespace (``events.<token>`` or
``events.<token>.<suffix>``); nothing is signed and no call leaves Horae (no secrets, no SSRF
surface); the planner writes the event itself, in the transaction of the fire record, so the
delivery is exactly-once into Kafka and nothing stays in flight.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from horae.contracts import events as ev
from horae.contracts.topics import event_topic_problem, tenant_token
from horae.delivery.port import Deliverer, HandOver
from horae.domain.errors import ValidationError


class EventDeliverer(Deliverer):
    kind = ev.TargetKind.EVENT
    hand_over = HandOver.TOPIC
    signed = False
    label = "event on the tenant's topic"

    def validate(self, tenant: str, target: ev.Target) -> None:
        if not target.topic:
            raise ValidationError("target.topic", target.topic, "an event target needs a topic")
        if problem := event_topic_problem(tenant, target.topic):
            raise ValidationError("target.topic", target.topic, problem)
        if target.oidc is not None:
            raise ValidationError(
                "target.oidc",
                "set",
                "an event target makes no HTTP call, so it carries no identity token "
                "(target.oidc is for webhook targets)",
            )

    def egress_url(self, target: ev.Target) -> str | None:
        return None

    def describe(self, target: Mapping[str, Any]) -> str:
        return f"event {target.get('topic')}"

    def form(self, fields: Mapping[str, str], tenant: str) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "topic": fields.get("topic") or f"events.{tenant_token(tenant)}",
        }
