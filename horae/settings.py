"""The one configuration object of Horae (pydantic-settings).

:class:`Settings` holds the knobs every process shares and one section per process or area
(``planner``, ``dispatcher``, ``projector``, ``next``, ``demo``, ``api``, ``dev``) or operator
command (``dlq``, ``projections``, ``topics``, ``tenants``, ``chaos``). Each field reads one
environment variable: ``HORAE_<FIELD>`` for the shared ones, ``HORAE_<SECTION>_<FIELD>`` for a
section's (``settings.planner.tick_s`` <- ``HORAE_PLANNER_TICK_S``). This module is the only place
that reads ``HORAE_*``; the CLI derives each command's flags from the same fields
(:mod:`horae.cli.common`), and everything else is handed the values it needs. One exception, on
the client side: the tenant CLI's connection to the API (``HORAE_API_URL``, ``HORAE_API_TOKEN``)
is :class:`horae.cli.connect.ClientSettings`, with flags ``--api-url`` and ``--token`` (the
server's ``api`` section is not the client's).

Keys and secrets are :class:`~pydantic.SecretStr` (``repr`` and ``str`` show ``**********``;
``.get_secret_value()`` reads them); the database URLs, which may hold passwords, are left out
of ``repr`` too.
"""

from __future__ import annotations

import socket
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from horae.contracts.events import Role
from horae.contracts.grants import DEFAULT_ROLES, Grants, TenantGrant
from horae.contracts.topics import TENANT_ID
from horae.paths import default_cache_dir, default_state_dir

#: Where a worker's ``/metrics`` listens unless told otherwise: loopback only.
METRICS_HOST = "127.0.0.1"
#: a worker's /metrics (the planner's, the dispatcher's and the projector's sections)
MetricsPort = Annotated[
    int, Field(description="serve /metrics at this port (on metrics_host); 0: not served")
]
MetricsHost = Annotated[
    str,
    Field(
        description="address /metrics listens on (metrics_port): loopback by default; 0.0.0.0 "
        "(or ::) for a scraper outside the process's network namespace (a pod's, where the "
        "chart sets it)"
    ),
]

#: The shape of the tenants' definition keys once read: tenant -> key id -> key bytes.
TenantKeyBytes = dict[str, dict[str, bytes]]


class IngressKey(BaseModel):
    """One tenant ingress key: its secret and the roles it grants (never ``platform``)."""

    secret: SecretStr
    roles: list[Role] = Field(default_factory=lambda: sorted(DEFAULT_ROLES))


class TenantGrantSettings(BaseModel):
    """The ceilings the platform grants a tenant (see :class:`horae.contracts.grants.TenantGrant`;
    a field left out keeps the platform default)."""

    horizon_max_s: int | None = None
    backfill_max_fires: int | None = None
    dispatch_per_s: float | None = None
    catchup_share: float | None = None
    max_concurrency: int | None = None


class PlannerSettings(BaseSettings):
    """``horae planner`` (``HORAE_PLANNER_*``)."""

    model_config = SettingsConfigDict(env_prefix="HORAE_PLANNER_", extra="ignore")

    slot: str = Field(
        default_factory=socket.gethostname,
        description="stable worker slot; the transactional.id derives from it (default: host name)",
    )
    tick_s: float = Field(default=1.0, description="seconds between decision ticks")
    epsilon_s: float = Field(default=0.0, description="decide the instants due at now - epsilon")
    max_skew_s: float = Field(default=2.0, description="clock gate bound against the broker")
    session_timeout_ms: int = Field(default=10_000, description="consumer group session timeout")
    metrics_port: MetricsPort = 0
    metrics_host: MetricsHost = METRICS_HOST
    overlap_attempt_s: float = Field(
        default=30.0,
        description="overlap: a running fire with no outcome counts as running until its "
        "deadline plus this (the dispatchers' HORAE_DISPATCHER_DEADLINE_S)",
    )
    index: Literal["compact", "objects"] = Field(
        default="compact",
        description="due index representation: compact (typed arrays, a timing wheel; "
        "snapshots) or objects (an entry object per trigger, a heap; for bisecting)",
    )
    snapshot_changes: int = Field(
        default=10_000,
        ge=0,
        description="snapshot a partition's compact due index to the planner-snapshots topic "
        "once this many changelog records (and a quarter of its triggers) followed its last "
        "snapshot, so a start loads it and replays only the rest; 0: no snapshots",
    )
    txn_max_decisions: int = Field(
        default=8_000,
        ge=1,
        description="commit a transaction once it holds about this many decisions (a peak "
        "streams into the ledger instead of waiting for its last decision); an iteration's "
        "first transaction ends after one chunk of 256, each next may be twice as large, up to "
        "this bound and txn_max_ms",
    )
    txn_max_ms: float = Field(
        default=200.0,
        ge=0,
        description="commit a transaction once it has been filling for this long (ms), or holds "
        "txn_max_decisions, whichever first",
    )


