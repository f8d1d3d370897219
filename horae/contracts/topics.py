"""The topic catalogue: names (under a prefix, ``Settings.topic_prefix``), keys, partitioning and
configs. This layer reads no settings: callers pass the prefix and the partition count.

Keys (UTF-8 strings):

- trigger key ``<tenant>/<trigger_id>`` (:func:`horae.contracts.events.trigger_key`) for
  definitions, accepted definitions, commands, planner state and schedule events;
- fire key (``FireKey.canonical()``) for the fire ledger, lanes, attempts and outcomes. The ledger
  is *partitioned by trigger*: producers pass ``partition=partition_for(trigger_key, n)`` so that a
  trigger's ledger and its planner state live on the same partition number (both topics have the
  same partition count). Lanes, attempts and outcomes do the same so a fire's whole story sits on
  one partition number.

Every producer sets ``partitioner=murmur2_random`` (:data:`PRODUCER_DEFAULTS`): librdkafka's default
(CRC32) disagrees with Java clients; murmur2 makes keyed records land where Java/Kafka Streams would
put them and where :func:`partition_for` says.

``definitions`` is the ingress anyone with produce rights can write (signed definitions are
verified there); ``definitions.accepted`` is the planner's copy of each version it accepted,
committed in the transaction that applied it. The planner rebuilds from it and the projector reads
it, so a forged, stale or tombstoned record on the ingress (which compaction may keep in place of
the accepted one) never reaches either.

Public schedule events are per tenant: each tenant has its own topic ``<prefix>events.<token>``
(:func:`events_topic`; ``token`` is the tenant id with ``.`` written ``D`` and ``_`` written ``U``,
so no two tenants share a name and no tenant's name reaches into another's namespace), created by
``horae topics apply`` for every tenant the settings know and by the planner on a tenant's first
accepted definition. An event target may name its tenant's topic or a sub-topic
``events.<token>.<suffix>``, written without the deployment prefix (:func:`event_topic_problem`).

Record timestamps: never a future fire time (Kafka 4 rejects timestamps more than 1 h ahead); let
the producer stamp "now" (do not pass ``timestamp=``). Instants travel inside the value.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum

from horae.contracts import events as ev

DAY_MS = 86_400_000
PRODUCER_DEFAULTS: dict[str, str | int | bool] = {
    "partitioner": "murmur2_random",
    "enable.idempotence": True,
    "acks": "all",
    # lz4: on a 2-core machine shared with the broker, zstd's CPU (compressing here, validating
    # there) cost the planner ~30 % of its commit time at a 100k-fire peak (bench/planner.py)
    "compression.type": "lz4",
}


class Topic(StrEnum):
    """Topic suffixes; the full name is ``<prefix><suffix>`` (default prefix ``horae.``)."""

    DEFINITIONS = "definitions"  # ingress: what tenants (and the breaker) produce
    ACCEPTED = "definitions.accepted"  # what the planner accepted, written by it alone
    COMMANDS = "commands"
    FIRES = "fires"
    PLANNER_STATE = "planner-state"
    LANE_ON_TIME = "lane.on_time"
    LANE_CATCH_UP = "lane.catch_up"
    LANE_BACKFILL = "lane.backfill"
    LANE_MANUAL = "lane.manual"
    LANE_RETRY = "lane.retry"
    ATTEMPTS = "attempts"
    OUTCOMES = "outcomes"
    #: the family of per-tenant topics ``<prefix>events.<token>`` (:func:`events_topic`): no
    #: topic of the bare name exists
    SCHEDULE_EVENTS = "events"
    DLQ = "dlq"
    QUARANTINE = "quarantine"
    AUDIT = "audit"


@dataclass(frozen=True)
class TopicSpec:
    suffix: Topic
    value_type: type[ev.Event]
    key: str  # "trigger", "fire" or "tenant"
    #: a fixed partition count, or None: the trigger partition count every trigger-partitioned
    #: topic shares (``Settings.topic_partitions``; co-partitioning relies on it)
    partitions: int | None
    config: dict[str, str] = field(default_factory=dict)
    #: one topic per tenant (``<prefix><suffix>.<token>``) instead of one topic
    per_tenant: bool = False

    def name(self, prefix: str) -> str:
        return topic_name(self.suffix, prefix)


def topic_name(suffix: Topic | str, prefix: str) -> str:
    """Full topic name under ``prefix`` (``Settings.topic_prefix``, ``horae.`` by default)."""
    return f"{prefix}{Topic(suffix).value}"


_LANE_TOPICS = {lane: Topic(f"lane.{lane.value}") for lane in ev.Lane}


def lane_topic(lane: ev.Lane) -> Topic:
    return _LANE_TOPICS[lane]


_COMPACTED = {"cleanup.policy": "compact", "min.compaction.lag.ms": "0", "segment.ms": str(DAY_MS)}
_COMPACTED_FOREVER = {**_COMPACTED, "retention.ms": "-1"}


def _delete(days: int) -> dict[str, str]:
    return {"cleanup.policy": "delete", "retention.ms": str(days * DAY_MS)}


def _spec(
    suffix: Topic,
    value: type[ev.Event],
    key: str,
    config: dict[str, str],
    parts: int | None = None,
    per_tenant: bool = False,
) -> TopicSpec:
    return TopicSpec(suffix, value, key, parts, config, per_tenant)


CATALOGUE: tuple[TopicSpec, ...] = (
    _spec(Topic.DEFINITIONS, ev.TriggerDefinition, "trigger", _COMPACTED_FOREVER),
    _spec(Topic.ACCEPTED, ev.TriggerDefinition, "trigger", _COMPACTED_FOREVER),
    _spec(Topic.COMMANDS, ev.Command, "trigger", _delete(7)),
    _spec(Topic.FIRES, ev.FireRecord, "fire", _COMPACTED_FOREVER),
    _spec(Topic.PLANNER_STATE, ev.PlannerState, "trigger", _COMPACTED_FOREVER),
    *(
        _spec(lane_topic(lane), ev.DispatchOrder, "fire", _delete(7))
        for lane in ev.Lane  # on_time, catch_up, backfill, manual, retry
    ),
    _spec(Topic.ATTEMPTS, ev.Attempt, "fire", _delete(30)),
    _spec(Topic.OUTCOMES, ev.WorkOutcome, "fire", _delete(30)),
    _spec(Topic.SCHEDULE_EVENTS, ev.ScheduleEvent, "trigger", _delete(7), per_tenant=True),
    _spec(Topic.DLQ, ev.DispatchOrder, "fire", _delete(30)),
    _spec(Topic.QUARANTINE, ev.Quarantined, "trigger", _delete(30)),
    _spec(Topic.AUDIT, ev.AuditEntry, "tenant", _delete(3650), parts=3),
)
BY_SUFFIX: dict[Topic, TopicSpec] = {spec.suffix: spec for spec in CATALOGUE}


def spec(suffix: Topic) -> TopicSpec:
    return BY_SUFFIX[suffix]


def desired_config(spec: TopicSpec, replication_factor: int) -> dict[str, str]:
    """The full config ``horae topics apply`` sets: the spec's plus ``min.insync.replicas``
    (2, or the replication factor when smaller: a single-node dev broker gets 1)."""
    return {**spec.config, "min.insync.replicas": str(min(2, replication_factor))}


# --- per-tenant events topics --------------------------------------------------------------

_ESCAPES = str.maketrans({".": "D", "_": "U"})
_SUFFIX = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")


#: a tenant id (the ingress names rule, ``horae.contracts.ingress.NAME``), for settings that list
#: tenants
TENANT_ID = re.compile(r"[a-z0-9][a-z0-9._-]{0,62}")


def tenant_token(tenant: str) -> str:
    """The tenant id as it appears in topic names: ``.`` → ``D``, ``_`` → ``U``. Tenant ids are
    lower case (``[a-z0-9][a-z0-9._-]{0,62}``), so this is one-to-one, and the token holds
    neither ``.`` (the namespace separator) nor ``_`` (Kafka refuses names that differ only by
    ``.`` against ``_``)."""
    return tenant.translate(_ESCAPES)


def events_topic(tenant: str, prefix: str = "") -> str:
    """The tenant's events topic ``<prefix>events.<token>`` (``prefix`` "": the relative name an
    event target writes)."""
    return f"{prefix}{Topic.SCHEDULE_EVENTS.value}.{tenant_token(tenant)}"


def event_topic_problem(tenant: str, topic: str) -> str | None:
    """Why ``topic`` (an event target's, relative to the prefix) is not in ``tenant``'s
    namespace, or None when it is: ``events.<token>`` or ``events.<token>.<suffix>`` with
    ``suffix`` 1-63 chars of ``a-z 0-9 -``."""
    own = events_topic(tenant)
    if topic == own:
        return None
    if not topic.startswith(own + "."):
        return f"an event target's topic must be {own!r} or {own + '.<suffix>'!r} (tenant {tenant})"
    if not _SUFFIX.match(topic[len(own) + 1 :]):
        return f"the suffix after {own + '.'!r} must be 1-63 chars of a-z 0-9 -"
    return None


def events_pattern(prefix: str) -> str:
    """The subscription pattern of every tenant's events topic (librdkafka: a ``^`` regex)."""
    return "^" + re.escape(f"{prefix}{Topic.SCHEDULE_EVENTS.value}.") + ".+"


def is_events_topic(name: str, prefix: str) -> bool:
    return name.startswith(f"{prefix}{Topic.SCHEDULE_EVENTS.value}.")


# --- partitioning ----------------------------------------------------------------------------


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (``org.apache.kafka.common.utils.Utils.murmur2``) as a signed 32-bit int."""
    m, r, mask = 0x5BD1E995, 24, 0xFFFFFFFF
    length = len(data)
    h = (0x9747B28C ^ length) & mask
    for i in range(length // 4):
        k = int.from_bytes(data[4 * i : 4 * i + 4], "little")
        k = (k * m) & mask
        k ^= k >> r
        k = (k * m) & mask
        h = (h * m) & mask
        h ^= k
    tail = length & ~3
    rest = length % 4
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(key: str | bytes, partitions: int) -> int:
    """The partition Java's default partitioner (and librdkafka ``murmur2_random``) picks for a
    non-null key: ``toPositive(murmur2(key)) % partitions``."""
    data = key.encode() if isinstance(key, str) else key
    return (murmur2(data) & 0x7FFFFFFF) % partitions


def fire_partition(tenant: str, trigger_id: str, partitions: int) -> int:
    """Where a trigger's fire records go (its planner-state partition number)."""
    return partition_for(ev.trigger_key(tenant, trigger_id), partitions)
