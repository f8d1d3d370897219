"""The list route's TriggerOut, rendered by PostgreSQL (``queries/api_triggers_page.sql``), is the
JSON a decoded definition gives (:func:`horae.api.render.stored_body`), field for field: instants
with and without microseconds, binary payloads, every recurrence kind, rows projected before a
field existed (the defaults fill them), every state and the filters."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from horae.api.adapters import PostgresHistory
from horae.api.ports import ListedTrigger, StoredTrigger
from horae.api.render import stored_body
from horae.contracts import events as ev
from tests.integration.api.test_api_postgres import ROUTER, project
from tests.unit.api.test_render import cases

T = datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)


@pytest.fixture
def schema(database_url: str, unique: str) -> Iterator[str]:
    name = f"api_list_{unique}"
    yield name
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def _definitions() -> list[ev.TriggerDefinition]:
    out = []
    for i, d in enumerate(cases()):
        at = T + timedelta(seconds=i) if i % 2 else T.replace(microsecond=0)
        out.append(replace(d, tenant="acme", trigger_id=f"t{i}", authored_at=at))
    return out


def _page(history: PostgresHistory, **kw: object) -> list[ListedTrigger]:
    args: dict[str, object] = {"limit": 100, "cursor": None, "label": None, "state": None} | kw
    return list(history.triggers("acme", **args).items)  # type: ignore[arg-type]


def test_postgres_renders_the_trigger_out_of_the_decoded_definition(
    database_url: str, schema: str
) -> None:
    defs = _definitions()
    first = replace(defs[1], version=0, authored_at=T - timedelta(days=2))  # an earlier version
    project(database_url, schema, [ROUTER.emit(d, 0) for d in [first, *defs]])
    history = PostgresHistory(database_url, schema, max_size=1)
    try:
        every = {i.trigger_id: i for i in _page(history, state=None)}
        every |= {i.trigger_id: i for i in _page(history, state="deleted")}
        assert sorted(every) == sorted(d.trigger_id for d in defs)
        for d in defs:
            created = first.authored_at if d.trigger_id == first.trigger_id else d.authored_at
            item = every[d.trigger_id]
            assert json.loads(item.body) == stored_body(StoredTrigger(d, created, d.authored_at))
            assert (item.version, item.state, item.labels) == (d.version, d.state, d.labels)
            assert item.recurrence == d.recurrence
        with psycopg.connect(database_url, autocommit=True) as conn:  # a row of an older release
            conn.execute(
                f'UPDATE "{schema}".trigger_versions SET recurrence = recurrence - %s, '
                "policies = (policies - 'misfire_grace_s') #- '{retry,multiplier}', "
                "target = target - 'body'",
                ("count",),
            )
        for d in defs:
            item = next(
                i for i in _page(history, state=d.state.value) if i.trigger_id == d.trigger_id
            )
            body = json.loads(item.body)
            expected = stored_body(StoredTrigger(d, d.authored_at, d.authored_at))
            expected["created_at"] = body["created_at"]  # checked above
            if d.recurrence.count is not None:
                expected["recurrence"]["count"] = None  # the old row never had one
            assert body == expected
        labelled = _page(history, label=("env", "prod"), limit=1)
        assert [i.trigger_id for i in labelled] == ["t0"]
    finally:
        history.close()
