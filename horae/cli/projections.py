"""Read-model commands: ``horae projector``, ``horae migrate``,
``horae projections rebuild|verify [--swap]``.

Settings: the ``projector`` section (``HORAE_PROJECTOR_*``), the ``projections`` section
(``HORAE_PROJECTIONS_*``: shadow schema, samples, swap) and the live schema
(``--projection-schema``, ``HORAE_PROJECTION_SCHEMA``); services come from
``HORAE_KAFKA_BOOTSTRAP`` / ``HORAE_DATABASE_URL`` (else the local stack).

Each command connects as the role it needs (:mod:`horae.projections.roles`): ``migrate``,
``projections rebuild`` and ``verify --swap`` as the owner (``HORAE_DATABASE_URL``), ``projector``
as the projector role (``HORAE_PROJECTOR_DATABASE_URL``), ``verify`` compares as the reader
(``HORAE_READER_DATABASE_URL``). ``migrate`` creates the roles and grants them their
privileges, and migrates the API's state schema (``<projection schema>_api``) too.
Exit codes: 0 ok, 1 ``verify`` found divergence, 2 usage errors.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from typing import TYPE_CHECKING

from horae.cli.common import (
    add_flags,
    drain_s,
    require_services,
    serve_metrics,
    setup_logging,
    stop_on_signals,
)
from horae.devstack import StackError
from horae.settings import Settings

if TYPE_CHECKING:
    from horae.projections.projector import ProjectorConfig
    from horae.projections.roles import DatabaseUrls


def _schema_flag(p: argparse.ArgumentParser) -> None:
    add_flags(p, None, only=["projection_schema"])


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("projector", help="project the topics into PostgreSQL read models")
    _schema_flag(p)
    add_flags(p, "projector")
    p.set_defaults(func=run_projector)

    m = subparsers.add_parser(
        "migrate", help="create or migrate the read-model schema, its roles and their grants"
    )
    _schema_flag(m)
    m.set_defaults(func=run_migrate)

    proj = subparsers.add_parser("projections", help="rebuild, verify and swap read models")
    sub = proj.add_subparsers(dest="projections_command", metavar="ACTION", required=True)
    r = sub.add_parser(
        "rebuild", help="replay the projected topics from the beginning into the shadow"
    )
    _schema_flag(r)
    add_flags(r, "projections", only=["shadow"])
    r.set_defaults(func=run_rebuild)
    v = sub.add_parser("verify", help="compare shadow and live row by row")
    _schema_flag(v)
    add_flags(v, "projections", only=["shadow", "samples", "swap"])
    v.set_defaults(func=run_verify)


def database_urls(settings: Settings, owner: str) -> DatabaseUrls:
    """The URL of each role: the configured ones, else ``owner``'s database as the default
    roles; each with the settings' ``database_sslmode`` and ``database_ssl_ca_file``."""
    from horae.database import with_tls
    from horae.projections.roles import DatabaseUrls

    def tls(url: str | None) -> str | None:
        if url is None:
            return None
        return with_tls(url, settings.database_sslmode, settings.database_ssl_ca_file)

    return DatabaseUrls.resolve(
        str(tls(owner)),
        tls(settings.projector_database_url),
        tls(settings.reader_database_url),
        tls(settings.api_database_url),
    )


def migrate_live(settings: Settings, owner: str) -> list[str]:
    """Migrate the live schema and the API's state schema (:mod:`horae.api.state`) as
    ``owner``, creating the roles and their grants; returns the migrations applied now."""
    import psycopg

    from horae.api import state
    from horae.projections import schema as pschema

    roles = database_urls(settings, owner).roles()
    with psycopg.connect(owner, autocommit=True) as conn:
        applied = pschema.migrate(conn, settings.projection_schema, roles)
        api_schema = state.state_schema(settings.projection_schema)
        return applied + state.migrate(conn, api_schema, roles.api)


def _config(settings: Settings, schema: str, role: str) -> ProjectorConfig:
    """The projector configuration connecting as ``role`` (``owner`` or ``projector``)."""
    from horae.projections.projector import ProjectorConfig

    bootstrap, owner = require_services(settings)
    urls = database_urls(settings, owner)
    return ProjectorConfig(
        bootstrap=bootstrap,
        database_url=urls.owner if role == "owner" else urls.projector,
        schema=schema,
        topic_prefix=settings.topic_prefix,
        batch_records=settings.projector.batch_records,
        batch_ms=settings.projector.batch_ms,
    )


