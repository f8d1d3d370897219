"""The undispatched gauges (issue 29 item 9) on the real read models: fires projected by the
projector's own store, read by :func:`~horae.projections.undispatched.reader` (the query over
the ``fires_undispatched`` partial index): a webhook fire due and not attempted counts, per lane
and tenant, until its attempt is projected; sent fires, fires not due yet, fires decided not to
fire and event targets' fires never count."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta

import psycopg
import pytest

from horae.contracts import events as ev
from horae.projections.metrics import ProjectionMetrics
from horae.projections.synthetic import START, attempt, fire
from horae.projections.undispatched import UndispatchedWatch, reader
from tests.integration.api.test_api_postgres import ROUTER, project

NOW = START + timedelta(hours=1)
AGE = "horae_projection_oldest_undispatched_due_age_seconds"
COUNT = "horae_projection_undispatched_due_fires"


@pytest.fixture
def schema(database_url: str, unique: str) -> Iterator[str]:
    name = f"undispatched_{unique}"
    yield name
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def test_a_fire_due_and_not_attempted_counts_until_its_attempt(
    database_url: str, schema: str
) -> None:
    stuck = fire("acme", "nightly", NOW - timedelta(minutes=5))
    younger = fire("acme", "nightly", NOW - timedelta(minutes=1))
    catch_up = replace(fire("acme", "hourly", NOW - timedelta(minutes=2)), lane=ev.Lane.CATCH_UP)
    sent = fire("acme", "sent", NOW - timedelta(minutes=30))
    theirs = fire("globex", "nightly", NOW - timedelta(seconds=20))
    ahead = fire("acme", "nightly", NOW + timedelta(minutes=5))
    skipped = fire("acme", "skips", NOW - timedelta(minutes=9), ev.FireState.SKIPPED)
    event = replace(
        fire("acme", "events", NOW - timedelta(minutes=9)), target_kind=ev.TargetKind.EVENT
    )
    records = [stuck, younger, catch_up, sent, theirs, ahead, skipped, event]
    outs = [ROUTER.emit(f, 0) for f in records]
    outs.append(ROUTER.emit(attempt(sent, 1, timedelta(milliseconds=30)), 0))
    project(database_url, schema, outs)
    m = ProjectionMetrics()
    watch = UndispatchedWatch(reader(database_url, schema), m, schema, clock=lambda: NOW)
    watch.refresh()

    def sample(name: str, **labels: str) -> float | None:
        return m.registry.get_sample_value(name, {"schema": schema, **labels})

    assert sample(AGE, lane="on_time", tenant="acme") == 300.0
    assert sample(COUNT, lane="on_time", tenant="acme") == 2
    assert sample(AGE, lane="catch_up", tenant="acme") == 120.0
    assert sample(AGE, lane="on_time", tenant="globex") == 20.0
    assert sample("horae_projection_lane_queue_depth", lane="on_time") == 3
    assert sample("horae_projection_lane_queue_depth", lane="catch_up") == 1
    # the same records again (dropped: their offsets are stored), then the stuck fire's attempt
    project(database_url, schema, [*outs, ROUTER.emit(attempt(stuck, 1, timedelta(minutes=5)), 0)])
    watch.refresh()
    assert sample(AGE, lane="on_time", tenant="acme") == 60.0
    assert sample(COUNT, lane="on_time", tenant="acme") == 1
