"""The batch transaction's cost grows with the batch, not with its square: each merge statement
runs under ``EXPLAIN (ANALYZE)`` on a batch and on one four times larger, and the rows its plan
nodes touch (rows out, rows a filter or join filter removed, times the node's loops) must grow
about four times too; the statements per batch stay the same. The outcomes merge once joined two
sets derived from the batch, which PostgreSQL estimated at one row each and joined in a loop:
4.3 million rows removed by a join filter for a batch of 2,938 outcomes."""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest

from horae.projections import store as store_mod
from horae.projections.sqlfiles import sql
from horae.projections.store import ProjectionStore
from horae.projections.synthetic import history
from tests.integration.projections.test_projection_store import STAGE_TOPICS, Log, batch_of

PREFIX = "p."
SMALL = 600


def touched(node: dict[str, Any]) -> float:
    """Rows a plan node and its children produced or filtered out, times their loops."""
    own = (
        node.get("Actual Rows", 0)
        + node.get("Rows Removed by Filter", 0)
        + node.get("Rows Removed by Join Filter", 0)
    ) * node.get("Actual Loops", 1)
    return float(own + sum(touched(child) for child in node.get("Plans", [])))


def merge_costs(
    database_url: str, schema: str, fires: int, monkeypatch: pytest.MonkeyPatch
) -> tuple[dict[str, float], int]:
    """Per merge statement, the rows its plan touched applying ``fires`` fires of history (60 %
    dispatched) in one batch; and the statements the batch ran."""
    plans: dict[str, float] = {}
    statements = [0]

    def explained(name: str) -> str:
        text = sql(name)
        if not name.startswith("merge/") or name in ("merge/lock_offsets", "merge/offsets"):
            return text
        plans[name] = -1.0
        return f"EXPLAIN (ANALYZE, FORMAT JSON) {text}"

    monkeypatch.setattr(store_mod, "sql", explained)
    store = ProjectionStore(database_url, schema)
    store.connect()
    execute = psycopg.Cursor.execute

    def counted(cur: psycopg.Cursor[Any], query: Any, *args: Any, **kw: Any) -> Any:
        statements[0] += 1
        out = execute(cur, query, *args, **kw)
        if isinstance(query, str) and query.startswith("EXPLAIN"):
            name = next(n for n, v in plans.items() if v < 0)
            plan = cur.fetchone()
            assert plan is not None
            doc = plan[0] if isinstance(plan[0], list) else json.loads(plan[0])
            plans[name] = touched(doc[0]["Plan"])
        return out

    monkeypatch.setattr(psycopg.Cursor, "execute", counted)
    try:
        log = Log()
        recs = [
            log.append(o)
            for o in history(fires, 3, 50, dispatch_share=0.6, prefix=PREFIX, partitions=1)
        ]
        statements[0] = 0
        store.apply(batch_of(recs), STAGE_TOPICS)
    finally:
        monkeypatch.setattr(psycopg.Cursor, "execute", execute)
        store.close()
    return plans, statements[0]


def test_merges_grow_with_the_batch_not_its_square(
    database_url: str, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    small, n_small = merge_costs(database_url, schema, SMALL, monkeypatch)
    large, n_large = merge_costs(database_url, f"{schema}_shadow", 4 * SMALL, monkeypatch)
    assert n_small == n_large, "statements per batch grew with the batch"
    assert set(small) == set(large) and "merge/outcomes" in small
    for name, rows in small.items():
        assert large[name] <= 6 * max(rows, 1.0) + 100, (name, rows, large[name])