class DispatcherSettings(BaseSettings):
    """``horae dispatcher`` (``HORAE_DISPATCHER_*``)."""

    model_config = SettingsConfigDict(env_prefix="HORAE_DISPATCHER_", extra="ignore")

    slot: str = Field(
        default_factory=socket.gethostname,
        description="stable worker slot; group instance and transactional.id derive from it "
        "(default: host name)",
    )
    metrics_port: MetricsPort = 0
    metrics_host: MetricsHost = METRICS_HOST
    callback_port: int | None = Field(
        default=None,
        description="serve outcome callbacks (POST /v1/outcomes) on this port (0: any free "
        "port); unset: not served",
    )
    callback_host: str = Field(default="127.0.0.1", description="address of the callback server")
    max_inflight: int = Field(default=256, description="concurrent sends of this process")
    session_timeout_ms: int = Field(default=10_000, description="consumer group session timeout")
    connect_timeout_s: float = Field(default=5.0, description="outbound connect limit")
    read_timeout_s: float = Field(default=10.0, description="outbound read limit")
    deadline_s: float = Field(default=30.0, description="limit on a whole attempt")
    max_body_bytes: int = Field(default=65_536, description="response bytes read at most")
    breaker_threshold: int = Field(
        default=5, description="consecutive failed fires that pause a trigger (0: never)"
    )
    allow: list[str] = Field(
        default_factory=list,
        description="allowlist of non-public targets, JSON list of CIDRs and/or host:port "
        '(e.g. ["127.0.0.1/32"]) for local demos and tests; empty in production',
    )
    webhook_secrets: dict[str, dict[str, SecretStr]] = Field(
        default_factory=dict,
        description='webhook signing secrets per tenant, JSON {tenant: {ref: "whsec_..."}}; a '
        "trigger's Target.secret_refs name refs of its own tenant (current first)",
    )
    callback_secret: SecretStr | None = Field(
        default=None,
        description="HMAC key of outcome-callback tokens; unset: random per process (callbacks "
        "then only verify at the dispatcher that issued them)",
    )
    callback_ttl_s: int = Field(default=3600, description="how long a callback token is valid")
    event_loop: Literal["uvloop", "asyncio"] = Field(
        default="uvloop",
        description="the sending loop: uvloop (faster; asyncio's when uvloop is not installed) "
        "or asyncio's own (docs/performance.md)",
    )
    http_client: Literal["lean", "aiohttp"] = Field(
        default="lean",
        description="the HTTP client that sends: lean (HTTP/1.1 on an asyncio protocol and "
        "httptools, keep-alive pools per pinned address) or aiohttp's (docs/performance.md)",
    )


class ProjectorSettings(BaseSettings):
    """``horae projector`` (``HORAE_PROJECTOR_*``)."""

    model_config = SettingsConfigDict(env_prefix="HORAE_PROJECTOR_", extra="ignore")

    batch_records: int = Field(default=5000, description="records per batch at most")
    batch_ms: int = Field(default=200, description="milliseconds to fill a batch at most")
    session_timeout_ms: int = Field(default=10_000, description="consumer group session timeout")
    instance_id: str | None = Field(
        default=None,
        description="static group membership id (a restart keeps its partitions without a "
        "rebalance), unique per running projector; unset: dynamic membership",
    )
    metrics_port: MetricsPort = 0
    metrics_host: MetricsHost = METRICS_HOST


