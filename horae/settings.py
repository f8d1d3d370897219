"""The one configuration object of Horae (pydantic-settings, env prefix ``HORAE_``)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

PROJECT_ROOT = Path(__file__).resolve().parent.parent


class Settings(BaseSettings):
    """Every knob of every Horae process. Each field reads ``HORAE_<NAME>`` from the environment."""

    model_config = SettingsConfigDict(env_prefix="HORAE_", extra="ignore")

    # --- services -------------------------------------------------------------------------
    kafka_bootstrap: str | None = Field(
        default=None,
        description="Kafka bootstrap servers. Unset: the local stack (horae dev up) is used.",
    )
    database_url: str | None = Field(
        default=None,
        description="PostgreSQL URL. Unset: the local stack's throwaway cluster is used.",
    )
    schema_registry_url: str | None = Field(
        default=None,
        description="Confluent-compatible schema registry; unset: the committed catalogue.",
    )
    topic_prefix: str = Field(default="horae.", description="Prefix of every Horae topic name.")
    topic_partitions: int = Field(
        default=12, description="Partitions of each trigger-partitioned topic (horae topics apply)."
    )
    topic_replication_factor: int | None = Field(
        default=None, description="Replication factor of Horae topics; unset: min(3, brokers)."
    )
    tenant_keys: dict[str, dict[str, str]] = Field(
        default_factory=dict,
        description="Ingress keys per tenant as JSON {tenant: {key_id: secret}}: definitions and "
        "commands produced to Kafka must be signed with one of their tenant's keys.",
    )

    # --- projections (read models) -------------------------------------------------------
    projection_schema: str = Field(
        default="horae", description="PostgreSQL schema of the live read models."
    )
    projector_metrics_port: int | None = Field(
        default=None, description="Port of the projector's /metrics (unset: not served)."
    )

    # --- local stack ----------------------------------------------------------------------
    state_dir: Path = Field(
        default=PROJECT_ROOT / ".horae",
        description="Where the local stack keeps jars, Kafka logs and the PostgreSQL cluster.",
    )
    dev_kafka_port: int = 19092
    dev_kafka_controller_port: int = 19093
    dev_postgres_port: int = 15432
    dev_kafka_version: str = "4.1.1"
    dev_kafka_heap: str = "512m"

    # --- domain limits --------------------------------------------------------------------
    min_interval_s: int = Field(default=60, description="Smallest `every` interval accepted.")


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read once from the environment."""
    return Settings()
