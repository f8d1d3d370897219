"""Idempotent creation/update of the topic catalogue and drift reports (``horae topics``).

``apply`` creates missing topics and sets every config of the catalogue that differs; it never
changes the partition count of an existing topic (that would move keys between partitions and
break co-partitioning of the ledger and planner state) and never changes replication: both are
reported as drift for a human to handle. A second ``apply`` changes nothing.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from confluent_kafka import KafkaException
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # re-exported names
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
    TopicMetadata,
)

from horae.contracts.topics import CATALOGUE, TopicSpec, desired_config

TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Plan:
    """What the catalogue asks for under a prefix, on a given cluster: ``partitions`` is the
    count of every trigger-partitioned topic (``Settings.topic_partitions``)."""

    prefix: str
    partitions: int
    replication_factor: int = 1

    def partitions_of(self, spec: TopicSpec) -> int:
        return self.partitions if spec.partitions is None else spec.partitions

    def topics(self) -> list[tuple[str, TopicSpec]]:
        return [(spec.name(self.prefix), spec) for spec in CATALOGUE]


@dataclass(frozen=True)
class Drift:
    topic: str
    what: str  # "missing", "partitions", "replication", "config"
    expected: str
    actual: str

    def __str__(self) -> str:
        return f"{self.topic}: {self.what} expected {self.expected}, found {self.actual}"


@dataclass(frozen=True)
class Observed:
    name: str
    partitions: int
    replication_factor: int
    config: dict[str, str]


def admin_client(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def auto_replication_factor(admin: AdminClient) -> int:
    """``min(3, number of brokers)``."""
    return min(3, len(admin.list_topics(timeout=TIMEOUT_S).brokers))


def observe(admin: AdminClient, plan: Plan) -> dict[str, Observed]:
    """The catalogue's topics as they exist on the cluster (missing ones absent)."""
    meta = admin.list_topics(timeout=TIMEOUT_S).topics
    names = [name for name, _ in plan.topics() if name in meta]
    if not names:
        return {}
    resources = [ConfigResource(ResourceType.TOPIC, name) for name in names]
    futures = admin.describe_configs(resources, request_timeout=TIMEOUT_S)
    found = {}
    for resource, future in futures.items():
        entries = future.result(timeout=TIMEOUT_S)
        config = {k: e.value for k, e in entries.items() if e.value is not None}
        parts = meta[resource.name].partitions
        rf = min((len(p.replicas) for p in parts.values()), default=0)
        found[resource.name] = Observed(resource.name, len(parts), rf, config)
    return found


def drift(admin: AdminClient, plan: Plan) -> list[Drift]:
    """Every difference between the catalogue and the cluster."""
    found = observe(admin, plan)
    out: list[Drift] = []
    for name, spec in plan.topics():
        seen = found.get(name)
        if seen is None:
            out.append(Drift(name, "missing", "present", "absent"))
            continue
        if seen.partitions != plan.partitions_of(spec):
            want = str(plan.partitions_of(spec))
            out.append(Drift(name, "partitions", want, str(seen.partitions)))
        if seen.replication_factor != plan.replication_factor:
            rf = str(plan.replication_factor)
            out.append(Drift(name, "replication", rf, str(seen.replication_factor)))
        for key, value in sorted(desired_config(spec, plan.replication_factor).items()):
            actual = seen.config.get(key)
            if actual != value:
                out.append(Drift(name, f"config {key}", value, str(actual)))
    return out


def apply(admin: AdminClient, plan: Plan) -> list[str]:
    """Create missing topics and fix config drift; returns what was changed (empty: nothing)."""
    changes: list[str] = []
    drifts = drift(admin, plan)
    specs = dict(plan.topics())
    missing = [d.topic for d in drifts if d.what == "missing"]
    if missing:
        new = [
            NewTopic(
                name,
                num_partitions=plan.partitions_of(specs[name]),
                replication_factor=plan.replication_factor,
                config=desired_config(specs[name], plan.replication_factor),
            )
            for name in missing
        ]
        for name, future in admin.create_topics(new, request_timeout=TIMEOUT_S).items():
            try:
                future.result(timeout=TIMEOUT_S)
                changes.append(f"created {name}")
            except KafkaException as exc:
                if exc.args[0].name() != "TOPIC_ALREADY_EXISTS":
                    raise
    _wait_visible(admin, missing)
    to_set: dict[str, list[ConfigEntry]] = {}
    for d in drifts:
        if d.what.startswith("config ") and d.topic not in missing:
            key = d.what.removeprefix("config ")
            entry = ConfigEntry(key, d.expected, incremental_operation=AlterConfigOpType.SET)
            to_set.setdefault(d.topic, []).append(entry)
    if to_set:
        resources = [
            ConfigResource(ResourceType.TOPIC, name, incremental_configs=entries)
            for name, entries in to_set.items()
        ]
        for resource, future in admin.incremental_alter_configs(resources).items():
            future.result(timeout=TIMEOUT_S)
            keys = ", ".join(f"{e.name}={e.value}" for e in to_set[resource.name])
            changes.append(f"updated {resource.name}: {keys}")
    return changes


def _wait_visible(admin: AdminClient, names: list[str]) -> None:
    """Wait until created topics show up in metadata with a leader for every partition, so a
    following ``apply``, ``describe`` or client sees them usable (creation propagates
    asynchronously)."""
    deadline = time.monotonic() + TIMEOUT_S
    while names and time.monotonic() < deadline:
        meta = admin.list_topics(timeout=TIMEOUT_S).topics
        if all(_usable(meta.get(n)) for n in names):
            return
        time.sleep(0.2)


def _usable(topic: TopicMetadata | None) -> bool:
    return (
        topic is not None
        and not topic.error
        and bool(topic.partitions)
        and all(p.leader >= 0 and not p.error for p in topic.partitions.values())
    )
