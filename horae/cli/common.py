"""Helpers shared by the CLI subcommands: env fallbacks, service endpoints, metrics."""

from __future__ import annotations

import logging
import os

from prometheus_client import CollectorRegistry, start_http_server

from horae.devstack import StackError
from horae.devstack.probe import database_healthy, kafka_healthy
from horae.devstack.stack import LocalStack
from horae.settings import Settings


def setup_logging(process: str) -> None:
    """Log lines tagged with the process name, at ``HORAE_LOG_LEVEL`` (default INFO)."""
    logging.basicConfig(
        level=os.environ.get("HORAE_LOG_LEVEL", "INFO"),
        format=f"%(asctime)s %(levelname)s {process} %(message)s",
    )


def env_default(name: str, default: str) -> str:
    """A flag's default: the environment variable ``name`` if set, else ``default``."""
    return os.environ.get(name, default)


def require_services(settings: Settings, need_database: bool = True) -> tuple[str, str]:
    """(bootstrap, database URL): the configured ones, else the local stack's endpoints.

    Raises :class:`StackError` (printed without a traceback) when one of them does not answer.
    """
    endpoints = LocalStack.from_settings(settings).endpoints
    if not kafka_healthy(endpoints.kafka_bootstrap, timeout_s=10.0):
        raise StackError(
            f"Kafka at {endpoints.kafka_bootstrap} does not answer. Start the local stack with "
            "`horae dev up`, or point HORAE_KAFKA_BOOTSTRAP at a running broker."
        )
    if need_database and not database_healthy(endpoints.database_url, timeout_s=10):
        raise StackError(
            f"PostgreSQL at {endpoints.database_url} does not answer. Start the local stack with "
            "`horae dev up`, or point HORAE_DATABASE_URL at a running database."
        )
    return endpoints.kafka_bootstrap, endpoints.database_url if need_database else ""


def serve_metrics(port: int, registry: CollectorRegistry) -> None:
    """Serve ``registry`` on ``http://127.0.0.1:<port>/metrics`` from a daemon thread."""
    start_http_server(port, addr="127.0.0.1", registry=registry)


def ensure_topics(settings: Settings, bootstrap: str) -> None:
    """Create or update the topic catalogue under the configured prefix (idempotent)."""
    from horae.contracts.admin import Plan, admin_client, apply, auto_replication_factor

    admin = admin_client(bootstrap)
    rf = settings.topic_replication_factor or auto_replication_factor(admin)
    apply(admin, Plan(settings.topic_prefix, settings.topic_partitions, rf))