def _check_projector_role(database_url: str, schema: str) -> None:
    """Raise :class:`StackError` unless the projector role can log in and finds ``schema``
    migrated (it may not migrate it itself)."""
    import psycopg

    from horae.projections import schema as pschema

    try:
        with psycopg.connect(database_url, connect_timeout=10) as conn:
            todo = pschema.pending(conn, schema)
    except psycopg.Error as exc:
        raise StackError(
            f"the projector role cannot use the database ({str(exc).strip()}). Run `horae "
            "migrate` as the owner (HORAE_DATABASE_URL) to create the roles, or fix "
            "HORAE_PROJECTOR_DATABASE_URL."
        ) from exc
    if todo:
        raise StackError(
            f"schema {schema} needs {', '.join(todo)}; the projector role may not migrate it. "
            "Run `horae migrate` as the owner (HORAE_DATABASE_URL) first."
        )


def run_projector(settings: Settings, args: argparse.Namespace) -> int:
    from horae.projections.metrics import ProjectionMetrics
    from horae.projections.projector import Projector
    from horae.projections.undispatched import UndispatchedWatch, reader

    setup_logging("projector", settings.log_level)
    mine = settings.projector
    config = _config(settings, settings.projection_schema, "projector")
    _check_projector_role(config.database_url, config.schema)
    config.consumer_overrides["session.timeout.ms"] = mine.session_timeout_ms
    if mine.instance_id:
        config.consumer_overrides["group.instance.id"] = mine.instance_id
    metrics = ProjectionMetrics()
    serve_metrics(mine.metrics_port, metrics.registry, mine.metrics_host)
    stop = threading.Event()
    stop_on_signals(stop, drain_s("projector", settings))
    projector = Projector(config, metrics)
    logging.getLogger(__name__).info(
        "projecting %s* into schema %s", config.topic_prefix, config.schema
    )
    # the undispatched gauges, read beside the loop (the alert that catches a silent dispatcher)
    UndispatchedWatch(reader(config.database_url, config.schema), metrics, config.schema).start(
        stop
    )
    projector.run(stop)
    return 0


def run_migrate(settings: Settings, args: argparse.Namespace) -> int:
    _, owner = require_services(settings)
    try:
        applied = migrate_live(settings, owner)
    except ValueError as exc:
        print(f"migrate: {exc}", file=sys.stderr)
        return 2
    roles = database_urls(settings, owner).roles()
    schema = settings.projection_schema
    print(f"schemas {schema}, {schema}_api: " + (", ".join(applied) or "up to date"))
    print(
        f"roles: {roles.projector.name} (projector), {roles.reader.name} (reader), "
        f"{roles.api.name} (api)"
    )
    return 0


def run_rebuild(settings: Settings, args: argparse.Namespace) -> int:
    from horae.projections.rebuild import progress_printer, rebuild

    setup_logging("rebuild", settings.log_level)
    shadow = settings.projections.shadow or f"{settings.projection_schema}_shadow"
    config = _config(settings, shadow, "owner")
    roles = database_urls(settings, config.database_url).roles()
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    progress = rebuild(config, progress_printer(sys.stderr), stop, roles)
    sys.stderr.write("\n")
    if stop.is_set():
        print(f"interrupted: {progress.done} of {progress.total} records into {shadow}")
        return 130
    print(f"rebuilt {shadow}: {progress.done} records at {progress.rate:,.0f} records/s")
    return 0


def run_verify(settings: Settings, args: argparse.Namespace) -> int:
    import psycopg

    from horae.projections import schema as pschema
    from horae.projections.rebuild import verify

    live = settings.projection_schema
    shadow = settings.projections.shadow or f"{live}_shadow"
    _, owner = require_services(settings)
    try:
        report = verify(
            database_urls(settings, owner).reader, live, shadow, settings.projections.samples
        )
    except (ValueError, psycopg.errors.InsufficientPrivilege) as exc:
        print(f"verify: {exc}", file=sys.stderr)
        return 2
    print(report.render())
    if settings.projections.swap:
        with psycopg.connect(owner, autocommit=True) as conn:
            old = pschema.swap(conn, live, shadow)
        print(f"swapped: {shadow} is now {live}; the previous one is kept as {old}")
    return 1 if report.divergence and not settings.projections.swap else 0