class NextSettings(BaseSettings):
    """``horae next`` (``HORAE_NEXT_*``)."""

    model_config = SettingsConfigDict(env_prefix="HORAE_NEXT_", extra="ignore")

    zone: str = Field(default="UTC", description="IANA time zone")
    after: str | None = Field(
        default=None, description="RFC 3339 instant to start after; unset: now"
    )
    count: int = Field(default=5, description="how many instants, 1..1000")
    local: bool = Field(
        default=False, description="also print local wall time, offset, tzdata and DST notes"
    )
    dst_gap: str = Field(
        default="shift", description="shift|skip for fixed-time jobs in a spring-forward gap"
    )
    dst_repeat: str = Field(
        default="first", description="first|both for fixed-time jobs in a fall-back repeat"
    )
    jsonl: bool = Field(
        default=False, description="read JSON request lines on stdin, write one JSON line each"
    )


class DemoSettings(BaseSettings):
    """``horae demo`` (``HORAE_DEMO_*``)."""

    model_config = SettingsConfigDict(env_prefix="HORAE_DEMO_", extra="ignore")

    expr: str = Field(default="*/5 * * * * *", description="the demo trigger's cron expression")
    seconds: float = Field(default=0.0, description="stop after this long; 0: until Ctrl-C")
    log_level: str = Field(default="WARNING", description="log level of the demo's processes")
    kafka_logs: bool = Field(
        default=False,
        description="print librdkafka's own log lines (%4|...|GETPID|...) of the demo and its "
        "processes; off: left out",
    )


class DlqSettings(BaseSettings):
    """``horae dlq list|redrive`` (``HORAE_DLQ_*``)."""

    model_config = SettingsConfigDict(env_prefix="HORAE_DLQ_", extra="ignore")

    fire_key: list[str] = Field(
        default_factory=list, description="only these fires (repeat the flag; env: JSON list)"
    )
    tenant: str | None = Field(default=None, description="only this tenant's fires")
    trigger: str | None = Field(default=None, description="only this trigger's fires")
    all: bool = Field(default=False, description="redrive every entry (no filter needed)")
    dry_run: bool = Field(default=False, description="print, produce nothing")


class ProjectionsSettings(BaseSettings):
    """``horae projections rebuild|verify`` (``HORAE_PROJECTIONS_*``)."""

    model_config = SettingsConfigDict(env_prefix="HORAE_PROJECTIONS_", extra="ignore")

    shadow: str | None = Field(
        default=None, description="shadow schema; unset: <projection schema>_shadow"
    )
    samples: int = Field(default=5, description="divergent keys shown per table")
    swap: bool = Field(default=False, description="then make the shadow live")


class TopicsSettings(BaseSettings):
    """``horae topics`` (``HORAE_TOPICS_*``)."""

    model_config = SettingsConfigDict(env_prefix="HORAE_TOPICS_", extra="ignore")

    output: Literal["text", "json"] = Field(
        default="text", description="describe: text, or json (machine-readable)"
    )


class TenantsSettings(BaseSettings):
    """``horae tenants`` (``HORAE_TENANTS_*``)."""

    model_config = SettingsConfigDict(env_prefix="HORAE_TENANTS_", extra="ignore")

    password: SecretStr | None = Field(
        default=None, description="add: the tenant principal's password; unset: a new one"
    )
    reason: str | None = Field(
        default=None, description="suspend/resume: why (kept in the command)"
    )


class ChaosSettings(BaseSettings):
    """``horae chaos``, the soak (``HORAE_CHAOS_*``)."""

    model_config = SettingsConfigDict(env_prefix="HORAE_CHAOS_", extra="ignore")

    minutes: float | None = Field(
        default=None, description="minutes of chaos; unset: the profile's"
    )
    profile: Literal["short", "long"] = Field(
        default="short", description="short (the CI run) or long (the recorded soak)"
    )
    seed: int | None = Field(default=None, description="seed of the chaos; unset: random")
    keep: bool = Field(default=False, description="keep the private stack's data afterwards")
    brokers: Annotated[Literal[1, 3], BeforeValidator(int)] = Field(  # the env's "3" is 3
        default=1,
        description="Kafka brokers of the soak's private stack: 1, or 3 (a KRaft cluster, RF 3; "
        "its broker kills take a fires leader, the transaction coordinator and the active "
        "controller in turn)",
    )
    fuzz: int = Field(
        default=0,
        ge=0,
        description="instead of the soak: this many rounds of the end-to-end fuzz (API and Kafka "
        "into a real planner, dispatcher and projector, with its stall watch); its counts are "
        "printed last; 0: the soak",
    )


