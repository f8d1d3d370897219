"""The dead letters read model on PostgreSQL: DLQ records projected by the projector's own mapper
and store, read through :class:`~horae.api.adapters.PostgresHistory` — every filter, keyset
pages, the ``redriven`` state from a redrive's audit entry, another tenant's rows never
returned whatever the ids or the selector name, and the list's plan on its index."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from horae.api.adapters import PostgresHistory
from horae.contracts import events as ev
from horae.contracts.codec import default_codec
from horae.contracts.topics import Topic, topic_name
from horae.projections.rows import PROJECTED, Batch, RecordMapper
from horae.projections.sqlfiles import sql
from horae.projections.store import ProjectionStore
from horae.projections.synthetic import START, definition, fire
from horae.streams.dispatcher.conclude import H_DLQ_CAUSE
from horae.streams.dispatcher.records import H_REDRIVE
from tests.integration.api.test_api_postgres import PREFIX, ROUTER

DLQ = topic_name(Topic.DLQ, PREFIX)
AUDIT = topic_name(Topic.AUDIT, PREFIX)


def dead(tenant: str, trigger_id: str, minutes: int) -> ev.DispatchOrder:
    f = fire(tenant, trigger_id, START + timedelta(minutes=minutes))
    return ev.DispatchOrder(
        fire=f,
        target=ev.Target(kind=ev.TargetKind.WEBHOOK, url="https://hooks.example/x"),
        lane=ev.Lane.ON_TIME,
        attempt=2,
        not_before=f.due_at,
    )


@pytest.fixture
def history(database_url: str, unique: str) -> Iterator[PostgresHistory]:
    schema = f"dlq_{unique}"
    codec = default_codec()
    mapper = RecordMapper(codec, {topic_name(t, PREFIX): t for t in PROJECTED})
    batch = Batch()
    defs = [
        replace(definition("acme", "a1"), labels={"env": "prod"}),
        replace(definition("acme", "a2"), labels={"env": "dev"}),
        replace(definition("globex", "g1"), labels={"env": "prod"}),
    ]
    for i, d in enumerate(defs):
        e = ROUTER.emit(d, 0)
        mapper.add(batch, e.topic, 0, i, e.key, e.value, 0)
    records = [
        (dead("acme", "a1", 1), "exhausted: HTTP 503", None),
        (dead("acme", "a2", 2), "failed: HTTP 410", None),
        (dead("globex", "g1", 3), "exhausted: HTTP 503", None),
        (dead("acme", "a1", 1), "exhausted: HTTP 503", f"{DLQ}:0:0"),  # a redrive of the first
    ]
    for offset, (o, cause, of) in enumerate(records):
        headers = [(H_DLQ_CAUSE, cause.encode())] + ([(H_REDRIVE, of.encode())] if of else [])
        ts = int((START + timedelta(hours=1, minutes=offset)).timestamp() * 1000)
        mapper.add(batch, DLQ, 0, offset, o.fire.fire_key.encode(), codec.encode(o), ts, headers)
    redriven = ev.AuditEntry(
        audit_id="r-1",
        tenant="acme",
        principal="alice",
        role=ev.Role.AUTHOR,
        action="dlq.redrive",
        at=START + timedelta(hours=2),
        allowed=True,
        trigger_id="a1",
        detail={"dlq": f"{DLQ}:0:0"},
    )
    e = ROUTER.emit(redriven, 0)
    mapper.add(batch, e.topic, 0, 0, e.key, e.value, 0)
    store = ProjectionStore(database_url, schema)
    try:
        stages = {s: topic_name(t, PREFIX) for t, (_, s) in PROJECTED.items()}
        result = store.apply(batch, stages)
        assert not result.set_aside
    finally:
        store.close()
    found = PostgresHistory(database_url, schema, max_size=2)
    try:
        yield found
    finally:
        found.close()
        with psycopg.connect(database_url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def ids(history: PostgresHistory, tenant: str = "acme", **asked: Any) -> list[str]:
    params: dict[str, Any] = dict(
        ids=None,
        trigger_id=None,
        labels=None,
        since=None,
        until=None,
        cause=None,
        state=None,
        limit=100,
        cursor=None,
    )
    params.update(asked)
    return [r["dlq_id"] for r in history.dead_letters(tenant, **params).items]


def test_filters_state_and_pages(history: PostgresHistory) -> None:
    assert ids(history) == ["0-0", "0-1", "0-3"]
    assert ids(history, trigger_id="a1") == ["0-0", "0-3"]
    assert ids(history, labels={"env": "dev"}) == ["0-1"]
    assert ids(history, cause="410") == ["0-1"]
    assert ids(history, state="redriven") == ["0-0"]
    assert ids(history, state="dead") == ["0-1", "0-3"]
    assert ids(history, since=START + timedelta(hours=1, minutes=1)) == ["0-1", "0-3"]
    assert ids(history, until=START + timedelta(hours=1, minutes=1)) == ["0-0"]
    first = history.dead_letters(
        "acme",
        ids=None,
        trigger_id=None,
        labels=None,
        since=None,
        until=None,
        cause=None,
        state=None,
        limit=2,
        cursor=None,
    )
    assert [r["dlq_id"] for r in first.items] == ["0-0", "0-1"] and first.next_cursor
    assert ids(history, limit=2, cursor=first.next_cursor) == ["0-3"]
    rows = {
        r["dlq_id"]: r
        for r in history.dead_letters(
            "acme",
            ids=["0-0", "0-3"],
            trigger_id=None,
            labels=None,
            since=None,
            until=None,
            cause=None,
            state=None,
            limit=10,
            cursor=None,
        ).items
    }
    assert rows["0-0"]["redriven_by"] == "alice" and rows["0-0"]["cause"] == "exhausted: HTTP 503"
    assert rows["0-3"]["redrive_of"] == f"{DLQ}:0:0" and rows["0-3"]["redriven_at"] is None
    order = default_codec().decode(bytes(rows["0-0"]["record"]), ev.DispatchOrder)
    assert order == dead("acme", "a1", 1)


def test_another_tenants_rows_are_never_returned(history: PostgresHistory) -> None:
    assert ids(history, "globex") == ["0-2"]
    assert ids(history, "globex", ids=["0-0", "0-1", "0-3"]) == []
    assert ids(history, "globex", trigger_id="a1") == []
    assert ids(history, "globex", labels={"env": "dev"}) == []
    assert ids(history, "globex", state="redriven") == []  # acme's redrive is acme's
    assert ids(history, "acme", ids=["0-2"]) == []
    assert ids(history, "nobody") == []


def test_the_list_reads_its_index(database_url: str, history: PostgresHistory) -> None:
    params = {
        "tenant": "acme",
        "ids": None,
        "trigger_ids": None,
        "since": None,
        "until": None,
        "cause": None,
        "state": None,
        "after_at": None,
        "after_key": None,
        "limit": 101,
    }
    with psycopg.connect(database_url) as conn:
        conn.execute(f'SET search_path TO "{history.queries.schema}"')
        conn.execute("SET enable_seqscan TO off")
        plan = "\n".join(
            r[0] for r in conn.execute(f"EXPLAIN {sql('queries/dead_letters_page')}", params)
        )
    assert "dead_letters_tenant_dead" in plan, plan
    assert "audit_entries_redrive" in plan, plan
