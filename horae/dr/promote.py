"""Promotion of the standby region, and the DR status.

:func:`promote` ``(flow, home, declare_lost, lag_timeout_s)`` makes ``flow.target`` the region that
writes:

1. **Fence** the writing region: when it answers, the ACLs of its planners and dispatchers are
   deleted there (:func:`fence`), so none of their transactional ids can commit again in it (a
   commit needs WRITE on the transactional id) and nothing more is decided or dispatched there;
   then the replication lag is waited for (at most ``lag_timeout_s``) and measured. When it does
   not answer, the operator must say so (``declare_lost``): the region is declared lost, and what
   it decided after the last replicated record is the recovery point (RPO).
2. **Stop MirrorMaker 2** (nothing may write into the new writer but its own processes).
3. **Provision** the new writer (its catalogue, users and ACLs: idempotent) and **audit** the act:
   one ``dr.promote`` entry per tenant in its ``audit`` topic (role ``platform``), with where from,
   whether the old region was fenced or declared lost, and the lag measured.
4. **Record** the new writer in the DR state (``<state>/dr/state.json``).

The new writer's planners are then started as any planner (``horae planner`` with the region's
settings): they rebuild their partitions from the mirrored planner-state changelog and accepted
definitions (a cold start, as after any outage), so each trigger's misfire policy decides the
instants of the outage window, and its dispatchers resume from the translated group offsets with
the same fire keys.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AclBindingFilter, AdminClient  # type: ignore[attr-defined]

from horae.contracts import events as ev
from horae.contracts.codec import decode, encode
from horae.contracts.ids import event_id
from horae.contracts.topics import PRODUCER_DEFAULTS, Topic, topic_name
from horae.dr import DrError
from horae.dr.metrics import Due, Figures, oldest_due
from horae.dr.mirror import MirrorMaker
from horae.dr.regions import DrState, Region, on, provision, read_state, write_state
from horae.kafka.acls import role_bindings
from horae.kafka.config import KafkaCredentials

#: the roles that decide or dispatch: fenced in the old writer
FENCED_ROLES = ("planner", "dispatcher")
ACTION = "dr.promote"


@dataclass(frozen=True)
class Promotion:
    """What a promotion did and measured."""

    source: str
    target: str
    fenced: bool  # False: the source was declared lost
    acls_deleted: int
    lag: dict[str, int] | None  # None: not measurable (the source is lost)
    replicated: dict[str, int]  # per source topic: records MM2 replicated (its offsets)
    audited: list[str] = field(default_factory=list)  # the tenants audited
    started_at: float = 0.0
    finished_at: float = 0.0
    steps: dict[str, float] = field(default_factory=dict)  # seconds each step took

    def to_dict(self) -> dict[str, object]:
        return {
            "from": self.source,
            "to": self.target,
            "fenced": self.fenced,
            "declared_lost": not self.fenced,
            "acls_deleted": self.acls_deleted,
            "lag": self.lag,
            "tenants_audited": self.audited,
            "at": datetime.fromtimestamp(self.started_at, UTC).isoformat(),
            "took_s": round(self.finished_at - self.started_at, 2),
            "steps_s": self.steps,
        }


def fence(r: Region) -> int:
    """Delete, in region ``r``, the ACLs of the roles that decide or dispatch (their
    transactional ids, topics and groups); the number of ACLs deleted."""
    prefix = r.settings.topic_prefix
    filters = [
        AclBindingFilter(
            b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation,
            b.permission_type,
        )
        for b in dict.fromkeys(b for role in FENCED_ROLES for b in role_bindings(role, prefix))
    ]  # fmt: skip
    admin = AdminClient(r.client({"log_level": 3}))
    deleted = 0
    for future in admin.delete_acls(filters, request_timeout=30).values():
        deleted += len(future.result())
    return deleted


def provision_standby(r: Region, tenants: tuple[str, ...] = ()) -> dict[str, KafkaCredentials]:
    """:func:`~horae.dr.regions.provision` region ``r`` as a standby: then :func:`fence` it, so
    a planner or dispatcher started there by mistake decides and sends nothing (the standby
    holds no leases: its dispatchers would deliver the mirrored orders a second time); the
    promotion's :func:`~horae.dr.regions.provision` grants them back. Each role's credentials."""
    roles = provision(r, tenants)
    fence(r)
    return roles


def promote(
    flow: MirrorMaker,
    home: Path,
    *,
    declare_lost: bool = False,
    lag_timeout_s: float = 60.0,
    clock: Callable[[], float] = time.time,
) -> Promotion:
    """Make ``flow.target`` the writing region (see the module docstring)."""
    source, target = flow.source, flow.target
    state = read_state(home)
    if state.active == target.name:
        raise DrError(f"region {target.name} writes already; nothing to promote")
    if not target.reachable():
        raise DrError(f"region {target.name} does not answer; start it (`horae dr up`) first")
    started = clock()
    lag: dict[str, int] | None = None
    acls = 0
    fenced = source.reachable()
    if fenced:
        acls = fence(source)
        deadline = time.monotonic() + lag_timeout_s
        while True:
            lag = flow.lag()
            if not any(lag.values()) or time.monotonic() >= deadline:
                break
            time.sleep(1.0)
    elif not declare_lost:
        raise DrError(
            f"region {source.name} does not answer, so it cannot be fenced: if it is lost, "
            f"promote with --declare-lost (what it decided after the last replicated record is "
            f"lost from the ledger; region {target.name} decides the outage by misfire policy)"
        )
    steps: dict[str, float] = {}

    def step(name: str, since: float) -> float:
        now = clock()
        steps[name] = round(now - since, 2)
        return now

    at = step("fence" if fenced else "declare lost", started)
    flow.stop()
    at = step("stop mirrormaker", at)
    replicated: dict[str, int] = {}
    for (topic, _), offset in flow.replicated().items():
        replicated[topic] = replicated.get(topic, 0) + offset
    tenants = tenants_of(target)
    provision(target, tuple(tenants))
    at = step("provision", at)
    result = Promotion(source.name, target.name, fenced, acls, lag, replicated, [], started)
    audited = audit(target, result, clock(), tenants)
    step("audit", at)
    done = Promotion(
        source.name, target.name, fenced, acls, lag, replicated, audited, started, clock(), steps
    )
    write_state(
        home,
        DrState(active=target.name, promotions=(*state.promotions, done.to_dict())),
    )
    return done


def tenants_of(r: Region) -> list[str]:
    """The tenants with an accepted definition in region ``r`` (and the settings' own)."""
    tenants = set(r.settings.tenant_keys)
    for key, _ in read_topic(r, topic_name(Topic.ACCEPTED, r.settings.topic_prefix)):
        if key:
            tenants.add(key.decode(errors="replace").partition("/")[0])
    return sorted(tenants)


def audit(r: Region, p: Promotion, now: float, tenants: list[str]) -> list[str]:
    """One ``dr.promote`` audit entry per tenant of ``tenants``, in ``r``'s audit topic."""
    at = datetime.fromtimestamp(now, UTC)
    detail = {
        "from": p.source,
        "to": p.target,
        "fence": "acls deleted" if p.fenced else "declared lost",
        "lag_records": "unknown" if p.lag is None else str(sum(p.lag.values())),
    }
    topic = topic_name(Topic.AUDIT, r.settings.topic_prefix)
    with on(r):
        producer = Producer(r.client({**PRODUCER_DEFAULTS, "log_level": 3}))
        for tenant in tenants:
            entry = ev.AuditEntry(
                audit_id=event_id("audit", ACTION, p.source, p.target, at.isoformat(), tenant),
                tenant=tenant,
                principal=r.admin.username,
                role=ev.Role.PLATFORM,
                action=ACTION,
                at=at,
                allowed=True,
                detail=detail,
            )
            producer.produce(topic, key=tenant.encode(), value=encode(entry))
        left = producer.flush(30)
    if left:
        raise DrError(f"{left} audit entries of the promotion were not acknowledged by {r.name}")
    return tenants


# --- reading a region ------------------------------------------------------------------------


def read_topic(
    r: Region, topic: str, tail: int | None = None
) -> list[tuple[bytes | None, bytes | None]]:
    """The committed records of ``topic`` in ``r`` (every partition; the last ``tail`` offsets
    of each when given): (key, value)."""
    consumer = Consumer(
        r.client(
            {"group.id": "horae-dr-reader", "enable.auto.commit": False,
             "isolation.level": "read_committed", "enable.partition.eof": True,
             "log_level": 3}
        )
    )  # fmt: skip
    out: list[tuple[bytes | None, bytes | None]] = []
    try:
        meta = consumer.list_topics(topic, timeout=10).topics.get(topic)
        if meta is None or meta.error is not None:
            return out
        parts = []
        for p in meta.partitions:
            low, high = _watermarks(consumer, TopicPartition(topic, p))
            start = low if tail is None else max(low, high - tail)
            if high > start:
                parts.append(TopicPartition(topic, p, start))
        if not parts:
            return out
        consumer.assign(parts)
        left = {p.partition for p in parts}
        deadline = time.monotonic() + 60
        while left and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    left.discard(msg.partition() or 0)
                continue
            out.append((msg.key(), msg.value()))
    finally:
        consumer.close()
    return out


def _watermarks(consumer: Consumer, tp: TopicPartition) -> tuple[int, int]:
    """The partition's offsets, asked again while its leader is not settled (a topic just
    created, as after :func:`~horae.dr.failback.reset_standby`): at most 30 s."""
    deadline = time.monotonic() + 30
    while True:
        try:
            low, high = consumer.get_watermark_offsets(tp, timeout=10, cached=False)
            return int(low), int(high)
        except KafkaException as exc:
            code = exc.args[0].code() if exc.args else None
            if code != KafkaError.NOT_LEADER_FOR_PARTITION or time.monotonic() >= deadline:
                raise
            time.sleep(0.5)


def last_decision(r: Region) -> ev.FireRecord | None:
    """The latest decision (by ``decided_at``) in ``r``'s ledger, among the last records of
    each partition."""
    latest: ev.FireRecord | None = None
    for _, value in read_topic(r, topic_name(Topic.FIRES, r.settings.topic_prefix), tail=64):
        if value is None:
            continue
        f = decode(value, ev.FireRecord)
        if latest is None or f.decided_at > latest.decided_at:
            latest = f
    return latest


def standby_due(r: Region) -> Due | None:
    """The oldest instant next to be decided in region ``r``'s ``planner-state`` (all of it,
    latest record per trigger): what ``r``'s planners would decide first if started now."""
    topic = topic_name(Topic.PLANNER_STATE, r.settings.topic_prefix)
    return oldest_due(
        (key, None if value is None else decode(value, ev.PlannerState))
        for key, value in read_topic(r, topic)
    )


@dataclass(frozen=True)
class Status:
    active: str
    regions: dict[str, bool]  # answers
    mirror_running: bool
    lag: dict[str, int] | None  # None: the writer does not answer
    last_replicated: ev.FireRecord | None
    promotions: int
    due: Due | None = None  # the oldest instant next to be decided in the standby's state

    def figures(self) -> Figures:
        last = self.last_replicated
        return Figures(
            self.active, self.regions, self.mirror_running, self.lag,
            None if last is None else last.decided_at, self.due, self.promotions,
        )  # fmt: skip

    def lines(self, now: float) -> list[str]:
        out = [f"writes: region {self.active}"]
        for name, up in self.regions.items():
            role = "writer" if name == self.active else "standby"
            out.append(f"region {name}: {role}, {'answers' if up else 'DOES NOT ANSWER'}")
        out.append(f"mirrormaker: {'running' if self.mirror_running else 'stopped'}")
        if self.lag is None:
            out.append("lag: unknown (the writer does not answer)")
        else:
            out.append(f"lag: {sum(self.lag.values())} records in all")
            out += [f"  {topic:40} {n}" for topic, n in self.lag.items()]
        f = self.last_replicated
        if f is None:
            out.append("last decision in the standby: none")
        else:
            ago = now - f.decided_at.timestamp()
            out.append(
                f"last decision in the standby: {f.tenant}/{f.trigger_id} at "
                f"{f.scheduled_at.isoformat()} ({f.state.value}), decided "
                f"{f.decided_at.isoformat()} ({ago:.1f} s ago)"
            )
        d = self.due
        standby = next(name for name in self.regions if name != self.active)
        if not self.regions[standby]:
            out.append("the standby would be late by: unknown (the standby does not answer)")
        elif d is None:
            out.append("the standby would be late by: 0 s (no instant due in its state)")
        else:
            out.append(
                f"the standby would be late by: {d.late_by(now):.1f} s (its oldest instant "
                f"to decide: {d.tenant}/{d.trigger_id} at {d.instant.isoformat()})"
            )
        out.append(f"promotions so far: {self.promotions}")
        return out


def status(flow: MirrorMaker, home: Path) -> Status:
    """Which region writes, whether each answers, the lag per topic, the last decision the
    standby holds (``flow`` replicates from the writer to the standby)."""
    state = read_state(home)
    up = {r.name: r.reachable() for r in (flow.source, flow.target)}
    lag = None
    if up[flow.source.name] and up[flow.target.name]:
        lag = flow.lag()
    last = last_decision(flow.target) if up[flow.target.name] else None
    due = standby_due(flow.target) if up[flow.target.name] else None
    return Status(
        state.active, up, flow.running_pid() is not None, lag, last, len(state.promotions), due
    )