class DrSettings(BaseSettings):
    """``horae dr``, disaster recovery between the local regions a and b (``HORAE_DR_*``)."""

    model_config = SettingsConfigDict(env_prefix="HORAE_DR_", extra="ignore")

    to: Literal["a", "b"] = Field(default="b", description="promote: the region that will write")
    declare_lost: bool = Field(
        default=False,
        description="promote: the writing region does not answer and is declared lost (without "
        "it a promotion refuses to go on when that region cannot be fenced)",
    )
    lag_timeout_s: float = Field(
        default=60.0,
        ge=0,
        description="promote: how long to wait for the replication lag to reach 0 once the "
        "writing region is fenced",
    )
    exactly_once: bool = Field(
        default=True,
        description="up: MirrorMaker 2 writes into the standby with exactly-once source "
        "(transactions with its own source offsets)",
    )
    tenant_events: str = Field(
        default="*",
        description="up: whose events topics (and own consumer groups' offsets) MirrorMaker 2 "
        "replicates: * for every tenant's, or a comma-separated list of tenant ids (the others' "
        "events stay in their region: a subscriber of theirs finds no history in the standby)",
    )

    @field_validator("tenant_events")
    @classmethod
    def _tenant_list(cls, value: str) -> str:
        value = value.strip()
        if value == "*":
            return value
        for tenant in (t.strip() for t in value.split(",")):
            if not TENANT_ID.fullmatch(tenant):
                raise ValueError(
                    f"{tenant!r} is not a tenant id ([a-z0-9][a-z0-9._-]{{0,62}}); "
                    "give * or a comma-separated list of tenant ids"
                )
        return value

    def events_tenants(self) -> tuple[str, ...] | None:
        """The tenants whose events topics go (None: every tenant's)."""
        if self.tenant_events == "*":
            return None
        return tuple(t.strip() for t in self.tenant_events.split(","))


class ApiSettings(BaseSettings):
    """``horae api`` (``HORAE_API_*``)."""

    model_config = SettingsConfigDict(env_prefix="HORAE_API_", extra="ignore")

    host: str = Field(default="127.0.0.1", description="address the HTTP API listens on")
    port: int = Field(default=8089, description="port of the HTTP API")
    workers: int = Field(
        default=1,
        ge=1,
        description="API processes serving the port (each enforces rate_per_s/workers and "
        "burst/workers per tenant; read-your-writes and verifications are shared in PostgreSQL)",
    )
    token_keys: dict[str, SecretStr] = Field(
        default_factory=dict,
        description="HS256 keys of API tokens, JSON {kid: secret}; every key verifies, "
        "token_kid signs (rotation: add the new kid, switch token_kid, drop the old one later)",
    )
    token_kid: str | None = Field(
        default=None,
        description="kid of the key horae tokens issue signs with (unset: the only one)",
    )
    token_ttl_s: int = Field(default=3600, description="default lifetime of an issued token")
    max_body_bytes: int = Field(default=65_536, description="largest request body accepted")
    rate_per_s: float = Field(
        default=50.0, description="requests per second per tenant (429 with Retry-After above)"
    )
    burst: int = Field(default=200, description="requests a tenant may send at once")
    read_your_writes_s: float = Field(
        default=300.0,
        description="how long reads merge in the versions the API wrote (every API process)",
    )
    verification_ttl_s: int = Field(
        default=30 * 86400, description="how long a verified target host stays verified"
    )
    tls_cert_file: Path | None = Field(
        default=None,
        description="PEM certificate (chain) to serve the API over HTTPS with (with the key "
        "file); unset: plain HTTP",
    )
    tls_key_file: Path | None = Field(
        default=None, description="PEM private key of the API's TLS certificate"
    )
    require_verified_targets: bool = Field(
        default=True,
        description="refuse webhook triggers whose host the tenant has not verified "
        "(POST /v1/targets/verifications)",
    )


