"""How a process reaches Kafka, as one typed value: :class:`KafkaConnection`.

A connection names the bootstrap servers, the security protocol (``PLAINTEXT``,
``SASL_PLAINTEXT``, ``SASL_SSL`` or ``SSL``), the SASL login (mechanism, user, password as a
:class:`~pydantic.SecretStr`) and the TLS files (the CA that signs the brokers' certificates; a
client certificate and key for mutual TLS). :meth:`KafkaConnection.from_settings` builds it
from the settings (``HORAE_KAFKA_*``) once per process; :meth:`KafkaConnection.config` turns
it into librdkafka properties. The value never reads the environment itself.

Defaults, when the settings leave them out:

- the protocol is ``SASL_*`` when a user is known, else ``PLAINTEXT``/``SSL``; ``*_SSL`` when a
  CA or client certificate is given (or the local stack runs on TLS), else ``*_PLAINTEXT``;
- with no user set and the bootstrap unset or the local stack's address, the local stack's
  admin (``<state>/kafka/admin.password``, once ``horae dev up`` made one) and, when that stack
  runs on TLS (``horae dev up --tls``), its CA (``<state>/tls/ca.pem``).

The process's connection is handed over once at start (:func:`use_connection`, from the CLI's
``configure_process``); :func:`horae.kafka.config.client_config` builds every client from it, so
adapters that still take a bootstrap string get the same transport and login. A process that
installed none (a library caller, a test) gets the settings read at each call, as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import SecretStr

if TYPE_CHECKING:
    from horae.settings import Settings

SecurityProtocol = Literal["PLAINTEXT", "SASL_PLAINTEXT", "SASL_SSL", "SSL"]
SCRAM = "SCRAM-SHA-512"
#: the local stack's TLS folder under the state directory (``horae dev up --tls``)
LOCAL_TLS_DIR = "tls"


@dataclass(frozen=True)
class KafkaCredentials:
    """A SASL user and its password (the password is left out of ``repr``)."""

    username: str
    password: str = field(repr=False)
    mechanism: str = SCRAM

    def config(self, protocol: str = "SASL_PLAINTEXT") -> dict[str, str]:
        """The SASL properties of this login (``protocol``: ``SASL_PLAINTEXT`` or
        ``SASL_SSL``; a TLS connection needs its CA too: :meth:`KafkaConnection.config`)."""
        return {
            "security.protocol": protocol,
            "sasl.mechanisms": self.mechanism,
            "sasl.username": self.username,
            "sasl.password": self.password,
        }


def _protocol(sasl: bool, tls: bool) -> SecurityProtocol:
    if sasl:
        return "SASL_SSL" if tls else "SASL_PLAINTEXT"
    return "SSL" if tls else "PLAINTEXT"


@dataclass(frozen=True)
class KafkaConnection:
    """Where and how a client connects to Kafka (see the module docstring)."""

    bootstrap: str
    security_protocol: SecurityProtocol = "PLAINTEXT"
    sasl_mechanism: str = SCRAM
    username: str | None = None
    password: SecretStr | None = field(default=None, repr=False)
    ssl_ca_file: Path | None = None
    ssl_cert_file: Path | None = None
    ssl_key_file: Path | None = None

    def __post_init__(self) -> None:
        if self.sasl and self.username is None:
            raise ValueError(f"security protocol {self.security_protocol} needs a SASL user")
        if (self.ssl_cert_file is None) != (self.ssl_key_file is None):
            raise ValueError("a client certificate needs its key, and a key its certificate")
        if not self.tls and (self.ssl_ca_file or self.ssl_cert_file):
            raise ValueError(
                f"TLS files given but security protocol {self.security_protocol} has no TLS"
            )

    @property
    def sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")

    @property
    def tls(self) -> bool:
        return self.security_protocol.endswith("SSL")

    # ------------------------------------------------------------------------------------
    @classmethod
    def from_settings(cls, settings: Settings, bootstrap: str | None = None) -> KafkaConnection:
        """The connection ``settings`` describe (``bootstrap`` replaces theirs)."""
        local = f"127.0.0.1:{settings.dev.kafka_port}"
        on_local = settings.kafka_bootstrap in (None, local)
        username, password = settings.kafka_username, settings.kafka_password
        if username is None and on_local:
            path = settings.state_dir / "kafka" / "admin.password"
            if path.exists():
                username, password = "admin", SecretStr(path.read_text().strip())
        if username is not None and password is None:
            password = SecretStr("")
        ca = settings.kafka_ssl_ca_file
        local_ca = settings.state_dir / LOCAL_TLS_DIR / "ca.pem"
        if ca is None and on_local and settings.kafka_security_protocol is None:
            ca = local_ca if local_ca.exists() else None
        protocol = settings.kafka_security_protocol or _protocol(
            username is not None, ca is not None or settings.kafka_ssl_cert_file is not None
        )
        sasl = protocol.startswith("SASL_")
        return cls(
            bootstrap=bootstrap or settings.kafka_bootstrap or local,
            security_protocol=protocol,
            sasl_mechanism=settings.kafka_sasl_mechanism,
            username=username if sasl else None,
            password=password if sasl else None,
            ssl_ca_file=ca,
            ssl_cert_file=settings.kafka_ssl_cert_file,
            ssl_key_file=settings.kafka_ssl_key_file,
        )

    def as_user(self, credentials: KafkaCredentials) -> KafkaConnection:
        """The same transport (TLS or not), logged in as ``credentials``."""
        return replace(
            self,
            security_protocol=_protocol(True, self.tls),
            sasl_mechanism=credentials.mechanism,
            username=credentials.username,
            password=SecretStr(credentials.password),
        )

    def anonymous(self) -> KafkaConnection:
        """The same transport without a SASL login."""
        return replace(
            self, security_protocol=_protocol(False, self.tls), username=None, password=None
        )

    def at(self, bootstrap: str) -> KafkaConnection:
        return replace(self, bootstrap=bootstrap)

    def credentials(self) -> KafkaCredentials | None:
        """The SASL login, or None."""
        if self.username is None:
            return None
        secret = self.password.get_secret_value() if self.password is not None else ""
        return KafkaCredentials(self.username, secret, self.sasl_mechanism)

    def config(self, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """librdkafka properties of a client (producer, consumer or admin) on this connection,
        with ``extra`` on top. ``PLAINTEXT`` adds no ``security.protocol`` (librdkafka's
        default)."""
        config: dict[str, Any] = {"bootstrap.servers": self.bootstrap}
        if self.security_protocol != "PLAINTEXT":
            config["security.protocol"] = self.security_protocol
        if self.sasl:
            config["sasl.mechanisms"] = self.sasl_mechanism
            config["sasl.username"] = self.username
            config["sasl.password"] = (
                self.password.get_secret_value() if self.password is not None else ""
            )
        if self.ssl_ca_file is not None:
            config["ssl.ca.location"] = str(self.ssl_ca_file)
        if self.ssl_cert_file is not None and self.ssl_key_file is not None:
            config["ssl.certificate.location"] = str(self.ssl_cert_file)
            config["ssl.key.location"] = str(self.ssl_key_file)
        if extra:
            config.update(extra)
        return config


# The connection this process was started with (see the module docstring).
_PROCESS: KafkaConnection | None = None


def use_connection(connection: KafkaConnection | None) -> None:
    """Make ``connection`` the one every client of this process is built from (None: read the
    settings at each call again)."""
    global _PROCESS
    _PROCESS = connection


def process_connection(bootstrap: str | None = None) -> KafkaConnection:
    """The installed connection (at ``bootstrap`` if given), else the settings' of now."""
    if _PROCESS is not None:
        return _PROCESS.at(bootstrap) if bootstrap else _PROCESS
    from horae.settings import Settings

    return KafkaConnection.from_settings(Settings(), bootstrap)
