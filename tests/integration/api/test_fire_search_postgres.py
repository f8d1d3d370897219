"""The fire search's contract (:mod:`tests.unit.api.fire_search_contract`) on the real read
models: the seeded fires projected by the projector's own store (decisions, attempts, outcomes,
definitions with their labels), read through :class:`~horae.api.adapters.PostgresHistory`; and
the search's plans use the indexes migration 0006 adds."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from horae.api.adapters import PostgresHistory
from horae.contracts import events as ev
from horae.ports import Emit
from horae.projections.sqlfiles import sql
from horae.projections.synthetic import attempt, definition, fire, outcome
from tests.integration.api.test_api_postgres import ROUTER, project
from tests.unit.api.fire_search_contract import END, FIRES, LABELS, START, FireSearchContract


def seeded_outs() -> list[Emit]:
    outs = [
        ROUTER.emit(replace(definition(tenant, trigger_id), labels=labels), 0)
        for (tenant, trigger_id), labels in LABELS.items()
    ]
    for f in FIRES:
        state = ev.FireState.SKIPPED if f.status == "skipped" else ev.FireState.FIRED
        record = fire(f.tenant, f.trigger_id, f.at, state)
        outs.append(ROUTER.emit(record, 0))
        if f.status in ("succeeded", "exhausted"):
            a = attempt(record, 1, timedelta(milliseconds=50), ok=f.status == "succeeded")
            outs += [ROUTER.emit(a, 0), ROUTER.emit(outcome(record, [a]), 0)]
    return outs


@pytest.fixture
def schema(database_url: str, unique: str) -> Iterator[str]:
    name = f"search_{unique}"
    yield name
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


class TestPostgresSearch(FireSearchContract):
    @pytest.fixture
    def searched(self, database_url: str, schema: str) -> Iterator[PostgresHistory]:
        project(database_url, schema, seeded_outs())
        history = PostgresHistory(database_url, schema, max_size=2)
        try:
            yield history
        finally:
            history.close()


def plan(conn: psycopg.Connection[Any], name: str, params: dict[str, Any]) -> str:
    rows = conn.execute(f"EXPLAIN {sql(name)}", params).fetchall()
    return "\n".join(r[0] for r in rows)


def test_the_search_reads_its_indexes(database_url: str, schema: str) -> None:
    """With sequential scans priced out (a small table would be scanned whole), each search
    statement takes its page's keys from an index-only range in key order (no sort of the
    tenant's fires: the one sort is the page's own, after its rows are read)."""
    project(database_url, schema, seeded_outs())
    params = {"tenant": "acme", "since": START, "until": END, "trigger_ids": None,
              "after_at": None, "after_key": None, "limit": 101}  # fmt: skip
    with psycopg.connect(database_url) as conn:
        conn.execute(f'SET search_path TO "{schema}"')
        conn.execute("SET enable_seqscan TO off")
        by_time = plan(conn, "queries/fires_search", params)
        assert "Index Only Scan using fires_tenant_scheduled" in by_time, by_time
        assert by_time.count("Sort Key") == 1, by_time
        by_state = plan(conn, "queries/fires_search_states", {**params, "states": ["failed"]})
        assert "Index Only Scan using fires_tenant_status" in by_state, by_state
        labelled = {**params, "states": ["failed"], "trigger_ids": ["nightly"]}
        assert "fires_tenant_status" in plan(conn, "queries/fires_search_states", labelled)
        late = plan(conn, "queries/undispatched", {"now": END})
        assert "fires_undispatched" in late, late
