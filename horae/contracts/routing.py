"""Where each event goes: the one routing table (event type → topic, key) and the records built
from it.

Every process that produces an event builds its :class:`~horae.ports.Emit` through a
:class:`Router`, so the topic and key of an event type are written once, here. A dispatch order
goes to its lane's topic; a schedule event to its tenant's own events topic
(:func:`~horae.contracts.topics.events_topic`), or to the topic its event target names when that
lies in the tenant's namespace (:meth:`Router.target_topic`); a caller may name another topic
explicitly (the dispatcher's dead-letter queue) without changing the key.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from horae.contracts import events as ev
from horae.contracts.codec import encode
from horae.contracts.topics import (
    Topic,
    event_topic_problem,
    events_topic,
    lane_topic,
    topic_name,
)
from horae.delivery.port import HandOver
from horae.delivery.table import deliverer
from horae.ports import Emit, Headers


class Route(NamedTuple):
    """``topic`` None: the event's lane topic (dispatch orders). ``by_key``: the partition is
    always the producer's pick by key (the record is not trigger-partitioned). ``per_tenant``:
    the topic is the event's tenant's own (``<prefix>events.<token>``)."""

    topic: Topic | None
    key: Callable[[Any], str]
    by_key: bool = False
    per_tenant: bool = False


def _trigger(e: Any) -> str:
    return ev.trigger_key(e.tenant, e.trigger_id)


#: event type → topic, key (and whether it is partitioned by key only)
ROUTES: dict[type[ev.Event], Route] = {
    ev.TriggerDefinition: Route(Topic.ACCEPTED, _trigger),
    ev.Command: Route(Topic.COMMANDS, _trigger),
    ev.PlannerState: Route(Topic.PLANNER_STATE, _trigger),
    ev.FireRecord: Route(Topic.FIRES, lambda e: e.fire_key),
    ev.DispatchOrder: Route(None, lambda e: e.fire.fire_key),
    ev.Attempt: Route(Topic.ATTEMPTS, lambda e: e.fire_key),
    ev.WorkOutcome: Route(Topic.OUTCOMES, lambda e: e.fire_key),
    ev.ScheduleEvent: Route(Topic.SCHEDULE_EVENTS, _trigger, per_tenant=True),
    ev.Quarantined: Route(
        Topic.QUARANTINE, lambda e: (e.original_key or b"").decode(errors="replace")
    ),
    ev.AuditEntry: Route(Topic.AUDIT, lambda e: e.tenant, by_key=True),
}


class Router:
    """Builds the :class:`~horae.ports.Emit` of an event under one topic prefix."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.names: dict[Topic, str] = {t: topic_name(t, prefix) for t in Topic}
        self._tenant_topics: dict[str, str] = {}
        self._target_topics: dict[tuple[str, str | None], str] = {}

    def events_topic(self, tenant: str) -> str:
        """The full name of ``tenant``'s events topic."""
        name = self._tenant_topics.get(tenant)
        if name is None:
            name = self._tenant_topics[tenant] = events_topic(tenant, self.prefix)
        return name

    def target_topic(self, d: ev.TriggerDefinition) -> str:
        """Where the ``schedule.triggered`` events of event target ``d`` go: the topic it names
        when that lies in its tenant's namespace (ingress refuses any other), else the tenant's
        events topic (a definition accepted before the namespace rule)."""
        key = (d.tenant, d.target.topic)
        name = self._target_topics.get(key)
        if name is None:
            topic = d.target.topic or ""
            inside = event_topic_problem(d.tenant, topic) is None
            name = self.prefix + topic if inside else self.events_topic(d.tenant)
            self._target_topics[key] = name
        return name

    def topics_of(self, d: ev.TriggerDefinition) -> list[str]:
        """The events topics the triggers of ``d`` produce into (to exist before they do)."""
        names = [self.events_topic(d.tenant)]
        topic = deliverer(d.target.kind).hand_over is HandOver.TOPIC
        if topic and self.target_topic(d) != names[0]:
            names.append(self.target_topic(d))
        return names

    def emit(
        self,
        event: ev.Event,
        partition: int | None,
        *,
        topic: Topic | None = None,
        headers: Headers | None = None,
        to: str | None = None,
        value: bytes | None = None,
    ) -> Emit:
        """The record of ``event`` on ``partition`` (None: by key); ``topic`` (a catalogue
        topic) or ``to`` (a full topic name) overrides the table's; ``value``: the event's wire
        encoding when the caller has it (None: encoded here). Raises ``KeyError`` for a type the
        table does not route."""
        route = ROUTES[type(event)]
        if to is None:
            if topic is not None:
                to = self.names[topic]
            elif route.per_tenant:
                to = self.events_topic(event.tenant)  # type: ignore[union-attr, arg-type]
            else:
                to = self.names[route.topic or lane_topic(event.lane)]  # type: ignore[union-attr, arg-type]
        return Emit(
            to,
            route.key(event).encode(),
            encode(event) if value is None else value,
            None if route.by_key else partition,
            headers,
            event,
        )
