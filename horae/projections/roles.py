"""PostgreSQL roles of the read models: who may do what, enforced by PostgreSQL's privileges.

Four roles, one URL each (:class:`DatabaseUrls`):

- the **owner** (``HORAE_DATABASE_URL``) owns every schema and table: ``horae migrate``,
  ``horae projections rebuild`` (drops and creates the shadow) and ``verify --swap`` (renames
  schemas) run as it;
- the **projector** (``HORAE_PROJECTOR_DATABASE_URL``, default role ``horae_projector``) may
  read, insert and update the tables in :data:`PROJECTOR_WRITES` and only read
  :data:`PROJECTOR_READS`: no DELETE, TRUNCATE or DDL, nothing in any other schema;
- the **reader** (``HORAE_READER_DATABASE_URL``, default role ``horae_reader``): SELECT on the
  read models and nothing else; the history queries (:mod:`horae.projections.queries`),
  ``projections verify`` and the API use it. A reader role created here defaults to read-only
  transactions as well;
- the **API** (``HORAE_API_DATABASE_URL``, default role ``horae_api``): SELECT on the read models
  like the reader, and it may read and write the tables of the API's own state schema
  (:mod:`horae.api.state`: read-your-writes, target verification) and nothing else.

Contracts:
- :func:`ensure_roles` creates the login roles when missing (needs CREATEROLE) and sets the
  passwords their URLs carry; it refuses a role that is the owner, belongs to the owner, or has
  superuser, CREATEROLE, CREATEDB or BYPASSRLS.
- :func:`grant` gives exactly the privileges above on one schema (idempotent);
  :func:`horae.projections.schema.migrate` calls both when handed :class:`Roles`, so every schema
  it creates (live or shadow) carries the grants, and a swap keeps them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import sql as pgsql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

PROJECTOR_ROLE = "horae_projector"
READER_ROLE = "horae_reader"
API_ROLE = "horae_api"

#: the tables the projector writes (SELECT, INSERT, UPDATE): the read models and its offsets
PROJECTOR_WRITES: tuple[str, ...] = (
    "projection_offsets",
    "projection_errors",
    "trigger_versions",
    "triggers",
    "trigger_runs",
    "tenant_suspensions",
    "fires",
    "fire_duplicates",
    "attempts",
    "work_outcomes",
    "schedule_events",
    "audit_entries",
    "dead_letters",
)
#: the tables the projector only reads (the generation it checks, the migrations it needs)
PROJECTOR_READS: tuple[str, ...] = ("projection_meta", "schema_migrations")


@dataclass(frozen=True)
class Login:
    """A login role and the password to give it (``None``: leave it as it is)."""

    name: str
    password: str | None = field(default=None, repr=False)

    @classmethod
    def from_url(cls, url: str) -> Login:
        parts = conninfo_to_dict(url)
        name = parts.get("user")
        if not name:
            raise ValueError("a role's database URL must name its user")
        password = parts.get("password")
        return cls(str(name), str(password) if password else None)


@dataclass(frozen=True)
class Roles:
    projector: Login = Login(PROJECTOR_ROLE)
    reader: Login = Login(READER_ROLE)
    api: Login = Login(API_ROLE)


def as_role(url: str, role: str) -> str:
    """``url`` (URL or ``key=value`` form) with its user replaced by ``role`` and no password."""
    parts = {k: v for k, v in conninfo_to_dict(url).items() if k != "password"}
    parts["user"] = role
    return make_conninfo("", **parts)


@dataclass(frozen=True)
class DatabaseUrls:
    """The connection of each role. Unset projector/reader/API URLs default to the owner's
    server and database as ``horae_projector`` / ``horae_reader`` / ``horae_api`` without a
    password (the local stack trusts loopback)."""

    owner: str = field(repr=False)
    projector: str = field(repr=False)
    reader: str = field(repr=False)
    api: str = field(repr=False)

    @classmethod
    def resolve(
        cls, owner: str, projector: str | None, reader: str | None, api: str | None = None
    ) -> DatabaseUrls:
        return cls(
            owner,
            projector or as_role(owner, PROJECTOR_ROLE),
            reader or as_role(owner, READER_ROLE),
            api or as_role(owner, API_ROLE),
        )

    def roles(self) -> Roles:
        return Roles(
            Login.from_url(self.projector), Login.from_url(self.reader), Login.from_url(self.api)
        )


def ensure_roles(conn: psycopg.Connection[Any], roles: Roles) -> None:
    """Create the login roles when missing, set the passwords given; call in a transaction.
    Raises :class:`ValueError` when a role would hold more than its privileges (see module)."""
    conn.execute("SELECT pg_advisory_xact_lock(hashtext('horae.projections.roles'))")
    for login in (roles.projector, roles.reader, roles.api):
        role = pgsql.Identifier(login.name)
        row = conn.execute(
            "SELECT r.rolsuper OR r.rolcreaterole OR r.rolcreatedb OR r.rolbypassrls"
            " OR r.rolname = current_user OR pg_has_role(r.rolname, current_user, 'MEMBER')"
            " FROM pg_roles r WHERE r.rolname = %s",
            (login.name,),
        ).fetchone()
        if row is None:
            conn.execute(pgsql.SQL("CREATE ROLE {} LOGIN").format(role))
            if login is roles.reader:
                conn.execute(
                    pgsql.SQL("ALTER ROLE {} SET default_transaction_read_only = on").format(role)
                )
        elif row[0]:
            raise ValueError(
                f"role {login.name!r} is the owner, belongs to it, or may act as superuser, "
                "create roles or databases, or bypass row security: give it its own plain role"
            )
        if login.password is not None:
            conn.execute(
                pgsql.SQL("ALTER ROLE {} LOGIN PASSWORD {}").format(
                    role, pgsql.Literal(login.password)
                )
            )
        can = conn.execute(
            "SELECT has_database_privilege(%s, current_database(), 'CONNECT')", (login.name,)
        ).fetchone()
        if not (can and can[0]):
            conn.execute(
                pgsql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(
                    pgsql.Identifier(current_database(conn)), role
                )
            )


def grant(conn: psycopg.Connection[Any], schema: str, roles: Roles) -> None:
    """Give the roles exactly their privileges on ``schema`` (and revoke any other they hold
    there); call in a transaction, as the owner."""
    projector = pgsql.Identifier(roles.projector.name)
    reader = pgsql.Identifier(roles.reader.name)
    api = pgsql.Identifier(roles.api.name)
    s = pgsql.Identifier(schema)

    def tables(names: tuple[str, ...]) -> pgsql.Composable:
        return pgsql.SQL(", ").join(pgsql.Identifier(schema, n) for n in names)

    for role in (projector, reader, api):
        conn.execute(pgsql.SQL("REVOKE ALL ON ALL TABLES IN SCHEMA {} FROM {}").format(s, role))
        conn.execute(pgsql.SQL("REVOKE ALL ON SCHEMA {} FROM {}").format(s, role))
        conn.execute(pgsql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(s, role))
    conn.execute(
        pgsql.SQL("GRANT SELECT, INSERT, UPDATE ON {} TO {}").format(
            tables(PROJECTOR_WRITES), projector
        )
    )
    conn.execute(pgsql.SQL("GRANT SELECT ON {} TO {}").format(tables(PROJECTOR_READS), projector))
    for role in (reader, api):
        conn.execute(pgsql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA {} TO {}").format(s, role))


def current_database(conn: psycopg.Connection[Any]) -> str:
    row = conn.execute("SELECT current_database()").fetchone()
    assert row is not None
    return str(row[0])
