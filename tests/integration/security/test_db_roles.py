"""PostgreSQL roles against the real database: the reader cannot write or change anything, the
projector cannot create, drop or alter anything nor write outside the read-model tables, and
both still do their job (the projector projects a batch, the reader queries). Each attempt runs
as the role's own login, the way ``horae migrate`` creates it (:mod:`horae.projections.roles`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql as pgsql

from horae.projections import schema as pschema
from horae.projections.roles import (
    PROJECTOR_READS,
    PROJECTOR_WRITES,
    DatabaseUrls,
    Login,
    Roles,
)
from horae.projections.store import ProjectionStore, SchemaNotMigrated
from horae.projections.synthetic import history
from tests.integration.projections.test_projection_store import (
    PREFIX,
    STAGE_TOPICS,
    Log,
    batch_of,
)

FIRE = (
    "INSERT INTO {s}.fires (fire_key, key_hash, tenant, trigger_id) "
    "VALUES ('k-' || md5(random()::text), 'h', 'acme', 't')"
)

#: what neither role may do; {s}: the read-model schema, {o}: another schema of the owner
DDL_AND_OUTSIDE = {
    "create table": "CREATE TABLE {s}.intruder (a int)",
    "create view": "CREATE VIEW {s}.intruder AS SELECT 1",
    "create index": "CREATE INDEX intruder ON {s}.fires (tenant)",
    "create function": "CREATE FUNCTION {s}.intruder() RETURNS int LANGUAGE sql AS 'SELECT 1'",
    "drop table": "DROP TABLE {s}.fires",
    "drop schema": "DROP SCHEMA {s} CASCADE",
    "alter table": "ALTER TABLE {s}.fires ADD COLUMN intruder int",
    "disable constraint triggers": "ALTER TABLE {s}.fires DISABLE TRIGGER ALL",
    "rename schema (swap)": "ALTER SCHEMA {s} RENAME TO intruder",
    "truncate": "TRUNCATE {s}.fires",
    "delete": "DELETE FROM {s}.fires",
    "change the generation": "UPDATE {s}.projection_meta SET generation = gen_random_uuid()",
    "fake a migration": "INSERT INTO {s}.schema_migrations (name) VALUES ('9999_intruder')",
    "create schema": "CREATE SCHEMA intruder",
    "create in public": "CREATE TABLE public.intruder (a int)",
    "write another schema": "INSERT INTO {o}.secrets VALUES ('stolen')",
    "read another schema": "SELECT * FROM {o}.secrets",
}
#: what the reader may not do on top of that: write the read models
READER_WRITES = {
    "insert fire": FIRE,
    "update fires": "UPDATE {s}.fires SET state = 'fired'",
    "insert offsets": "INSERT INTO {s}.projection_offsets VALUES ('t', 0, 1)",
    "update offsets": "UPDATE {s}.projection_offsets SET next_offset = 0",
    "insert audit": "INSERT INTO {s}.audit_entries VALUES "
    "('a', 'acme', 'p', 'author', 'x', now(), true, NULL, NULL, '{{}}')",
}


@pytest.fixture
def urls(database_url: str) -> DatabaseUrls:
    return DatabaseUrls.resolve(database_url, None, None)


@pytest.fixture
def schemas(database_url: str, unique: str, urls: DatabaseUrls) -> Iterator[tuple[str, str]]:
    """A migrated read-model schema with the roles' grants, and another schema of the owner."""
    live, other = f"roles_{unique}", f"other_{unique}"
    with psycopg.connect(database_url, autocommit=True) as conn:
        pschema.migrate(conn, live, urls.roles())
        conn.execute(f'CREATE SCHEMA "{other}"')
        conn.execute(f'CREATE TABLE "{other}".secrets (value text)')
        conn.execute(f"INSERT INTO \"{other}\".secrets VALUES ('owner only')")
    yield live, other
    with psycopg.connect(database_url, autocommit=True) as conn:
        for s in (live, other, f"{live}_shadow", f"{live}_old", "intruder"):
            conn.execute(f'DROP SCHEMA IF EXISTS "{s}" CASCADE')
        conn.execute("DROP TABLE IF EXISTS public.intruder")