class DevSettings(BaseSettings):
    """The local stack, ``horae dev`` (``HORAE_DEV_*``)."""

    model_config = SettingsConfigDict(env_prefix="HORAE_DEV_", extra="ignore")

    kafka_port: int = Field(default=19092, description="port of the local Kafka broker")
    kafka_controller_port: int = Field(
        default=19093, description="port of the local Kafka controller"
    )
    postgres_port: int = Field(default=15432, description="port of the local PostgreSQL")
    kafka_version: str = Field(default="4.1.1", description="Kafka version of the local broker")
    kafka_heap: str = Field(default="512m", description="heap of the local broker's JVM")
    brokers: int = Field(
        default=1,
        ge=1,
        description="brokers of the local Kafka cluster (1, or 3: KRaft, each broker also a "
        "controller; replication factor 3, min.insync.replicas 2)",
    )
    kafka_node_ports: list[int] = Field(
        default_factory=list,
        description="ports of brokers 2.. and their controllers, JSON [b2, c2, b3, c3]; empty: "
        "kafka_port and kafka_controller_port plus 2, 4, ...",
    )
    tls: bool = Field(
        default=False,
        description="run the local stack on TLS: a throwaway CA, Kafka on SASL_SSL, PostgreSQL "
        "with ssl=on (clients find the CA under the state directory's tls/)",
    )


