"""Where each event goes: the one routing table (event type → topic, key) and the records built
from it.

Every process that produces an event builds its :class:`~horae.ports.Emit` through a
:class:`Router`, so the topic and key of an event type are written once, here. A dispatch order
goes to its lane's topic; a caller may name another topic explicitly (the dispatcher's dead-letter
queue) without changing the key.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from horae.contracts import events as ev
from horae.contracts.codec import encode
from horae.contracts.topics import Topic, lane_topic, topic_name
from horae.ports import Emit, Headers


class Route(NamedTuple):
    """``topic`` None: the event's lane topic (dispatch orders). ``by_key``: the partition is
    always the producer's pick by key (the record is not trigger-partitioned)."""

    topic: Topic | None
    key: Callable[[Any], str]
    by_key: bool = False


def _trigger(e: Any) -> str:
    return ev.trigger_key(e.tenant, e.trigger_id)


#: event type → topic, key (and whether it is partitioned by key only)
ROUTES: dict[type[ev.Event], Route] = {
    ev.TriggerDefinition: Route(Topic.ACCEPTED, _trigger),
    ev.PlannerState: Route(Topic.PLANNER_STATE, _trigger),
    ev.FireRecord: Route(Topic.FIRES, lambda e: e.fire_key),
    ev.DispatchOrder: Route(None, lambda e: e.fire.fire_key),
    ev.Attempt: Route(Topic.ATTEMPTS, lambda e: e.fire_key),
    ev.WorkOutcome: Route(Topic.OUTCOMES, lambda e: e.fire_key),
    ev.ScheduleEvent: Route(Topic.SCHEDULE_EVENTS, _trigger),
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

    def emit(
        self,
        event: ev.Event,
        partition: int | None,
        *,
        topic: Topic | None = None,
        headers: Headers | None = None,
    ) -> Emit:
        """The record of ``event`` on ``partition`` (None: by key); ``topic`` overrides the
        table's. Raises ``KeyError`` for a type the table does not route."""
        route = ROUTES[type(event)]
        if topic is None:
            topic = route.topic or lane_topic(event.lane)  # type: ignore[union-attr, arg-type]
        return Emit(
            self.names[topic],
            route.key(event).encode(),
            encode(event),
            None if route.by_key else partition,
            headers,
            event,
        )