def connect(url: str) -> psycopg.Connection[Any]:
    return psycopg.connect(url, autocommit=True, connect_timeout=10)


def run(conn: psycopg.Connection[Any], statement: str, live: str, other: str) -> None:
    conn.execute(pgsql.SQL(statement).format(s=pgsql.Identifier(live), o=pgsql.Identifier(other)))


def as_role(url: str) -> psycopg.Connection[Any]:
    """A session of the role at ``url`` where privileges alone decide (the reader's sessions
    are read-only by default: lifted here)."""
    conn = connect(url)
    conn.execute("SET default_transaction_read_only TO off")
    return conn


@pytest.mark.parametrize("statement", list({**DDL_AND_OUTSIDE, **READER_WRITES}.items()), ids=str)
def test_the_reader_cannot_write_or_change_anything(
    urls: DatabaseUrls, schemas: tuple[str, str], statement: tuple[str, str]
) -> None:
    live, other = schemas
    with as_role(urls.reader) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        run(conn, statement[1], live, other)


@pytest.mark.parametrize("statement", list(DDL_AND_OUTSIDE.items()), ids=str)
def test_the_projector_cannot_ddl_nor_write_outside_the_read_models(
    urls: DatabaseUrls, schemas: tuple[str, str], statement: tuple[str, str]
) -> None:
    live, other = schemas
    with as_role(urls.projector) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        run(conn, statement[1], live, other)


def test_nothing_was_changed_by_the_attempts(
    database_url: str, urls: DatabaseUrls, schemas: tuple[str, str]
) -> None:
    live, other = schemas
    for url in (urls.reader, urls.projector):
        with as_role(url) as conn:
            for statement in DDL_AND_OUTSIDE.values():
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    run(conn, statement, live, other)
    with connect(database_url) as owner:
        assert owner.execute(f'SELECT value FROM "{other}".secrets').fetchall() == [("owner only",)]
        assert pschema.pending(owner, live) == []
        assert not pschema.schema_exists(owner, "intruder")
        tables = owner.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = %s", (live,)
        ).fetchone()
        assert tables == (len(PROJECTOR_WRITES) + len(PROJECTOR_READS),)


def test_the_reader_session_is_read_only_by_default(
    urls: DatabaseUrls, schemas: tuple[str, str]
) -> None:
    live, other = schemas
    with connect(urls.reader) as conn:
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            run(conn, FIRE, live, other)
        assert conn.execute(
            pgsql.SQL("SELECT count(*) FROM {}.fires").format(pgsql.Identifier(live))
        ).fetchone() == (0,)


def test_every_table_of_the_schema_has_its_privileges_named(
    database_url: str, schemas: tuple[str, str]
) -> None:
    """A table a new migration adds must be classified in roles.py, or the projector cannot
    write it (or, worse, someone grants it by hand)."""
    live, _ = schemas
    with connect(database_url) as owner:
        tables = {
            str(r[0])
            for r in owner.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s", (live,))
        }
    assert tables == set(PROJECTOR_WRITES) | set(PROJECTOR_READS)


def test_the_projector_role_projects_and_the_reader_reads(
    database_url: str, urls: DatabaseUrls, schemas: tuple[str, str]
) -> None:
    live, _ = schemas
    log = Log()
    recs = [log.append(o) for o in history(200, 2, 2, prefix=PREFIX, partitions=1)]
    store = ProjectionStore(urls.projector, live)
    try:
        store.connect()
        result = store.apply(batch_of(recs), STAGE_TOPICS)
    finally:
        store.close()
    assert result.total_rows > 0
    with connect(urls.reader) as reader:
        fires = reader.execute(
            pgsql.SQL("SELECT count(*) FROM {}.fires").format(pgsql.Identifier(live))
        ).fetchone()
        offsets = pschema.stored_offsets(reader, live)
    assert fires == (200,)
    assert offsets and all(o > 0 for o in offsets.values())


def test_the_projector_role_cannot_migrate_and_says_so(
    urls: DatabaseUrls, schemas: tuple[str, str]
) -> None:
    live, _ = schemas
    store = ProjectionStore(urls.projector, f"{live}_shadow")
    with pytest.raises(SchemaNotMigrated, match="run `horae migrate` as the owner"):
        store.connect()
    store.close()


