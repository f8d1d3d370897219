"""``horae migrate``: a fresh migration equals sql/schema.sql; migrating twice changes nothing."""

from __future__ import annotations

from typing import Any

import psycopg

from horae.projections import schema as pschema
from horae.projections.sqlfiles import sql

CATALOG_QUERIES = {
    "columns": """
        SELECT table_name, column_name, data_type, is_nullable, column_default,
               is_generated, generation_expression,
               -- the column order; a dropped column leaves a gap in ordinal_position
               row_number() OVER (PARTITION BY table_name ORDER BY ordinal_position)
        FROM information_schema.columns WHERE table_schema = %(s)s
        ORDER BY table_name, ordinal_position""",
    "constraints": """
        SELECT c.conrelid::regclass::text, c.conname, pg_get_constraintdef(c.oid)
        FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace
        WHERE n.nspname = %(s)s ORDER BY 2""",
    "indexes": """
        SELECT tablename, indexname, replace(indexdef, %(s)s || '.', '')
        FROM pg_indexes WHERE schemaname = %(s)s ORDER BY 2""",
    "storage": """
        SELECT c.relname, c.relkind, coalesce(array_to_string(c.reloptions, ','), '')
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = %(s)s ORDER BY 1""",
    "views": """
        SELECT viewname,
               pg_get_viewdef((quote_ident(schemaname) || '.' || quote_ident(viewname))::regclass)
        FROM pg_views WHERE schemaname = %(s)s ORDER BY 1""",
}


def catalog(db: psycopg.Connection[Any], schema: str) -> dict[str, list[tuple[Any, ...]]]:
    out = {}
    for name, query in CATALOG_QUERIES.items():
        rows = db.execute(query, {"s": schema}).fetchall()
        # relation names print qualified only when not on the search_path: strip the schema
        out[name] = [tuple(str(v).replace(f"{schema}.", "") for v in r) for r in rows]
    return out


def test_fresh_migrate_equals_schema_file(db: psycopg.Connection[Any], schema: str) -> None:
    migrated, loaded = schema, f"{schema}_shadow"
    assert pschema.migrate(db, migrated) == [
        "0001_initial",
        "0002_fires_fillfactor",
        "0003_outcomes_tzdata",
        "0004_event_lateness",
        "0005_trigger_runs",
        "0006_fire_search",
        "0007_dead_letters",
    ]
    pschema.load_schema_file(db, loaded)
    got, want = catalog(db, migrated), catalog(db, loaded)
    got["columns"] = [r for r in got["columns"] if r[0] != "schema_migrations"]
    got["constraints"] = [r for r in got["constraints"] if "schema_migrations" not in r[1]]
    got["indexes"] = [r for r in got["indexes"] if r[0] != "schema_migrations"]
    got["storage"] = [r for r in got["storage"] if "schema_migrations" not in r[0]]
    assert got == want
    assert got["columns"], "nothing compared"


def test_migrate_is_idempotent(db: psycopg.Connection[Any], schema: str) -> None:
    assert pschema.migrate(db, schema)[0] == "0001_initial"
    generation = pschema.generation(db, schema)
    assert pschema.migrate(db, schema) == []
    assert pschema.generation(db, schema) == generation


def test_outcomes_projected_before_0003_are_kept_and_unknown_shows(
    db: psycopg.Connection[Any], schema: str
) -> None:
    """A schema at 0002 with a dispatcher's outcome written as ``exhausted`` + ``unknown:`` and
    a callback's: after 0003 the first shows ``unknown``, the second is a callback's, and the
    fires show them with coordinates (-1, -1)."""
    db.execute(f'CREATE SCHEMA "{schema}"')
    db.execute(f'SET search_path TO "{schema}"')
    db.execute(
        "CREATE TABLE schema_migrations "
        "(name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
    )
    for name in ("0001_initial", "0002_fires_fillfactor"):
        db.execute(sql(f"migrations/{name}"))
        db.execute("INSERT INTO schema_migrations (name) VALUES (%s)", (name,))
    db.execute("INSERT INTO projection_meta (generation) VALUES (gen_random_uuid())")
    for key, state, error, first in (
        ("k1", "exhausted", "unknown: timed out after sending", "2026-01-01T00:00:00Z"),
        ("k2", "failed", "disk full", None),
    ):
        db.execute(
            "INSERT INTO work_outcomes (fire_key, tenant, trigger_id, state, attempts, "
            "decided_at, first_attempt_at, error) VALUES (%s, 'a', 't', %s, 1, now(), %s, %s)",
            (key, state, first, error),
        )
        db.execute(
            "INSERT INTO fires (fire_key, key_hash, tenant, trigger_id, outcome, outcome_at) "
            "VALUES (%s, 'h', 'a', 't', %s, now())",
            (key, state),
        )
    db.execute("RESET search_path")
    assert pschema.migrate(db, schema) == [
        "0003_outcomes_tzdata",
        "0004_event_lateness",
        "0005_trigger_runs",
        "0006_fire_search",
        "0007_dead_letters",
    ]
    rows = db.execute(
        f"SELECT o.fire_key, o.state, o.source, o.src_offset, f.status, f.outcome_source, "
        f'f.outcome_src_offset FROM "{schema}".work_outcomes o '
        f'JOIN "{schema}".fires f USING (fire_key) ORDER BY 1'
    ).fetchall()
    assert rows == [
        ("k1", "unknown", "dispatcher", -1, "unknown", "dispatcher", -1),
        ("k2", "failed", "callback", -1, "failed", "callback", -1),
    ]
