"""The one place that builds a Kafka client config (producer, consumer or admin).

Every Horae process, tool and test gets its client settings from :func:`client_config`: the
bootstrap servers and, when credentials are known, ``SASL_PLAINTEXT`` with ``SCRAM-SHA-512`` under
that user. Credentials come from the caller, or else from the settings
(``HORAE_KAFKA_USERNAME`` / ``HORAE_KAFKA_PASSWORD``, so each process role runs as the principal
its environment names; with no user set and ``HORAE_KAFKA_BOOTSTRAP`` unset or the local stack's
address, the local stack's admin, once ``horae dev up`` made one); none at all: a plaintext
client, for brokers without authentication.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

SCRAM = "SCRAM-SHA-512"


@dataclass(frozen=True)
class KafkaCredentials:
    """A SASL user and its password (the password is left out of ``repr``)."""

    username: str
    password: str = field(repr=False)
    mechanism: str = SCRAM

    def config(self) -> dict[str, str]:
        return {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": self.mechanism,
            "sasl.username": self.username,
            "sasl.password": self.password,
        }


def settings_credentials() -> KafkaCredentials | None:
    """The credentials the settings name (``HORAE_KAFKA_USERNAME`` / ``HORAE_KAFKA_PASSWORD``),
    or None when no user is set."""
    from horae.settings import Settings

    settings = Settings()
    if settings.kafka_username is None:
        local = f"127.0.0.1:{settings.dev.kafka_port}"
        if settings.kafka_bootstrap in (None, local):  # the local stack: its admin, if it has one
            path = settings.state_dir / "kafka" / "admin.password"
            if path.exists():
                return KafkaCredentials("admin", path.read_text().strip())
        return None
    password = settings.kafka_password
    return KafkaCredentials(
        settings.kafka_username, password.get_secret_value() if password is not None else ""
    )


def client_config(
    bootstrap: str,
    extra: Mapping[str, Any] | None = None,
    *,
    credentials: KafkaCredentials | None = None,
    authenticate: bool = True,
) -> dict[str, Any]:
    """The config of a client of ``bootstrap``, authenticated as ``credentials`` (default: the
    settings' user, if any; none at all with ``authenticate=False``), with the librdkafka
    properties of ``extra`` on top."""
    creds = None
    if authenticate:
        creds = credentials if credentials is not None else settings_credentials()
    config: dict[str, Any] = {"bootstrap.servers": bootstrap}
    if creds is not None:
        config.update(creds.config())
    if extra:
        config.update(extra)
    return config