def test_a_rebuilt_shadow_swapped_in_keeps_the_grants(
    database_url: str, urls: DatabaseUrls, schemas: tuple[str, str]
) -> None:
    live, other = schemas
    with connect(database_url) as owner:
        pschema.migrate(owner, f"{live}_shadow", urls.roles())
        pschema.swap(owner, live, f"{live}_shadow")
    with connect(urls.projector) as projector:
        run(projector, FIRE, live, other)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            run(projector, DDL_AND_OUTSIDE["drop table"], live, other)
    with connect(urls.reader) as reader:
        assert reader.execute(
            pgsql.SQL("SELECT count(*) FROM {}.fires").format(pgsql.Identifier(live))
        ).fetchone() == (1,)


def test_migrate_refuses_the_owner_as_a_restricted_role(database_url: str, unique: str) -> None:
    owner = Login.from_url(database_url).name
    with connect(database_url) as conn, pytest.raises(ValueError, match="its own plain role"):
        pschema.migrate(conn, f"roles_{unique}", Roles(projector=Login(owner)))
    with connect(database_url) as conn:
        assert not pschema.schema_exists(conn, f"roles_{unique}")


#: what the API role may not do in its own state schema ({a}): change its shape or history
API_STATE_DDL = {
    "create table in state": "CREATE TABLE {a}.intruder (a int)",
    "drop state table": "DROP TABLE {a}.recent_writes",
    "alter state table": "ALTER TABLE {a}.verified_hosts ADD COLUMN intruder int",
    "truncate state": "TRUNCATE {a}.verified_hosts",
    "fake a state migration": "INSERT INTO {a}.schema_migrations (name) VALUES ('9999_x')",
    "drop state schema": "DROP SCHEMA {a} CASCADE",
}


@pytest.fixture
def api_state(database_url: str, urls: DatabaseUrls, schemas: tuple[str, str]) -> Iterator[str]:
    """The API's state schema next to the read models, migrated with the API role's grants."""
    from horae.api import state

    name = state.state_schema(schemas[0])
    with connect(database_url) as owner:
        state.migrate(owner, name, urls.roles().api)
    yield name
    with connect(database_url) as owner:
        owner.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


@pytest.mark.parametrize("statement", list({**DDL_AND_OUTSIDE, **READER_WRITES}.items()), ids=str)
def test_the_api_role_cannot_write_the_read_models_or_change_anything(
    urls: DatabaseUrls, schemas: tuple[str, str], api_state: str, statement: tuple[str, str]
) -> None:
    live, other = schemas
    with connect(urls.api) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        run(conn, statement[1], live, other)


@pytest.mark.parametrize("statement", list(API_STATE_DDL.items()), ids=str)
def test_the_api_role_cannot_change_its_state_schema(
    urls: DatabaseUrls, schemas: tuple[str, str], api_state: str, statement: tuple[str, str]
) -> None:
    with connect(urls.api) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute(pgsql.SQL(statement[1]).format(a=pgsql.Identifier(api_state)))


def test_the_api_role_keeps_its_state_and_reads_the_read_models(
    database_url: str, urls: DatabaseUrls, schemas: tuple[str, str], api_state: str
) -> None:
    from datetime import UTC, datetime, timedelta

    from horae.api.state import PostgresState

    live, other = schemas
    with connect(database_url) as owner:
        run(owner, FIRE, live, other)
    until = datetime.now(UTC) + timedelta(hours=1)
    held = PostgresState(urls.api, api_state, max_size=1)
    try:
        held.verified("acme", "h.example", until)
        assert held.verified_until("acme", "h.example") == until
    finally:
        held.close()
    with connect(urls.api) as conn:
        a = pgsql.Identifier(api_state)
        conn.execute(pgsql.SQL("DELETE FROM {}.verified_hosts").format(a))
        assert conn.execute(
            pgsql.SQL("SELECT count(*) FROM {}.fires").format(pgsql.Identifier(live))
        ).fetchone() == (1,)
    with connect(database_url) as owner:
        assert owner.execute(
            pgsql.SQL("SELECT count(*) FROM {}.fires").format(pgsql.Identifier(live))
        ).fetchone() == (1,)
