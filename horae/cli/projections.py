"""Read-model commands: ``horae projector``, ``horae migrate``,
``horae projections rebuild|verify|swap``.

Every flag has an environment fallback; services come from ``HORAE_KAFKA_BOOTSTRAP`` /
``HORAE_DATABASE_URL`` (else the local stack), the live schema from ``HORAE_PROJECTION_SCHEMA``.
Exit codes: 0 ok, 1 ``verify`` found divergence, 2 usage errors.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from typing import TYPE_CHECKING

from horae.cli.common import env_default, require_services, serve_metrics, setup_logging
from horae.settings import get_settings

if TYPE_CHECKING:
    from horae.projections.projector import ProjectorConfig


def _schema_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--schema",
        default=get_settings().projection_schema,
        help="live read-model schema (env HORAE_PROJECTION_SCHEMA, default horae)",
    )


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("projector", help="project the topics into PostgreSQL read models")
    _schema_flag(p)
    p.add_argument(
        "--batch-records",
        type=int,
        default=int(env_default("HORAE_PROJECTOR_BATCH_RECORDS", "5000")),
        help="records per batch at most (env HORAE_PROJECTOR_BATCH_RECORDS)",
    )
    p.add_argument(
        "--batch-ms",
        type=int,
        default=int(env_default("HORAE_PROJECTOR_BATCH_MS", "200")),
        help="milliseconds to fill a batch at most (env HORAE_PROJECTOR_BATCH_MS)",
    )
    p.add_argument(
        "--session-timeout-ms",
        type=int,
        default=int(env_default("HORAE_PROJECTOR_SESSION_TIMEOUT_MS", "10000")),
        help="consumer group session timeout (env HORAE_PROJECTOR_SESSION_TIMEOUT_MS)",
    )
    p.add_argument(
        "--instance-id",
        default=env_default("HORAE_PROJECTOR_INSTANCE_ID", ""),
        help="static group membership id (a restart keeps its partitions without a rebalance); "
        "unique per running projector (env HORAE_PROJECTOR_INSTANCE_ID, default: dynamic)",
    )
    port = get_settings().projector_metrics_port
    p.add_argument(
        "--metrics-port",
        type=int,
        default=port or 0,
        help="serve /metrics on this port; 0 = off (env HORAE_PROJECTOR_METRICS_PORT)",
    )
    p.set_defaults(func=run_projector)

    m = subparsers.add_parser("migrate", help="create or migrate the read-model schema")
    _schema_flag(m)
    m.set_defaults(func=run_migrate)

    proj = subparsers.add_parser("projections", help="rebuild, verify and swap read models")
    sub = proj.add_subparsers(dest="projections_command", metavar="ACTION", required=True)
    r = sub.add_parser("rebuild", help="replay every topic from the beginning into the shadow")
    _schema_flag(r)
    r.add_argument("--shadow", default=None, help="shadow schema (default <schema>_shadow)")
    r.set_defaults(func=run_rebuild)
    v = sub.add_parser("verify", help="compare shadow and live row by row")
    _schema_flag(v)
    v.add_argument("--shadow", default=None, help="shadow schema (default <schema>_shadow)")
    v.add_argument("--samples", type=int, default=5, help="divergent keys shown per table")
    v.add_argument("--swap", action="store_true", help="then make the shadow live")
    v.set_defaults(func=run_verify)


def _config(schema: str, batch_records: int = 5000, batch_ms: int = 200) -> ProjectorConfig:
    from horae.projections.projector import ProjectorConfig

    settings = get_settings()
    bootstrap, database_url = require_services(settings)
    return ProjectorConfig(
        bootstrap=bootstrap,
        database_url=database_url,
        schema=schema,
        topic_prefix=settings.topic_prefix,
        batch_records=batch_records,
        batch_ms=batch_ms,
    )


def run_projector(args: argparse.Namespace) -> int:
    from horae.projections.metrics import ProjectionMetrics
    from horae.projections.projector import Projector

    setup_logging("projector")
    config = _config(args.schema, batch_records=args.batch_records, batch_ms=args.batch_ms)
    config.consumer_overrides["session.timeout.ms"] = args.session_timeout_ms
    if args.instance_id:
        config.consumer_overrides["group.instance.id"] = args.instance_id
    metrics = ProjectionMetrics()
    if args.metrics_port:
        serve_metrics(args.metrics_port, metrics.registry)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    projector = Projector(config, metrics)
    logging.getLogger(__name__).info(
        "projecting %s* into schema %s", config.topic_prefix, config.schema
    )
    projector.run(stop)
    return 0


def run_migrate(args: argparse.Namespace) -> int:
    import psycopg

    from horae.projections import schema as pschema

    _, database_url = require_services(get_settings())
    with psycopg.connect(database_url, autocommit=True) as conn:
        applied = pschema.migrate(conn, args.schema)
    print(f"schema {args.schema}: " + (", ".join(applied) if applied else "up to date"))
    return 0


def run_rebuild(args: argparse.Namespace) -> int:
    from horae.projections.rebuild import progress_printer, rebuild

    setup_logging("rebuild")
    shadow = args.shadow or f"{args.schema}_shadow"
    config = _config(shadow)
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    progress = rebuild(config, progress_printer(sys.stderr), stop)
    sys.stderr.write("\n")
    if stop.is_set():
        print(f"interrupted: {progress.done} of {progress.total} records into {shadow}")
        return 130
    print(f"rebuilt {shadow}: {progress.done} records at {progress.rate:,.0f} records/s")
    return 0


def run_verify(args: argparse.Namespace) -> int:
    import psycopg

    from horae.projections import schema as pschema
    from horae.projections.rebuild import verify

    shadow = args.shadow or f"{args.schema}_shadow"
    _, database_url = require_services(get_settings())
    try:
        report = verify(database_url, args.schema, shadow, args.samples)
    except ValueError as exc:
        print(f"verify: {exc}", file=sys.stderr)
        return 2
    print(report.render())
    if args.swap:
        with psycopg.connect(database_url, autocommit=True) as conn:
            old = pschema.swap(conn, args.schema, shadow)
        print(f"swapped: {shadow} is now {args.schema}; the previous one is kept as {old}")
    return 1 if report.divergence and not args.swap else 0
