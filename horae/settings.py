"""The one configuration object of Horae (pydantic-settings, env prefix ``HORAE_``)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field, model_validator
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

    # --- dispatcher (horae dispatcher) ------------------------------------------------------
    dispatch_allow: list[str] = Field(
        default_factory=list,
        description="Allowlist of non-public targets, JSON list of CIDRs and/or host:port "
        '(e.g. ["127.0.0.1/32"]) for local demos and tests; empty in production.',
    )
    dispatch_connect_timeout_s: float = Field(default=5.0, description="Outbound connect limit.")
    dispatch_read_timeout_s: float = Field(default=10.0, description="Outbound read limit.")
    dispatch_deadline_s: float = Field(default=30.0, description="Limit on a whole attempt.")
    dispatch_max_body_bytes: int = Field(default=65_536, description="Response bytes read.")
    dispatch_max_inflight: int = Field(default=256, description="Concurrent sends per process.")
    dispatch_tenant_rate: float = Field(
        default=100.0, description="Default per-tenant dispatch quota (dispatches/s)."
    )
    dispatch_tenant_inflight: int = Field(
        default=64, description="Default per-tenant limit on concurrent sends (hard)."
    )
    dispatch_tenant_limits: dict[str, dict[str, float]] = Field(
        default_factory=dict,
        description='Per-tenant overrides, JSON {tenant: {"rate": r, "inflight": n}}.',
    )
    dispatch_catchup_share: float = Field(
        default=0.1, description="Share of a tenant's dispatch quota catch-up may use (hard cap)."
    )
    dispatch_breaker_threshold: int = Field(
        default=5, description="Consecutive failed fires that pause a trigger (0: never)."
    )
    webhook_secrets: dict[str, str] = Field(
        default_factory=dict,
        description='Webhook signing secrets by ref, JSON {ref: "whsec_..."}; Target.secret_refs '
        "name them (current first).",
    )
    callback_secret: str | None = Field(
        default=None,
        description="HMAC key of outcome-callback tokens; unset: random per process (callbacks "
        "then only verify at the dispatcher that issued them).",
    )
    callback_ttl_s: int = Field(default=3600, description="How long a callback token is valid.")
    platform_key_id: str = Field(
        default="horae-platform", description="Key id of the platform's definition-signing key."
    )
    platform_key: str | None = Field(
        default=None,
        description="Platform signing key (the breaker signs paused versions with it). When set, "
        "it is added to every tenant's map in tenant_keys, so planners accept those versions.",
    )
    dispatcher_metrics_port: int | None = Field(
        default=None, description="Port of the dispatcher's /metrics (unset: not served)."
    )

    @model_validator(mode="after")
    def _platform_key_in_every_tenant(self) -> Settings:
        if self.platform_key:
            for keys in self.tenant_keys.values():
                keys.setdefault(self.platform_key_id, self.platform_key)
        return self


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read once from the environment."""
    return Settings()
