"""History queries on projected rows: windows, state filters, cursor pagination, one fire with its
attempts and outcome, lateness percentiles, triggers of a tenant, tenant isolation."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from horae.contracts import events as ev
from horae.contracts.codec import default_codec
from horae.contracts.routing import Router
from horae.contracts.topics import topic_name
from horae.ports import Emit
from horae.projections.queries import BadCursor, HistoryQueries
from horae.projections.rows import PROJECTED, Batch, RecordMapper
from horae.projections.store import ProjectionStore
from horae.projections.synthetic import START, attempt, definition, fire, outcome

PREFIX = "q."
ROUTER = Router(PREFIX)


def project(database_url: str, schema: str, outs: list[Emit]) -> None:
    mapper = RecordMapper(default_codec(), {topic_name(t, PREFIX): t for t in PROJECTED})
    batch, offsets = Batch(), dict[str, int]()
    for o in outs:
        offsets[o.topic] = offsets.get(o.topic, -1) + 1
        mapper.add(batch, o.topic, 0, offsets[o.topic], o.key, o.value, 0)
    store = ProjectionStore(database_url, schema)
    try:
        store.apply(batch, {s: topic_name(t, PREFIX) for t, (_, s) in PROJECTED.items()})
    finally:
        store.close()


@pytest.fixture
def history_rows(database_url: str, schema: str) -> None:
    outs: list[Emit] = []
    for tenant in ("acme", "globex"):
        for trig in ("nightly", "hourly", "gone"):
            outs.append(ROUTER.emit(definition(tenant, trig), 0))
        deleted = definition(tenant, "gone", version=2)
        deleted = replace(deleted, state=ev.DefinitionState.DELETED)
        outs.append(ROUTER.emit(deleted, 0))
    for i in range(50):  # acme/nightly: 50 instants a minute apart; every 10th skipped
        state = ev.FireState.SKIPPED if i % 10 == 0 else ev.FireState.FIRED
        f = fire("acme", "nightly", START + timedelta(minutes=i), state, cause=None)
        outs.append(ROUTER.emit(f, 0))
        if state is ev.FireState.FIRED:
            a = attempt(f, 1, timedelta(milliseconds=10 * (i + 1)))
            outs.append(ROUTER.emit(a, 0))
            outs.append(ROUTER.emit(outcome(f, [a]), 0))
    g = fire("globex", "nightly", START)
    outs.append(ROUTER.emit(g, 0))
    project(database_url, schema, outs)


@pytest.fixture
def queries(database_url: str, schema: str) -> Any:
    with ConnectionPool(database_url, min_size=1, max_size=2, open=True) as pool:
        yield HistoryQueries(pool, schema)


@pytest.mark.usefixtures("history_rows")
def test_fires_window_filters_and_pages(queries: HistoryQueries) -> None:
    since, until = START + timedelta(minutes=5), START + timedelta(minutes=35)
    seen: list[str] = []
    cursor = None
    while True:
        page = queries.fires("acme", "nightly", since, until, limit=7, cursor=cursor)
        seen.extend(r["fire_key"] for r in page.items)
        cursor = page.next_cursor
        if cursor is None:
            break
    assert len(seen) == 30 == len(set(seen))
    skipped = queries.fires("acme", "nightly", since, until, states=["skipped"])
    assert [r["scheduled_at"] for r in skipped.items] == [
        START + timedelta(minutes=m) for m in (10, 20, 30)
    ]
    succeeded = queries.fires("acme", "nightly", since, until, states=["succeeded"])
    assert len(succeeded.items) == 27 and succeeded.next_cursor is None
    assert queries.fires("globex", "nightly", since, until).items == []  # other tenant's window
    with pytest.raises(BadCursor):
        queries.fires("acme", "nightly", since, until, cursor="nonsense!")


@pytest.mark.usefixtures("history_rows")
def test_one_fire_with_attempts_and_outcome(queries: HistoryQueries) -> None:
    f = fire("acme", "nightly", START + timedelta(minutes=1))
    detail = queries.fire("acme", f.fire_key)
    assert detail is not None
    assert detail.fire["status"] == "succeeded" and detail.fire["lateness_ms"] == 20.0
    assert [a["n"] for a in detail.attempts] == [1]
    assert detail.outcome is not None and detail.outcome["state"] == "succeeded"
    assert queries.fire("globex", f.fire_key) is None  # not globex's fire


@pytest.mark.usefixtures("history_rows")
def test_lateness_percentiles(queries: HistoryQueries) -> None:
    since, until = START, START + timedelta(hours=1)
    per_trigger = queries.lateness_by_trigger("acme", since, until)
    assert [(x.trigger_id, x.fires) for x in per_trigger] == [("nightly", 45)]
    lateness = [10.0 * (i + 1) for i in range(50) if i % 10]
    x = per_trigger[0]
    assert x.p50_ms == pytest.approx(sorted(lateness)[22])
    assert x.p50_ms is not None and x.p95_ms is not None and x.p99_ms is not None
    assert x.p50_ms <= x.p95_ms <= x.p99_ms <= max(lateness)
    tenant = queries.lateness("acme", since, until)
    assert (tenant.fires, tenant.p99_ms) == (45, x.p99_ms)
    assert queries.lateness("globex", since, until).fires == 0


@pytest.mark.usefixtures("history_rows")
def test_triggers_of_a_tenant(queries: HistoryQueries, db: psycopg.Connection[Any]) -> None:
    first = queries.triggers("acme", limit=1)
    assert [t["trigger_id"] for t in first.items] == ["hourly"]
    rest = queries.triggers("acme", limit=5, cursor=first.next_cursor)
    assert [t["trigger_id"] for t in rest.items] == ["nightly"]
    every = queries.triggers("acme", include_deleted=True)
    assert {t["trigger_id"]: t["version"] for t in every.items} == {
        "gone": 2, "hourly": 1, "nightly": 1,
    }  # fmt: skip
    assert {t["tenant"] for t in queries.triggers("globex").items} == {"globex"}


def test_an_event_target_reports_its_decision_lateness(
    database_url: str, schema: str, queries: HistoryQueries
) -> None:
    """An event target's fire is never attempted: its lateness is its committed decision's
    (decided_at - due_at), in the fire's row and in the summaries; a skipped one has none."""
    outs: list[Emit] = []
    for i, state in enumerate((ev.FireState.FIRED, ev.FireState.FIRED, ev.FireState.SKIPPED)):
        f = fire(
            "acme", "ping", START + timedelta(minutes=i), state, timedelta(milliseconds=7 * (i + 1))
        )
        outs.append(ROUTER.emit(replace(f, target_kind=ev.TargetKind.EVENT, lane=None), 0))
    project(database_url, schema, outs)
    page = queries.fires("acme", "ping", START, START + timedelta(hours=1))
    assert [r["lateness_ms"] for r in page.items] == [7.0, 14.0, None]
    summary = queries.lateness_summary("acme", START, START + timedelta(hours=1), "ping")
    total = summary[0]
    assert (total["fires"], total["max"], total["missed"]) == (2, 14.0, 1)
    [per] = queries.lateness_by_trigger("acme", START, START + timedelta(hours=1))
    assert (per.trigger_id, per.fires) == ("ping", 2)


@pytest.mark.usefixtures("history_rows")
def test_the_last_fire_of_each_trigger_in_one_statement(queries: HistoryQueries) -> None:
    before = START + timedelta(minutes=30)
    last = queries.last_fires("acme", ["nightly", "hourly", "nobody"], before)
    assert list(last) == ["nightly"]  # the others have no fire
    assert last["nightly"]["scheduled_at"] == START + timedelta(minutes=29)  # before, not at
    assert queries.last_fires("acme", ["nightly"], START) == {}
    latest = queries.last_fires("acme", ["nightly"], START + timedelta(days=1))["nightly"]
    assert latest["scheduled_at"] == START + timedelta(minutes=49)
    assert latest == queries.fires("acme", "nightly", START, START + timedelta(days=1)).items[-1]
    assert queries.last_fires("globex", ["nightly"], before)["nightly"]["tenant"] == "globex"
