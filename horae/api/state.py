"""What every API process shares, in PostgreSQL: the versions the API wrote
(:class:`~horae.api.ports.RecentWrites`) and target ownership verification
(:class:`~horae.api.verification.VerificationStore`), so ``api.workers`` processes (or hosts)
serve one API.

They live in a schema of their own, :func:`state_schema` (``<projection schema>_api``, default
``horae_api``), never in the read models: a rebuild swaps the read-model schema and would lose
them, and the read models stay derivable from the topics alone.

Contracts:
- :func:`migrate` is idempotent and safe to run concurrently (an advisory lock per schema): it
  creates the schema and applies the migrations in ``horae/api/sql/migrations`` that its
  ``schema_migrations`` does not list; given the API's :class:`~horae.projections.roles.Login`,
  it grants that role SELECT, INSERT, UPDATE and DELETE on :data:`STATE_TABLES` and SELECT on
  ``schema_migrations``, nothing else there (the role is created by
  :func:`horae.projections.roles.ensure_roles`). It runs as the owner.
- :func:`pending` lists the migrations the schema still needs (all when it is missing).
- :class:`PostgresState` implements both ports with the caller's clock; expired rows are
  invisible at once and deleted now and then by later writes. A value PostgreSQL cannot hold
  raises :class:`~horae.api.ports.BadValue`, never the driver's error.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from functools import cache
from importlib import resources
from typing import Any

import psycopg
from psycopg import sql as pgsql
from psycopg_pool import ConnectionPool

from horae.api.ports import BadValue, StoredTrigger
from horae.api.verification import Challenge
from horae.contracts import events as ev
from horae.contracts.codec import default_codec
from horae.projections import schema as pschema
from horae.projections.roles import Login

#: the tables the API role reads and writes
STATE_TABLES: tuple[str, ...] = ("recent_writes", "target_challenges", "verified_hosts")
#: how many claims between two purges of expired rows (per process)
PURGE_EVERY = 1000


def state_schema(projection_schema: str) -> str:
    """The API's state schema that goes with a live read-model schema."""
    return f"{projection_schema}_api"


def _folder() -> Any:
    return resources.files("horae.api").joinpath("sql", "migrations")


def migration_names() -> list[str]:
    return sorted(
        p.name.removesuffix(".sql") for p in _folder().iterdir() if p.name.endswith(".sql")
    )


@cache
def _migration(name: str) -> str:
    return str(_folder().joinpath(f"{name}.sql").read_text(encoding="utf-8"))


def pending(conn: psycopg.Connection[Any], schema: str) -> list[str]:
    """The migrations the state schema does not have yet, in order (all when it is missing)."""
    return pschema.pending(conn, schema, migration_names())


def migrate(conn: psycopg.Connection[Any], schema: str, api: Login | None = None) -> list[str]:
    """Bring ``schema`` to the latest migration and, given the API role, grant it exactly its
    privileges there; returns the names applied now."""
    s = pgsql.Identifier(schema)
    with conn.transaction():
        applied_now = pschema.run_migrations(
            conn, schema, migration_names(), _migration, "horae.api.state."
        )
        if api is not None:
            role = pgsql.Identifier(api.name)
            tables = pgsql.SQL(", ").join(pgsql.Identifier(schema, t) for t in STATE_TABLES)
            conn.execute(pgsql.SQL("REVOKE ALL ON ALL TABLES IN SCHEMA {} FROM {}").format(s, role))
            conn.execute(pgsql.SQL("REVOKE ALL ON SCHEMA {} FROM {}").format(s, role))
            conn.execute(pgsql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(s, role))
            conn.execute(
                pgsql.SQL("GRANT SELECT, INSERT, UPDATE, DELETE ON {} TO {}").format(tables, role)
            )
            conn.execute(
                pgsql.SQL("GRANT SELECT ON {} TO {}").format(
                    pgsql.Identifier(schema, "schema_migrations"), role
                )
            )
    return applied_now


CLAIM = """
INSERT INTO {t} AS r (tenant, trigger_id, version, confirmed, until, created_at, definition)
VALUES (%(tenant)s, %(trigger_id)s, %(version)s, false, %(until)s, %(created_at)s, %(definition)s)
ON CONFLICT (tenant, trigger_id) DO UPDATE SET
    version = excluded.version, confirmed = false, until = excluded.until,
    created_at = excluded.created_at, definition = excluded.definition
WHERE r.version < excluded.version OR r.until <= %(now)s
RETURNING 1
"""


