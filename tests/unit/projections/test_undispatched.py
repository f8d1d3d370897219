"""The undispatched gauges (issue 29 item 9) from rows as the read model's query gives them, on
a virtual clock: the oldest age and count per lane and tenant, the depth of every lane, and a
(lane, tenant) whose fires were sent set back to 0."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from horae.projections.metrics import ProjectionMetrics
from horae.projections.undispatched import UndispatchedWatch

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def value(m: ProjectionMetrics, name: str, **labels: str) -> float | None:
    return m.registry.get_sample_value(name, {"schema": "horae", **labels})


AGE = "horae_projection_oldest_undispatched_due_age_seconds"
COUNT = "horae_projection_undispatched_due_fires"
DEPTH = "horae_projection_lane_queue_depth"


def test_the_gauges_follow_the_rows_and_clear() -> None:
    def row(lane: str, tenant: str, fires: int, waited: timedelta) -> dict[str, Any]:
        return {"lane": lane, "tenant": tenant, "fires": fires, "oldest_due_at": NOW - waited}

    rows = [
        row("on_time", "acme", 3, timedelta(minutes=5)),
        row("on_time", "globex", 1, timedelta(0)),
        row("catch_up", "acme", 2, timedelta(seconds=30)),
    ]
    asked: list[datetime] = []

    def read(now: datetime) -> list[dict[str, Any]]:
        asked.append(now)
        return list(rows)

    m = ProjectionMetrics()
    clock = [NOW + timedelta(seconds=10)]
    watch = UndispatchedWatch(read, m, "horae", clock=lambda: clock[0])
    watch.refresh()
    assert asked == [clock[0]]
    assert value(m, AGE, lane="on_time", tenant="acme") == 310.0
    assert value(m, AGE, lane="on_time", tenant="globex") == 10.0
    assert value(m, AGE, lane="catch_up", tenant="acme") == 40.0
    assert value(m, COUNT, lane="on_time", tenant="acme") == 3
    assert value(m, DEPTH, lane="on_time") == 4 and value(m, DEPTH, lane="catch_up") == 2
    assert value(m, DEPTH, lane="retry") == 0 and value(m, DEPTH, lane="backfill") == 0
    del rows[1:]  # globex's fire and acme's catch-up were sent
    clock[0] += timedelta(seconds=15)
    watch.refresh()
    assert value(m, AGE, lane="on_time", tenant="acme") == 325.0
    assert value(m, AGE, lane="on_time", tenant="globex") == 0.0
    assert value(m, COUNT, lane="catch_up", tenant="acme") == 0
    assert value(m, DEPTH, lane="on_time") == 3 and value(m, DEPTH, lane="catch_up") == 0


def test_a_database_error_keeps_the_last_values_and_the_loop_goes_on() -> None:
    import threading

    calls: list[int] = []
    stop = threading.Event()

    def read(now: datetime) -> list[dict[str, Any]]:
        calls.append(1)
        if len(calls) == 1:
            raise psycopg.OperationalError("connection refused")
        stop.set()
        return [{"lane": None, "tenant": "acme", "fires": 1, "oldest_due_at": NOW}]

    m = ProjectionMetrics()
    UndispatchedWatch(read, m, "horae", clock=lambda: NOW, every_s=0.0).run(stop)
    assert len(calls) == 2
    assert value(m, COUNT, lane="none", tenant="acme") == 1
