"""The alert that catches a silent scheduler: how long the oldest webhook fire that is due,
decided (``fired``) and not yet attempted has waited, per lane and tenant, read from the read
models by the projector (:class:`UndispatchedWatch`).

The planner's ``horae_planner_oldest_undecided_due_age_seconds`` catches instants nobody
decides; this catches fires decided and never sent: a dispatcher that is down, stuck, fenced,
cut off from its lane partitions, or holding a tenant back. The dispatcher cannot report its
own silence, and the planner never learns whether a fire was sent, so the read models — where
the planner's fire records and the dispatcher's attempts meet — are where it can be seen.

Gauges (on the projector's registry, :class:`~horae.projections.metrics.ProjectionMetrics`):

- ``horae_projection_oldest_undispatched_due_age_seconds{schema,lane,tenant}``: now minus the
  oldest due time (scheduled instant plus jitter) of those fires; 0 once none is left;
- ``horae_projection_undispatched_due_fires{schema,lane,tenant}``: how many there are;
- ``horae_projection_lane_queue_depth{schema,lane}``: the same, per lane (every lane shown,
  0 when empty).

What it does not see, said plainly: a fire's first attempt is projected when that attempt has
ended, so a fire whose first call is still running counts as not attempted until then (at most
the target's timeout); the figures lag the projector (``horae_projection_lag_seconds``: alert
on both, a lagging projector makes fires look undispatched); an event target's fires are never
attempted (their event is committed with the decision) and are left out; a stopped projector
stops refreshing them (its scrape fails: alert on ``up`` too). The read is one statement every
:data:`EVERY_S` over the ``fires_undispatched`` partial index (only the fires decided and not
yet attempted), in its own connection, beside the projector's loop.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import psycopg

from horae.contracts import events as ev
from horae.projections.metrics import ProjectionMetrics
from horae.projections.queries import HistoryQueries

EVERY_S = 15.0  # how often the gauges are read again
NO_LANE = "none"  # the lane label of a fire recorded without one

log = logging.getLogger(__name__)

Read = Callable[[datetime], list[dict[str, Any]]]


def reader(database_url: str, schema: str) -> Read:
    """The undispatched rows at ``now`` (:meth:`HistoryQueries.undispatched`), each read in a
    connection of its own (one statement every :data:`EVERY_S`: nothing to pool)."""

    def read(now: datetime) -> list[dict[str, Any]]:
        with psycopg.connect(database_url, autocommit=True, connect_timeout=10) as conn:
            return HistoryQueries(conn, schema).undispatched(now)

    return read


@dataclass
class UndispatchedWatch:
    """Sets the undispatched gauges from ``read`` (:func:`reader`) at ``clock``'s time:
    :meth:`refresh` once, :meth:`run` every ``every_s`` until stopped. A (lane, tenant) shown
    before and absent now is set to 0, so an alert clears when the fires are sent."""

    read: Read
    metrics: ProjectionMetrics
    schema: str
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)
    every_s: float = EVERY_S
    _shown: set[tuple[str, str]] = field(default_factory=set)

    def refresh(self) -> None:
        now = self.clock()
        m, schema = self.metrics, self.schema
        seen: set[tuple[str, str]] = set()
        lanes = dict.fromkeys((lane.value for lane in ev.Lane), 0)
        for row in self.read(now):
            lane, tenant = row["lane"] or NO_LANE, row["tenant"]
            age = max(0.0, (now - row["oldest_due_at"]).total_seconds())
            m.undispatched_age.labels(schema, lane, tenant).set(age)
            m.undispatched.labels(schema, lane, tenant).set(row["fires"])
            lanes[lane] = lanes.get(lane, 0) + int(row["fires"])
            seen.add((lane, tenant))
        for lane, tenant in self._shown - seen:
            m.undispatched_age.labels(schema, lane, tenant).set(0.0)
            m.undispatched.labels(schema, lane, tenant).set(0)
        for lane, n in lanes.items():
            m.lane_queue_depth.labels(schema, lane).set(n)
        self._shown = seen

    def run(self, stop: threading.Event) -> None:
        """Refresh now and every ``every_s`` until ``stop``; a database error is logged and
        the gauges keep their last values until the next refresh succeeds."""
        while True:
            try:
                self.refresh()
            except psycopg.Error as exc:
                log.warning("undispatched gauges not refreshed: %s", str(exc).strip())
            if stop.wait(self.every_s):
                return

    def start(self, stop: threading.Event) -> threading.Thread:
        thread = threading.Thread(
            target=self.run, args=(stop,), name="undispatched-gauges", daemon=True
        )
        thread.start()
        return thread
