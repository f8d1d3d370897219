"""The one place that builds a Kafka client config (producer, consumer or admin).

Every Horae process, tool and test gets its client settings from :func:`client_config`: the
bootstrap servers on the process's :class:`~horae.kafka.connection.KafkaConnection` (its
security protocol, SASL login and TLS files; built once from the settings at start, see
:mod:`horae.kafka.connection`), or on a connection the caller hands in. Credentials passed by
the caller replace the connection's login and keep its transport: on a TLS connection they log
in with ``SASL_SSL``, else ``SASL_PLAINTEXT``. No login at all (``authenticate=False``, or no user
known): a ``PLAINTEXT`` or ``SSL`` client.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from horae.kafka.connection import KafkaConnection, process_connection
from horae.kafka.connection import KafkaCredentials as KafkaCredentials


def settings_credentials() -> KafkaCredentials | None:
    """The login of the process's connection (the settings' ``HORAE_KAFKA_USERNAME`` /
    ``HORAE_KAFKA_PASSWORD``, or the local stack's admin), or None when no user is known."""
    return process_connection().credentials()


def client_config(
    bootstrap: str,
    extra: Mapping[str, Any] | None = None,
    *,
    credentials: KafkaCredentials | None = None,
    authenticate: bool = True,
    connection: KafkaConnection | None = None,
) -> dict[str, Any]:
    """The config of a client of ``bootstrap`` on ``connection`` (default: the process's),
    logged in as ``credentials`` (default: the connection's user, if any; none at all with
    ``authenticate=False``), with the librdkafka properties of ``extra`` on top."""
    conn = (connection or process_connection()).at(bootstrap)
    if not authenticate:
        conn = conn.anonymous()
    elif credentials is not None:
        conn = conn.as_user(credentials)
    return conn.config(extra)