class Settings(BaseSettings):
    """Every knob of every Horae process: the shared ones (``HORAE_<FIELD>``) and one section
    per process or area (``HORAE_<SECTION>_<FIELD>``)."""

    model_config = SettingsConfigDict(env_prefix="HORAE_", extra="ignore")

    # --- services -------------------------------------------------------------------------
    kafka_bootstrap: str | None = Field(
        default=None,
        description="Kafka bootstrap servers; unset: the local stack (horae dev up)",
    )
    database_url: str | None = Field(
        default=None,
        repr=False,  # may hold a password
        description="PostgreSQL URL of the read models' owner (horae migrate, projections "
        "rebuild and swap); unset: the local stack's throwaway cluster",
    )
    projector_database_url: str | None = Field(
        default=None,
        repr=False,  # may hold a password
        description="PostgreSQL URL of horae projector, a role that may write only the read "
        "models (horae migrate creates it, with the URL's password); unset: the owner's "
        "database as role horae_projector",
    )
    reader_database_url: str | None = Field(
        default=None,
        repr=False,  # may hold a password
        description="PostgreSQL URL of the read-only role of history queries and projections "
        "verify (horae migrate creates it, with the URL's password); unset: the owner's "
        "database as role horae_reader",
    )
    api_database_url: str | None = Field(
        default=None,
        repr=False,  # may hold a password
        description="PostgreSQL URL of horae api: reads the read models, writes only the API's "
        "state schema (horae migrate creates the role, with the URL's password); unset: the "
        "owner's database as role horae_api",
    )
    kafka_username: str | None = Field(
        default=None,
        description="SASL/SCRAM-SHA-512 user of this process's Kafka clients (each process role "
        "runs as its own principal); unset: no authentication (PLAINTEXT)",
    )
    kafka_password: SecretStr | None = Field(
        default=None, description="SASL/SCRAM-SHA-512 password of HORAE_KAFKA_USERNAME"
    )
    kafka_security_protocol: Literal["PLAINTEXT", "SASL_PLAINTEXT", "SASL_SSL", "SSL"] | None = (
        Field(
            default=None,
            description="security.protocol of the Kafka clients; unset: SASL_* when a user is "
            "known, else PLAINTEXT/SSL, *_SSL when a CA or client certificate is given (or the "
            "local stack runs on TLS), else *_PLAINTEXT",
        )
    )
    kafka_sasl_mechanism: str = Field(
        default="SCRAM-SHA-512", description="SASL mechanism of HORAE_KAFKA_USERNAME"
    )
    kafka_ssl_ca_file: Path | None = Field(
        default=None,
        description="PEM file of the CA that signs the brokers' certificates (TLS); unset: the "
        "system's CAs (or the local stack's CA when it runs on TLS)",
    )
    kafka_ssl_cert_file: Path | None = Field(
        default=None, description="PEM client certificate for mutual TLS (with the key file)"
    )
    kafka_ssl_key_file: Path | None = Field(
        default=None, description="PEM private key of HORAE_KAFKA_SSL_CERT_FILE (mutual TLS)"
    )
    database_sslmode: (
        Literal["disable", "allow", "prefer", "require", "verify-ca", "verify-full"] | None
    ) = Field(
        default=None,
        description="libpq sslmode of every PostgreSQL connection (every role's URL); unset: "
        "the URL's own, else libpq's default (prefer)",
    )
    database_ssl_ca_file: Path | None = Field(
        default=None,
        description="PEM file of the CA that signs PostgreSQL's certificate (libpq sslrootcert) "
        "for every PostgreSQL connection; unset: the URL's own",
    )
    schema_registry_url: str | None = Field(
        default=None,
        description="Confluent-compatible schema registry; unset: the committed catalogue",
    )
    topic_prefix: str = Field(default="horae.", description="prefix of every Horae topic name")
    topic_partitions: int = Field(
        default=12,
        description="partitions of each trigger-partitioned topic (co-partitioning relies on "
        "one count)",
    )
    topic_replication_factor: int | None = Field(
        default=None, description="replication factor of Horae topics; unset: min(3, brokers)"
    )
    projection_schema: str = Field(
        default="horae", description="PostgreSQL schema of the live read models"
    )

    # --- keys -----------------------------------------------------------------------------
    tenant_keys: dict[str, dict[str, SecretStr | IngressKey]] = Field(
        default_factory=dict,
        description='ingress keys per tenant as JSON {tenant: {key_id: {"secret": s, '
        '"roles": ["author", "policy", "read"]}}} (a plain secret string grants ["author"]): '
        "definitions and commands produced to Kafka must be signed with one of their tenant's "
        "keys, which must grant the role the act needs; key ids are unique across tenants",
    )
    tenant_grants: dict[str, TenantGrantSettings] = Field(
        default_factory=dict,
        description='what the platform grants each tenant, JSON {tenant: {"horizon_max_s": s, '
        '"backfill_max_fires": n, "dispatch_per_s": r, "catchup_share": x, "max_concurrency": '
        "c}}: the ceilings of its definitions' horizon and backfill size (a definition may only "
        "ask for less) and its dispatch limits, summed over every dispatcher process; unset "
        "fields and tenants: the schema defaults (10/s, 0.2, 64 in flight)",
    )
    platform_key_id: str = Field(
        default="horae-platform", description="key id of the platform's definition-signing key"
    )
    platform_key: SecretStr | None = Field(
        default=None,
        description="platform signing key (the breaker signs paused versions with it); when set, "
        "it is added to every tenant's map in tenant_keys, so planners accept those versions",
    )
    oidc_issuer: str | None = Field(
        default=None,
        description="iss of the identity tokens of targets with target.oidc: the API's public "
        "base URL, which serves /.well-known/jwks.json; unset (or no oidc_keys_dir): the "
        "dispatcher mints none and such an attempt is not sent (no_oidc_key)",
    )
    oidc_keys_dir: Path | None = Field(
        default=None,
        description="directory of the identity-token signing keys: keys.json, the public set "
        "(the API publishes it), and one private <kid>.pem per key (the dispatcher signs with "
        "it); horae oidc rotate adds a key",
    )
    oidc_skew_s: int = Field(
        default=30,
        description="seconds an identity token outlives its attempt's timeout (clock skew)",
    )
    oidc_publish_lead_s: int = Field(
        default=600,
        description="horae oidc rotate: seconds a new key is published before it signs (more "
        "than the JWKS's cache lifetime, 300 s)",
    )

    # --- every process --------------------------------------------------------------------
    min_interval_s: int = Field(default=60, description="smallest `every` interval accepted")
    command_max_ttl_s: int = Field(
        default=3600,
        description="farthest a command's expires_at may lie after the planner reads it (s)",
    )
    log_level: str = Field(default="INFO", description="log level of the processes")
    codec: Literal["compiled", "fastavro"] = Field(
        default="compiled",
        description="body code of the wire codec: the compiled one, or fastavro (for bisecting)",
    )
    ingest_memo: bool = Field(
        default=True,
        description="ingest speed devices (compiled canonical signing form, domain checks and "
        "specs per recurrence and policies, accepted copies keeping their record's bytes); "
        "false: the generic paths every time (for bisecting)",
    )
    failpoints: str = Field(
        default="",
        description='crash tests only: "name=probability,..." (see horae.failpoints); empty: none',
    )
    state_dir: Path = Field(
        default_factory=default_state_dir,
        description="where the local stack keeps Kafka logs and the PostgreSQL cluster",
    )
    cache_dir: Path = Field(
        default_factory=default_cache_dir,
        description="where downloaded artefacts (the local stack's Kafka jars) are kept",
    )

    # --- sections -------------------------------------------------------------------------
    planner: PlannerSettings = Field(default_factory=PlannerSettings)
    dispatcher: DispatcherSettings = Field(default_factory=DispatcherSettings)
    projector: ProjectorSettings = Field(default_factory=ProjectorSettings)
    next: NextSettings = Field(default_factory=NextSettings)
    demo: DemoSettings = Field(default_factory=DemoSettings)
    api: ApiSettings = Field(default_factory=ApiSettings)
    dev: DevSettings = Field(default_factory=DevSettings)
    dlq: DlqSettings = Field(default_factory=DlqSettings)
    projections: ProjectionsSettings = Field(default_factory=ProjectionsSettings)
    topics: TopicsSettings = Field(default_factory=TopicsSettings)
    tenants: TenantsSettings = Field(default_factory=TenantsSettings)
    chaos: ChaosSettings = Field(default_factory=ChaosSettings)
    dr: DrSettings = Field(default_factory=DrSettings)

    @model_validator(mode="after")
    def _platform_key_in_every_tenant(self) -> Settings:
        owners: dict[str, str] = {}
        for tenant, keys in self.tenant_keys.items():
            for key_id, key in keys.items():
                if key_id == self.platform_key_id:
                    if self.platform_key is None or key != self.platform_key:
                        raise ValueError(f"tenant {tenant!r}: key id {key_id!r} is the platform's")
                    continue
                if isinstance(key, IngressKey) and Role.PLATFORM in key.roles:
                    raise ValueError(
                        f"tenant key {key_id!r}: only the platform key grants platform"
                    )
                if owners.setdefault(key_id, tenant) != tenant:
                    raise ValueError(
                        f"key id {key_id!r} is used by {owners[key_id]!r} and {tenant!r}"
                    )
        if self.platform_key is not None:
            for keys in self.tenant_keys.values():
                keys.setdefault(self.platform_key_id, self.platform_key)
        return self

    def platform_signer(self) -> tuple[str, bytes]:
        """The platform key's id and bytes, for what only the platform signs (tenant-wide
        commands); ValueError when the platform key is unset."""
        if self.platform_key is None or not self.platform_key.get_secret_value():
            raise ValueError("HORAE_PLATFORM_KEY is not set: only the platform key may sign this")
        return self.platform_key_id, self.platform_key.get_secret_value().encode()

    def tenant_key_bytes(self) -> TenantKeyBytes:
        """The tenants' definition keys as bytes (the platform key included, see above)."""
        return {
            tenant: {
                key_id: (key.secret if isinstance(key, IngressKey) else key)
                .get_secret_value()
                .encode()
                for key_id, key in keys.items()
            }
            for tenant, keys in self.tenant_keys.items()
        }

    def grants(self) -> Grants:
        """What the planner authorizes with: each key's roles, each tenant's ceilings (the
        platform defaults for fields left out) and the webhook secret refs each tenant owns."""
        default = TenantGrant()
        return Grants(
            roles={
                tenant: {
                    key_id: frozenset(key.roles) if isinstance(key, IngressKey) else DEFAULT_ROLES
                    for key_id, key in keys.items()
                    if key_id != self.platform_key_id
                }
                for tenant, keys in self.tenant_keys.items()
            },
            tenants={
                tenant: TenantGrant(
                    **{
                        name: getattr(default, name) if value is None else value
                        for name, value in grant.model_dump().items()
                    }
                )
                for tenant, grant in self.tenant_grants.items()
            },
            secret_refs={
                tenant: frozenset(refs) for tenant, refs in self.dispatcher.webhook_secrets.items()
            },
            platform_key_id=self.platform_key_id,
        )


#: The sections of :class:`Settings`, by attribute name.
SECTIONS: dict[str, type[BaseSettings]] = {
    "planner": PlannerSettings,
    "dispatcher": DispatcherSettings,
    "projector": ProjectorSettings,
    "next": NextSettings,
    "demo": DemoSettings,
    "api": ApiSettings,
    "dev": DevSettings,
    "dlq": DlqSettings,
    "projections": ProjectionsSettings,
    "topics": TopicsSettings,
    "tenants": TenantsSettings,
    "chaos": ChaosSettings,
    "dr": DrSettings,
}


def env_name(model: type[BaseSettings], field: str) -> str:
    """The environment variable a field of ``model`` (Settings or a section) reads."""
    return f"{model.model_config.get('env_prefix', '')}{field}".upper()


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read once from the environment."""
    return Settings()
