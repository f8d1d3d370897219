"""Health probes that work for any endpoint, local or external."""

from __future__ import annotations

import socket

from horae.kafka.config import KafkaCredentials, client_config
from horae.kafka.connection import KafkaConnection


def _any_reachable(bootstrap: str) -> bool:
    """True when some bootstrap host:port accepts a TCP connection (avoids client log spam)."""
    for server in bootstrap.split(","):
        host, _, port = server.strip().rpartition(":")
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=1.0):
                return True
        except (OSError, ValueError):
            continue
    return False


def kafka_healthy(
    bootstrap: str,
    credentials: KafkaCredentials | None = None,
    timeout_s: float = 3.0,
    *,
    authenticate: bool = True,
    connection: KafkaConnection | None = None,
    brokers: int = 1,
) -> bool:
    """True when the broker answers a metadata request naming at least ``brokers`` brokers
    (on ``connection``, default: the process's; as ``credentials``, default: the connection's
    user; ``authenticate=False``: without any)."""
    if not bootstrap or not _any_reachable(bootstrap):
        return False
    from confluent_kafka.admin import AdminClient

    try:
        config = client_config(
            bootstrap,
            {"log_level": 0},
            credentials=credentials,
            authenticate=authenticate,
            connection=connection,
        )
        admin = AdminClient(config)
        meta = admin.list_topics(timeout=timeout_s)
    except Exception:
        return False
    return len(meta.brokers) >= brokers


def database_healthy(url: str, timeout_s: int = 3) -> bool:
    if not url:
        return False
    import psycopg

    try:
        with psycopg.connect(url, connect_timeout=timeout_s) as conn:
            conn.execute("select 1")
    except psycopg.Error:
        return False
    return True
