"""Schemas ("generations") of the read models: create/migrate, drop, swap.

A generation is one PostgreSQL schema (live: ``Settings.projection_schema``, default ``horae``;
shadow: ``<live>_shadow``) holding every read-model table *and* the offsets it was built up to,
so the rows and the offsets they reflect always move together (and move together on a swap).

Contracts:
- :func:`migrate` is idempotent and safe to run concurrently (an advisory lock per schema): it
  creates the schema if missing and applies, in one transaction, the migrations in
  ``sql/migrations`` that ``schema_migrations`` does not list yet; handed
  :class:`~horae.projections.roles.Roles`, it also creates the projector and reader roles and
  grants them their privileges on the schema (:mod:`horae.projections.roles`). It runs as the
  owner: the projector and reader roles may not create anything.
- :func:`pending` lists the migrations a schema still needs (all of them when it is missing);
  any role with USAGE on the schema may ask.
- :func:`swap` renames in one transaction: live → ``<live>_old``, shadow → live. A running
  projector notices the new generation and reseeks from the offsets stored in it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import sql as pgsql

from horae.projections import roles as proles
from horae.projections.sqlfiles import migration_names, sql


def ident(schema: str) -> pgsql.Identifier:
    return pgsql.Identifier(schema)


def set_search_path(conn: psycopg.Connection[Any], schema: str) -> None:
    """Point unqualified names at ``schema`` for the session (temp tables still come first)."""
    conn.execute(pgsql.SQL("SET search_path TO {}").format(ident(schema)))


def schema_exists(conn: psycopg.Connection[Any], schema: str) -> bool:
    row = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone()
    return row is not None


def pending(
    conn: psycopg.Connection[Any], schema: str, names: list[str] | None = None
) -> list[str]:
    """The migrations of ``names`` (default: the read models') that ``schema`` does not have
    yet, in order (all when it does not exist)."""
    names = migration_names() if names is None else names
    table = pgsql.Identifier(schema, "schema_migrations").as_string(conn)
    row = conn.execute("SELECT to_regclass(%s)", (table,)).fetchone()
    if row is None or row[0] is None:
        return names
    done = {
        str(r[0])
        for r in conn.execute(
            pgsql.SQL("SELECT name FROM {}.schema_migrations").format(ident(schema))
        )
    }
    return [name for name in names if name not in done]


def migrate(
    conn: psycopg.Connection[Any], schema: str, roles: proles.Roles | None = None
) -> list[str]:
    """Bring ``schema`` to the latest migration and, given ``roles``, create them and grant
    their privileges on it; returns the names applied now."""
    with conn.transaction():
        if roles is not None:
            proles.ensure_roles(conn, roles)
        names = migration_names()
        applied_now = run_migrations(
            conn, schema, names, lambda name: sql(f"migrations/{name}"), "horae.projections."
        )
        if names[0] in applied_now:
            conn.execute(
                pgsql.SQL("INSERT INTO {}.projection_meta (generation) VALUES (%s)").format(
                    ident(schema)
                ),
                (uuid.uuid4(),),
            )
        if roles is not None:
            proles.grant(conn, schema, roles)
    return applied_now


def run_migrations(
    conn: psycopg.Connection[Any],
    schema: str,
    names: list[str],
    text: Callable[[str], str],
    lock: str,
) -> list[str]:
    """In the caller's transaction, under the advisory lock ``lock`` + ``schema``: create
    ``schema`` and its ``schema_migrations`` if missing, then apply (``text(name)``: its SQL,
    run with ``schema`` first on the search path) each of ``names`` not listed there yet, in
    order; returns the names applied now."""
    s = ident(schema)
    conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s || %s))", (lock, schema))
    conn.execute(pgsql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(s))
    conn.execute(
        pgsql.SQL(
            "CREATE TABLE IF NOT EXISTS {}.schema_migrations "
            "(name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
        ).format(s)
    )
    listed = conn.execute(pgsql.SQL("SELECT name FROM {}.schema_migrations").format(s))
    done = {str(r[0]) for r in listed}
    applied_now: list[str] = []
    for name in names:
        if name in done:
            continue
        conn.execute(pgsql.SQL("SET LOCAL search_path TO {}").format(s))
        conn.execute(text(name))
        conn.execute("INSERT INTO schema_migrations (name) VALUES (%s)", (name,))
        applied_now.append(name)
    return applied_now


def load_schema_file(conn: psycopg.Connection[Any], schema: str) -> None:
    """Create ``schema`` from ``sql/schema.sql`` in one piece (for the migrate-equals test)."""
    with conn.transaction():
        conn.execute(pgsql.SQL("CREATE SCHEMA {}").format(ident(schema)))
        conn.execute(pgsql.SQL("SET LOCAL search_path TO {}").format(ident(schema)))
        conn.execute(sql("schema"))


def analyze(conn: psycopg.Connection[Any], schema: str) -> None:
    """Refresh the planner statistics of every table of ``schema`` (after a bulk load: until
    autovacuum gets to it, a freshly filled table is planned as if empty, and a page query that
    takes a millisecond can take half a second)."""
    tables = conn.execute(
        "SELECT table_name FROM information_schema.tables"
        " WHERE table_schema = %s AND table_type = 'BASE TABLE'",
        (schema,),
    ).fetchall()
    for (table,) in tables:
        conn.execute(pgsql.SQL("ANALYZE {}").format(pgsql.Identifier(schema, table)))


def drop(conn: psycopg.Connection[Any], schema: str) -> None:
    with conn.transaction():
        conn.execute(pgsql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(ident(schema)))


def generation(conn: psycopg.Connection[Any], schema: str) -> uuid.UUID | None:
    row = conn.execute(
        pgsql.SQL("SELECT generation FROM {}.projection_meta").format(ident(schema))
    ).fetchone()
    return None if row is None else uuid.UUID(str(row[0]))


def stored_offsets(conn: psycopg.Connection[Any], schema: str) -> dict[tuple[str, int], int]:
    rows = conn.execute(
        pgsql.SQL("SELECT topic, partition, next_offset FROM {}.projection_offsets").format(
            ident(schema)
        )
    ).fetchall()
    return {(str(t), int(p)): int(o) for t, p, o in rows}


def swap(conn: psycopg.Connection[Any], live: str, shadow: str) -> str:
    """Make ``shadow`` live; the previous live schema is kept as ``<live>_old`` (replacing an
    older one). Returns the name the previous live schema now has."""
    old = f"{live}_old"
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('horae.projections.' || %s))", (live,))
        if not schema_exists(conn, shadow):
            raise ValueError(f"no shadow schema {shadow!r} to swap in")
        conn.execute(pgsql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(ident(old)))
        if schema_exists(conn, live):
            conn.execute(pgsql.SQL("ALTER SCHEMA {} RENAME TO {}").format(ident(live), ident(old)))
        conn.execute(pgsql.SQL("ALTER SCHEMA {} RENAME TO {}").format(ident(shadow), ident(live)))
    return old
