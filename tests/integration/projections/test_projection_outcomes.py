"""Every outcome of a fire is kept and the fire shows the authoritative one (a callback's over
the dispatcher's, then the later record), whatever the batching and on replay; an unknown result
shows ``unknown``; attempts, outcomes and events keep their tzdata version; an attempt that never
ran keeps why."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from psycopg_pool import ConnectionPool

from horae.contracts import events as ev
from horae.contracts.codec import default_codec
from horae.contracts.routing import Router
from horae.contracts.topics import Topic, events_topic, topic_name
from horae.projections.queries import HistoryQueries
from horae.projections.rows import PROJECTED, Batch, RecordMapper
from horae.projections.store import ProjectionStore
from horae.projections.synthetic import START, attempt, fire, outcome

PREFIX = "o."
ROUTER = Router(PREFIX)
OUTCOMES = topic_name(Topic.OUTCOMES, PREFIX)
TZ = "2031z"

Placed = tuple[ev.Event, int]  # an event and its offset on its topic (partition 0)


def project(database_url: str, schema: str, placed: list[Placed]) -> None:
    """Project ``placed`` in one batch, each record at its own offset."""
    mapper = RecordMapper(default_codec(), {topic_name(t, PREFIX): t for t in PROJECTED})
    batch = Batch()
    for event, offset in placed:
        e = ROUTER.emit(event, 0)
        mapper.add(batch, e.topic, 0, offset, e.key, e.value, 0)
    store = ProjectionStore(database_url, schema)
    try:
        store.apply(batch, {s: topic_name(t, PREFIX) for t, (_, s) in PROJECTED.items()})
    finally:
        store.close()


@pytest.fixture
def queries(database_url: str, schema: str) -> Iterator[HistoryQueries]:
    with ConnectionPool(database_url, min_size=1, max_size=2, open=True) as pool:
        yield HistoryQueries(pool, schema)


def _story(minute: int) -> tuple[ev.FireRecord, ev.Attempt, ev.WorkOutcome, ev.WorkOutcome]:
    """A fired instant, its attempt, the dispatcher's success and a callback's failure."""
    f = replace(fire("acme", "t", START + timedelta(minutes=minute)), tzdata_version=TZ)
    a = replace(attempt(f, 1, timedelta(milliseconds=5)), tzdata_version=TZ)
    own = replace(outcome(f, [a]), source=ev.OutcomeSource.DISPATCHER, tzdata_version=TZ)
    callback = ev.WorkOutcome(
        fire_key=f.fire_key,
        key_hash=f.key_hash,
        tenant="acme",
        trigger_id="t",
        state=ev.OutcomeState.FAILED,
        attempts=1,
        decided_at=own.decided_at + timedelta(seconds=30),
        error="disk full",
        source=ev.OutcomeSource.CALLBACK,
        tzdata_version=TZ,
    )
    return f, a, own, callback


def _shown(queries: HistoryQueries, f: ev.FireRecord) -> tuple[Any, Any, list[Any]]:
    detail = queries.fire("acme", f.fire_key)
    assert detail is not None and detail.outcome is not None
    return (
        detail.fire["outcome"],
        (detail.outcome["source"], detail.outcome["state"]),
        [(o["source"], o["state"]) for o in detail.outcomes],
    )


def test_a_callback_after_the_dispatchers_success_wins_and_both_are_kept(
    database_url: str, schema: str, queries: HistoryQueries
) -> None:
    f, a, own, callback = _story(0)
    project(database_url, schema, [(f, 0), (a, 0), (own, 0)])
    assert _shown(queries, f) == ("succeeded", ("dispatcher", "succeeded"), [
        ("dispatcher", "succeeded"),
    ])  # fmt: skip
    project(database_url, schema, [(callback, 1)])
    expected = ("failed", ("callback", "failed"), [
        ("dispatcher", "succeeded"), ("callback", "failed"),
    ])  # fmt: skip
    assert _shown(queries, f) == expected
    project(database_url, schema, [(own, 0), (callback, 1)])  # a replay changes nothing
    assert _shown(queries, f) == expected
    detail = queries.fire("acme", f.fire_key)
    assert detail is not None
    assert detail.fire["status"] == "failed" and detail.fire["outcome_source"] == "callback"
    assert detail.fire["attempt_count"] == 1 and detail.fire["tzdata_version"] == TZ
    assert {o["tzdata_version"] for o in detail.outcomes} == {TZ}
    assert [(x["n"], x["tzdata_version"], x["not_sent"]) for x in detail.attempts] == [
        (1, TZ, None)
    ]


def test_the_authoritative_outcome_does_not_depend_on_batching_or_arrival(
    database_url: str, schema: str, queries: HistoryQueries
) -> None:
    f, a, own, callback = _story(1)
    later = replace(callback, state=ev.OutcomeState.SUCCEEDED, error=None)
    # a callback recorded before the dispatcher's own outcome still outranks it; of two
    # callbacks the later record wins; all in one batch, decision last
    project(database_url, schema, [(callback, 3), (own, 4), (later, 5), (a, 0), (f, 0)])
    assert _shown(queries, f) == ("succeeded", ("callback", "succeeded"), [
        ("callback", "failed"), ("dispatcher", "succeeded"), ("callback", "succeeded"),
    ])  # fmt: skip
    g, b, own_g, callback_g = _story(2)
    for placed in ([(g, 1)], [(callback_g, 6)], [(own_g, 7)], [(b, 1)]):  # one batch each
        project(database_url, schema, placed)
    assert _shown(queries, g)[:2] == ("failed", ("callback", "failed"))


def test_an_unknown_result_and_an_attempt_never_sent_are_visible(
    database_url: str, schema: str, queries: HistoryQueries
) -> None:
    f, a, own, _ = _story(3)
    unknown = replace(own, state=ev.OutcomeState.EXHAUSTED, unknown=True, error="timed out")
    never = replace(
        a,
        transport_result=ev.TransportResult.REFUSED_ADDRESS,
        not_sent=ev.NotSent.NO_SECRET,
        n=2,
    )
    project(database_url, schema, [(f, 2), (a, 2), (never, 3), (unknown, 8)])
    detail = queries.fire("acme", f.fire_key)
    assert detail is not None and detail.outcome is not None
    assert detail.fire["status"] == "unknown" and detail.outcome["state"] == "unknown"
    assert [x["not_sent"] for x in detail.attempts] == [None, "no_secret"]


def test_events_of_a_trigger_with_their_tzdata_version(
    database_url: str, schema: str, queries: HistoryQueries
) -> None:
    at = START + timedelta(minutes=5)
    events = [
        ev.ScheduleEvent(
            event_id=f"e-{n}",
            type=kind,
            tenant="acme",
            trigger_id="t",
            emitted_at=at + timedelta(seconds=n),
            trigger_version=1,
            cause=kind,
            tzdata_version=TZ,
        )
        for n, kind in enumerate(["schedule.paused", "schedule.resumed", "schedule.recomputed"])
    ]
    mapper_topic = events_topic("acme", PREFIX)
    mapper = RecordMapper(default_codec(), {topic_name(t, PREFIX): t for t in PROJECTED})
    batch = Batch()
    for n, e in enumerate(events):
        emit = ROUTER.emit(e, 0)
        mapper.add(batch, mapper_topic, 0, n, emit.key, emit.value, 0)
    store = ProjectionStore(database_url, schema)
    try:
        store.apply(batch, {s: topic_name(t, PREFIX) for t, (_, s) in PROJECTED.items()})
    finally:
        store.close()
    first = queries.events("acme", "t", at, at + timedelta(hours=1), limit=2)
    assert first.next_cursor is not None
    rest = queries.events("acme", "t", at, at + timedelta(hours=1), cursor=first.next_cursor)
    rows = first.items + rest.items
    assert [r["type"] for r in rows] == [e.type for e in events]
    assert {r["tzdata_version"] for r in rows} == {TZ}
    assert queries.events("globex", "t", at, at + timedelta(hours=1)).items == []
