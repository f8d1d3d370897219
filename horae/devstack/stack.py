"""The local stack as one object: which services to start, and where they listen.

``HORAE_KAFKA_BOOTSTRAP`` / ``HORAE_DATABASE_URL`` point at existing services: then that part is
neither started nor stopped here, only checked. Data lives under the state directory, the Kafka
jars under the cache directory (one folder per Kafka version).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from horae.devstack.kafka import KafkaNode
from horae.devstack.postgres import PostgresCluster
from horae.settings import Settings


@dataclass(frozen=True)
class Endpoints:
    kafka_bootstrap: str
    database_url: str


@dataclass(frozen=True)
class LocalStack:
    kafka: KafkaNode | None  # None: an external broker is configured
    postgres: PostgresCluster | None  # None: an external database is configured
    endpoints: Endpoints

    @classmethod
    def from_settings(
        cls, settings: Settings, state_dir: Path | None = None, cache_dir: Path | None = None
    ) -> LocalStack:
        """The stack ``settings`` describe; ``state_dir`` / ``cache_dir`` replace the settings'."""
        home = state_dir or settings.state_dir
        cache = cache_dir or settings.cache_dir
        kafka = None
        if settings.kafka_bootstrap is None:
            kafka = KafkaNode(
                home=home / "kafka",
                port=settings.dev.kafka_port,
                controller_port=settings.dev.kafka_controller_port,
                cache=cache / "kafka" / settings.dev.kafka_version,
                version=settings.dev.kafka_version,
                heap=settings.dev.kafka_heap,
            )
        postgres = None
        if settings.database_url is None:
            postgres = PostgresCluster(home / "postgres", settings.dev.postgres_port)
        endpoints = Endpoints(
            kafka_bootstrap=settings.kafka_bootstrap or (kafka.bootstrap if kafka else ""),
            database_url=settings.database_url or (postgres.url if postgres else ""),
        )
        return cls(kafka, postgres, endpoints)

    def up(self) -> None:
        if self.kafka is not None:
            self.kafka.start()
        if self.postgres is not None:
            self.postgres.start()

    def down(self) -> None:
        if self.kafka is not None:
            self.kafka.stop()
        if self.postgres is not None:
            self.postgres.stop()

    def status(self) -> dict[str, bool]:
        """Health of each part, checked against the endpoints (external ones too)."""
        from horae.devstack.probe import database_healthy, kafka_healthy

        admin = self.kafka.admin if self.kafka is not None else None
        return {
            "kafka": kafka_healthy(self.endpoints.kafka_bootstrap, admin),
            "postgres": database_healthy(self.endpoints.database_url),
        }
