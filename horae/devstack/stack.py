"""The local stack as one object: which services to start, and where they listen.

``HORAE_KAFKA_BOOTSTRAP`` / ``HORAE_DATABASE_URL`` point at existing services: then that part is
neither started nor stopped here, only checked.
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
    def from_settings(cls, settings: Settings, state_dir: Path | None = None) -> LocalStack:
        home = state_dir or settings.state_dir
        kafka = None
        if settings.kafka_bootstrap is None:
            kafka = KafkaNode(
                home / "kafka",
                settings.dev_kafka_port,
                settings.dev_kafka_controller_port,
                settings.dev_kafka_heap,
            )
        postgres = None
        if settings.database_url is None:
            postgres = PostgresCluster(home / "postgres", settings.dev_postgres_port)
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

        return {
            "kafka": kafka_healthy(self.endpoints.kafka_bootstrap),
            "postgres": database_healthy(self.endpoints.database_url),
        }
