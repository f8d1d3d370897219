"""SCRAM-SHA-512 users of the cluster (KRaft keeps them in its metadata)."""

from __future__ import annotations

import secrets
from collections.abc import Mapping

from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from horae.kafka.config import KafkaCredentials, client_config
from horae.kafka.connection import KafkaConnection

ITERATIONS = 8192
TIMEOUT_S = 30.0


def new_password() -> str:
    return secrets.token_urlsafe(24)


def upsert_scram_users(
    bootstrap: str,
    admin: KafkaCredentials | None,
    users: Mapping[str, str],
    *,
    connection: KafkaConnection | None = None,
) -> None:
    """Create or replace the SCRAM-SHA-512 credential of each ``user -> password``, as
    ``admin`` (default: the settings' user) on ``connection`` (default: the process's); raise
    the broker's error on any failure."""
    if not users:
        return
    config = client_config(bootstrap, {"log_level": 3}, credentials=admin, connection=connection)
    client = AdminClient(config)
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, ITERATIONS)
    upserts = [
        UserScramCredentialUpsertion(user, info, password.encode())
        for user, password in users.items()
    ]
    futures = client.alter_user_scram_credentials(upserts, request_timeout=TIMEOUT_S)  # type: ignore[arg-type]
    for future in futures.values():
        future.result()
