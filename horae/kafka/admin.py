"""Idempotent creation/update of the topic catalogue and drift reports (``horae topics``).

``apply`` creates missing topics and sets every config of the catalogue that differs; it never
changes the partition count of an existing topic (that would move keys between partitions and
break co-partitioning of the ledger and planner state) and never changes replication: both are
reported as drift for a human to handle. A second ``apply`` changes nothing.

Per-tenant topics (the events topics) are planned for every tenant the plan names (the tenants
of ``Settings.tenant_keys``); :class:`TenantTopics` creates a tenant's topics on demand (the
planner, on a tenant's first accepted definition). :func:`delete_under` removes every topic of a
throwaway prefix (tests and benchmarks clean up with it).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # re-exported names
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
    TopicMetadata,
)

from horae.contracts import topics as tp
from horae.contracts.topics import CATALOGUE, TopicSpec, desired_config, tenant_token
from horae.kafka.config import client_config

TIMEOUT_S = 30.0
#: a prefix shorter than this cannot be a throwaway one: :func:`delete_under` refuses it
MIN_PREFIX_LENGTH = 8


@dataclass(frozen=True)
class Plan:
    """What the catalogue asks for under a prefix, on a given cluster: ``partitions`` is the
    count of every trigger-partitioned topic (``Settings.topic_partitions``)."""

    prefix: str
    partitions: int
    replication_factor: int = 1
    #: the tenants whose per-tenant topics the plan holds
    tenants: tuple[str, ...] = field(default=())

    def partitions_of(self, spec: TopicSpec) -> int:
        return self.partitions if spec.partitions is None else spec.partitions

    def topics(self) -> list[tuple[str, TopicSpec]]:
        out = []
        for s in CATALOGUE:
            if not s.per_tenant:
                out.append((s.name(self.prefix), s))
            for tenant in sorted(set(self.tenants)) if s.per_tenant else ():  # each once
                out.append((f"{s.name(self.prefix)}.{tenant_token(tenant)}", s))
        return out


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
    """An admin client that prints librdkafka's errors only (as :mod:`horae.kafka.acls`'s): its
    operations raise with their cause, and a demo's or a CLI's output stays the product's
    (librdkafka's info lines, e.g. ``BGQUEUE Purging 1 unserved events`` at close, are noise)."""
    return AdminClient(client_config(bootstrap, {"log_level": 3}))


def ensure_topic(admin: AdminClient, name: str, partitions: int, config: dict[str, str]) -> int:
    """Create topic ``name`` with ``partitions`` and ``config`` when missing (another creating it
    meanwhile is fine); return its partition count."""
    found = admin.list_topics(timeout=TIMEOUT_S).topics.get(name)
    if found is not None:
        return len(found.partitions)
    futures = admin.create_topics([NewTopic(name, partitions, -1, config=config)])
    try:
        futures[name].result(timeout=TIMEOUT_S)
    except Exception as exc:
        if "TOPIC_ALREADY_EXISTS" not in str(exc):
            raise
        return len(admin.list_topics(name, timeout=TIMEOUT_S).topics[name].partitions)
    return partitions


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


class TenantTopics:
    """Creates tenants' events topics on demand, outside any transaction (a transactional
    produce to a missing topic would abort the whole batch), and remembers the ones that exist.

    New topics copy the partition count and replication factor of ``template`` (the planner's
    ``definitions`` topic, made by ``horae topics apply`` from the same settings) and take the
    catalogue's config. A topic that could not be created is not retried for ``retry_after_s``:
    its tenant's definitions are refused meanwhile without waiting on the broker again."""

    def __init__(
        self,
        admin: AdminClient,
        template: str,
        *,
        timeout_s: float = 10.0,
        retry_after_s: float = 60.0,
    ) -> None:
        self.admin = admin
        self.template = template
        self.timeout_s = timeout_s
        self.retry_after_s = retry_after_s
        self.known: set[str] = set()
        self._failed: dict[str, tuple[float, str]] = {}  # name -> (monotonic, why)
        self._listed = False

    def ensure(self, names: Sequence[str]) -> str | None:
        """None once every topic of ``names`` exists with a leader per partition; else why not."""
        missing = [n for n in names if n not in self.known]
        if not missing:
            return None
        now = time.monotonic()
        for name in missing:
            failed = self._failed.get(name)
            if failed is not None and now - failed[0] < self.retry_after_s:
                return failed[1]
        try:
            problem = self._create(missing)
        except KafkaException as exc:
            problem = f"topics {', '.join(missing)} could not be created: {exc}"
        if problem is not None:
            for name in missing:
                self._failed[name] = (now, problem)
            return problem
        self.known.update(missing)
        for name in missing:
            self._failed.pop(name, None)
        return None

    def _create(self, names: list[str]) -> str | None:
        meta = self.admin.list_topics(timeout=self.timeout_s).topics
        if not self._listed:  # the first call learns every topic that already exists
            self.known.update(n for n, t in meta.items() if _usable(t))
            self._listed = True
            names = [n for n in names if n not in self.known]
            if not names:
                return None
        template = meta.get(self.template)
        if not _usable(template):
            return f"template topic {self.template} is missing"
        assert template is not None
        partitions = len(template.partitions)
        rf = min(len(p.replicas) for p in template.partitions.values())
        config = desired_config(tp.spec(tp.Topic.SCHEDULE_EVENTS), rf)
        absent = [n for n in names if n not in meta]
        new = [NewTopic(n, num_partitions=partitions, replication_factor=rf, config=config)
               for n in absent]  # fmt: skip
        if new:
            futures = self.admin.create_topics(new, request_timeout=self.timeout_s)
            for name, future in futures.items():
                try:
                    future.result(timeout=self.timeout_s)
                except KafkaException as exc:
                    if exc.args[0].name() != "TOPIC_ALREADY_EXISTS":
                        return f"topic {name} could not be created: {exc.args[0].str()}"
        deadline = time.monotonic() + self.timeout_s
        while True:
            meta = self.admin.list_topics(timeout=self.timeout_s).topics
            waiting = [n for n in names if not _usable(meta.get(n))]
            if not waiting:
                return None
            if time.monotonic() >= deadline:
                return f"topics {', '.join(waiting)} have no leader after {self.timeout_s:.0f} s"
            time.sleep(0.1)


def topics_under(admin: AdminClient, prefix: str) -> list[str]:
    """Names of the topics that start with ``prefix``."""
    return sorted(n for n in admin.list_topics(timeout=TIMEOUT_S).topics if n.startswith(prefix))


def delete_under(bootstrap: str, prefix: str) -> list[str]:
    """Delete every topic whose name starts with ``prefix`` and wait until the broker confirms;
    return their names. A topic already gone is fine; any other failure raises; a prefix shorter
    than ``MIN_PREFIX_LENGTH`` is refused (``ValueError``) rather than delete a shared topic."""
    if len(prefix) < MIN_PREFIX_LENGTH:
        raise ValueError(f"refusing to delete topics under the short prefix {prefix!r}")
    admin = AdminClient(client_config(bootstrap, {"log_level": 3}))
    names = topics_under(admin, prefix)
    if not names:
        return []
    for future in admin.delete_topics(names, operation_timeout=TIMEOUT_S).values():
        try:
            future.result(timeout=2 * TIMEOUT_S)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise
    return names