class PostgresState:
    """The API's shared state in ``schema``, as the API role (``url``)."""

    def __init__(self, url: str, schema: str, max_size: int = 4) -> None:
        self.schema = schema
        self.pool: ConnectionPool[Any] = ConnectionPool(
            url, min_size=1, max_size=max_size, open=True, kwargs={"autocommit": True}
        )
        self._codec = default_codec()
        self._claims = itertools.count(1)
        t = {name: pgsql.Identifier(schema, name) for name in STATE_TABLES}
        self._sql = {
            "claim": pgsql.SQL(CLAIM).format(t=t["recent_writes"]),
            "confirm": pgsql.SQL(
                "UPDATE {} SET confirmed = true, until = %s "
                "WHERE tenant = %s AND trigger_id = %s AND version = %s"
            ).format(t["recent_writes"]),
            "release": pgsql.SQL(
                "DELETE FROM {} WHERE tenant = %s AND trigger_id = %s AND version = %s "
                "AND NOT confirmed"
            ).format(t["recent_writes"]),
            "recent": pgsql.SQL(
                "SELECT trigger_id, definition, created_at FROM {} WHERE tenant = %s "
                "AND trigger_id = ANY(%s) AND confirmed AND until > %s"
            ).format(t["recent_writes"]),
            "put_challenge": pgsql.SQL(
                "INSERT INTO {} (tenant, host, token, well_known_url, expires_at) "
                "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (tenant, host) DO UPDATE SET "
                "token = excluded.token, well_known_url = excluded.well_known_url, "
                "expires_at = excluded.expires_at"
            ).format(t["target_challenges"]),
            "challenge": pgsql.SQL(
                "SELECT token, well_known_url, expires_at FROM {} WHERE tenant = %s AND host = %s"
            ).format(t["target_challenges"]),
            "verified": pgsql.SQL(
                "INSERT INTO {} (tenant, host, verified_until) VALUES (%s, %s, %s) "
                "ON CONFLICT (tenant, host) DO UPDATE SET verified_until = excluded.verified_until"
            ).format(t["verified_hosts"]),
            "verified_until": pgsql.SQL(
                "SELECT verified_until FROM {} WHERE tenant = %s AND host = %s"
            ).format(t["verified_hosts"]),
        }
        self._purge = [
            pgsql.SQL("DELETE FROM {} WHERE until <= %s").format(t["recent_writes"]),
            pgsql.SQL("DELETE FROM {} WHERE expires_at <= %s").format(t["target_challenges"]),
            pgsql.SQL("DELETE FROM {} WHERE verified_until <= %s").format(t["verified_hosts"]),
        ]

    @contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection; a value PostgreSQL cannot hold (a data error: a NUL in a host)
        raises :class:`~horae.api.ports.BadValue` (the API answers 422)."""
        try:
            with self.pool.connection() as conn:
                yield conn
        except psycopg.DataError as exc:
            raise BadValue(f"{type(exc).__name__}: {exc}") from None

    # --- RecentWrites ---------------------------------------------------------------------
    def claim(self, stored: StoredTrigger, now: datetime, until: datetime) -> bool:
        d = stored.definition
        with self._connection() as conn:
            if next(self._claims) % PURGE_EVERY == 0:
                for statement in self._purge:
                    conn.execute(statement, (now,))
            row = conn.execute(
                self._sql["claim"],
                {
                    "tenant": d.tenant,
                    "trigger_id": d.trigger_id,
                    "version": d.version,
                    "until": until,
                    "created_at": stored.created_at,
                    "definition": self._codec.encode(d),
                    "now": now,
                },
            ).fetchone()
        return row is not None

    def confirm(self, tenant: str, trigger_id: str, version: int, until: datetime) -> None:
        with self._connection() as conn:
            conn.execute(self._sql["confirm"], (until, tenant, trigger_id, version))

    def release(self, tenant: str, trigger_id: str, version: int) -> None:
        with self._connection() as conn:
            conn.execute(self._sql["release"], (tenant, trigger_id, version))

    def recent(
        self, tenant: str, trigger_ids: list[str], now: datetime
    ) -> dict[str, StoredTrigger]:
        with self._connection() as conn:
            rows = conn.execute(self._sql["recent"], (tenant, trigger_ids, now)).fetchall()
        out = {}
        for trigger_id, data, created_at in rows:
            d = self._codec.decode(bytes(data), ev.TriggerDefinition)
            out[str(trigger_id)] = StoredTrigger(d, created_at, d.authored_at)
        return out

    # --- VerificationStore ----------------------------------------------------------------
    def put_challenge(self, challenge: Challenge) -> None:
        c = challenge
        with self._connection() as conn:
            conn.execute(
                self._sql["put_challenge"],
                (c.tenant, c.host, c.token, c.well_known_url, c.expires_at),
            )

    def challenge(self, tenant: str, host: str) -> Challenge | None:
        with self._connection() as conn:
            row = conn.execute(self._sql["challenge"], (tenant, host)).fetchone()
        return None if row is None else Challenge(tenant, host, str(row[0]), str(row[1]), row[2])

    def verified(self, tenant: str, host: str, until: datetime) -> None:
        with self._connection() as conn:
            conn.execute(self._sql["verified"], (tenant, host, until))

    def verified_until(self, tenant: str, host: str) -> datetime | None:
        with self._connection() as conn:
            row = conn.execute(self._sql["verified_until"], (tenant, host)).fetchone()
        return None if row is None else row[0]

    def close(self) -> None:
        self.pool.close()
