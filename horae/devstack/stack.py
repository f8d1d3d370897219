"""The local stack as one object: which services to start, and where they listen.

``HORAE_KAFKA_BOOTSTRAP`` / ``HORAE_DATABASE_URL`` point at existing services: then that part is
neither started nor stopped here, only checked. Data lives under the state directory, the Kafka
jars under the cache directory (one folder per Kafka version).

Kafka is one node (``<state>/kafka``) or, with ``dev.brokers`` 3, a cluster whose first node
keeps that home and whose others live in ``<state>/kafka/node-<id>`` (a stack whose data holds
such nodes keeps being a cluster, flag or not). On TLS (``dev.tls``, or a stack that made its CA
and was not brought down since: ``<state>/tls/ca.pem``) the CA lives in ``<state>/tls`` and both
parts use it; :meth:`LocalStack.down` removes it.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from horae.database import with_tls
from horae.devstack.kafka import KafkaCluster, KafkaNode
from horae.devstack.postgres import PostgresCluster
from horae.devstack.tls import Material, make_ca
from horae.kafka.connection import LOCAL_TLS_DIR, KafkaConnection
from horae.settings import Settings

#: each broker's heap when the cluster has several (the single node's default is 512m)
CLUSTER_HEAP = "320m"


@dataclass(frozen=True)
class Endpoints:
    kafka_bootstrap: str
    database_url: str


@dataclass(frozen=True)
class LocalStack:
    kafka: KafkaNode | KafkaCluster | None  # None: an external broker is configured
    postgres: PostgresCluster | None  # None: an external database is configured
    endpoints: Endpoints
    tls: Material | None = None  # the local CA, when the stack runs on TLS

    @classmethod
    def from_settings(
        cls, settings: Settings, state_dir: Path | None = None, cache_dir: Path | None = None
    ) -> LocalStack:
        """The stack ``settings`` describe; ``state_dir`` / ``cache_dir`` replace the settings'."""
        home = state_dir or settings.state_dir
        cache = cache_dir or settings.cache_dir
        dev = settings.dev
        tls_home = home / LOCAL_TLS_DIR
        tls = Material(tls_home) if dev.tls or (tls_home / "ca.pem").exists() else None
        kafka: KafkaNode | KafkaCluster | None = None
        if settings.kafka_bootstrap is None:
            kafka = _kafka(settings, home / "kafka", cache, tls)
        postgres = None
        if settings.database_url is None:
            postgres = PostgresCluster(home / "postgres", dev.postgres_port, tls=tls)
        database_url = settings.database_url or (postgres.url if postgres else "")
        endpoints = Endpoints(
            kafka_bootstrap=settings.kafka_bootstrap or (kafka.bootstrap if kafka else ""),
            database_url=with_tls(
                database_url, settings.database_sslmode, settings.database_ssl_ca_file
            ),
        )
        return cls(kafka, postgres, endpoints, tls)

    def up(self) -> None:
        if self.tls is not None:
            make_ca(self.tls.home)
        if self.kafka is not None:
            self.kafka.start()
        if self.postgres is not None:
            self.postgres.start()

    def down(self) -> None:
        if self.kafka is not None:
            self.kafka.stop()
        if self.postgres is not None:
            self.postgres.stop()
        if self.tls is not None and self.kafka is not None and self.postgres is not None:
            shutil.rmtree(self.tls.home, ignore_errors=True)

    def kafka_connection(self) -> KafkaConnection | None:
        """How a client of this machine reaches the local Kafka as its admin (SCRAM), on the
        stack's transport; None for an external broker or one without authentication."""
        if self.kafka is None or self.kafka.admin is None:
            return None
        admin = self.kafka.admin
        return self.kafka.connection().as_user(admin)

    def client_env(self) -> dict[str, str]:
        """The ``HORAE_*`` variables a client process needs for this stack: the endpoints, and
        on TLS the protocol and CA files."""
        env = {
            "HORAE_KAFKA_BOOTSTRAP": self.endpoints.kafka_bootstrap,
            "HORAE_DATABASE_URL": self.endpoints.database_url,
        }
        if self.tls is not None:
            env.update(
                HORAE_KAFKA_SECURITY_PROTOCOL="SASL_SSL",
                HORAE_KAFKA_SSL_CA_FILE=str(self.tls.ca),
                HORAE_DATABASE_SSLMODE="verify-full",
                HORAE_DATABASE_SSL_CA_FILE=str(self.tls.ca),
            )
        return env

    def status(self) -> dict[str, bool]:
        """Health of each part, checked against the endpoints (external ones too)."""
        from horae.devstack.probe import database_healthy, kafka_healthy

        if self.kafka is not None:
            kafka_up = self.kafka.healthy()
        else:
            kafka_up = kafka_healthy(self.endpoints.kafka_bootstrap)
        return {"kafka": kafka_up, "postgres": database_healthy(self.endpoints.database_url)}


def _kafka(
    settings: Settings, home: Path, cache: Path, tls: Material | None
) -> KafkaNode | KafkaCluster:
    dev = settings.dev
    found = len(list(home.glob("node-*/data"))) + 1 if home.exists() else 1
    brokers = dev.brokers if "brokers" in dev.model_fields_set or found == 1 else found
    jars = cache / "kafka" / dev.kafka_version
    if brokers == 1:
        return KafkaNode(
            home=home,
            port=dev.kafka_port,
            controller_port=dev.kafka_controller_port,
            cache=jars,
            version=dev.kafka_version,
            heap=dev.kafka_heap,
            tls=tls,
        )
    ports = [(dev.kafka_port, dev.kafka_controller_port)]
    extra = dev.kafka_node_ports
    for i in range(1, brokers):
        if len(extra) >= 2 * i:
            ports.append((extra[2 * i - 2], extra[2 * i - 1]))
        else:
            ports.append((dev.kafka_port + 2 * i, dev.kafka_controller_port + 2 * i))
    voters = tuple((i + 1, cport) for i, (_, cport) in enumerate(ports))
    heap = dev.kafka_heap if "kafka_heap" in dev.model_fields_set else CLUSTER_HEAP
    nodes = tuple(
        KafkaNode(
            home=home if i == 0 else home / f"node-{i + 1}",
            port=port,
            controller_port=cport,
            cache=jars,
            version=dev.kafka_version,
            heap=heap,
            node_id=i + 1,
            voters=voters,
            admin_file=home / "admin.password",
            tls=tls,
        )
        for i, (port, cport) in enumerate(ports)
    )
    return KafkaCluster(nodes)
