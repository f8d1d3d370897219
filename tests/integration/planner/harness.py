"""Test harness for the planner: topics under a unique prefix, signed definitions and commands,
planner workers in threads or subprocesses, and a read_committed view of the ledger."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from horae.contracts import events as ev
from horae.contracts import signing
from horae.contracts.codec import decode, encode
from horae.contracts.grants import Grants
from horae.contracts.topics import PRODUCER_DEFAULTS, Topic, events_topic, topic_name
from horae.kafka.admin import Plan, admin_client, apply
from horae.kafka.config import client_config
from horae.kafka.reader import end_offset
from horae.ports import SYSTEM_ZONES, WallClock, ZoneSource
from horae.streams.planner.clock import ensure_clock_topic
from horae.streams.planner.worker import Planner, PlannerConfig
from tests.integration.topic_reader import read_committed
from tests.net import kill_all

TENANT = "acme"
KEY_ID = "acme-1"
SECRET = b"acme-secret"
TENANT_KEYS = {TENANT: {KEY_ID: SECRET}}
ROLES = ("author", "policy", "read")  # the test key may also backfill
GRANTS = Grants(roles={TENANT: {KEY_ID: frozenset(ev.Role(r) for r in ROLES)}})
HOOK_REF = "acme-hook"  # the webhook secret ref the default target names (spawned planners own it)
PARTITIONS = 3


def definition(
    trigger_id: str,
    expr: str = "* * * * * *",
    *,
    version: int = 1,
    state: ev.DefinitionState = ev.DefinitionState.LIVE,
    policies: ev.Policies | None = None,
    target: ev.Target | None = None,
) -> ev.TriggerDefinition:
    d = ev.TriggerDefinition(
        tenant=TENANT,
        trigger_id=trigger_id,
        version=version,
        state=state,
        recurrence=ev.Recurrence(kind=ev.RecurrenceKind.CRON, expr=expr),
        target=target
        or ev.Target(
            kind=ev.TargetKind.WEBHOOK, url="https://hooks.example/x", secret_refs=(HOOK_REF,)
        ),
        authored_at=datetime.now(UTC).replace(microsecond=0),
        author="tester",
        policies=policies or ev.Policies(),
    )
    return signing.sign(d, KEY_ID, SECRET)


def command(
    trigger_id: str, kind: ev.CommandKind, role: ev.Role = ev.Role.AUTHOR, **fields: object
) -> ev.Command:
    c = ev.Command(
        command_id=f"cmd-{time.monotonic_ns()}",
        tenant=TENANT,
        trigger_id=trigger_id,
        kind=kind,
        requested_by="tester",
        role=role,
        requested_at=datetime.now(UTC).replace(microsecond=0),
        expires_at=datetime.now(UTC) + timedelta(minutes=10),
    )
    return signing.sign(replace(c, **fields), KEY_ID, SECRET)  # type: ignore[arg-type]


@dataclass
class PlannerEnv:
    bootstrap: str
    prefix: str
    threads: list[tuple[Planner, threading.Event, threading.Thread]] = field(default_factory=list)
    producer: Producer | None = None
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def setup(self) -> None:
        apply(admin_client(self.bootstrap), Plan(self.prefix, PARTITIONS, 1))
        ensure_clock_topic(self.bootstrap, self.prefix)
        self.producer = Producer(client_config(self.bootstrap, PRODUCER_DEFAULTS))

    def topic(self, t: Topic) -> str:
        if t is Topic.SCHEDULE_EVENTS:  # the tenant's own events topic
            return events_topic(TENANT, self.prefix)
        return topic_name(t, self.prefix)

    def produce(self, t: Topic, key: str | bytes, value: bytes | None) -> None:
        assert self.producer is not None
        self.producer.produce(self.topic(t), key=key, value=value)
        self.producer.flush(30)

    def put(self, d: ev.TriggerDefinition) -> None:
        self.produce(Topic.DEFINITIONS, ev.trigger_key(d.tenant, d.trigger_id), encode(d))

    def send(self, c: ev.Command) -> None:
        self.produce(Topic.COMMANDS, ev.trigger_key(c.tenant, c.trigger_id), encode(c))

    def config(self, slot: str, **overrides: object) -> PlannerConfig:
        base = PlannerConfig(
            self.bootstrap,
            self.prefix,
            slot,
            tick_s=0.2,
            session_timeout_ms=6000,
            tenant_keys=TENANT_KEYS,
            grants=GRANTS,
            min_interval_s=1,
        )
        return replace(base, **overrides)  # type: ignore[arg-type]

    def start_thread(
        self,
        slot: str = "a",
        clock: Callable[[], float] = time.time,
        zones: ZoneSource = SYSTEM_ZONES,
        **overrides: object,
    ) -> Planner:
        """A planner in a thread, on ``clock`` and the time-zone database ``zones``."""
        planner = Planner(self.config(slot, **overrides), clock=WallClock(clock), zones=zones)
        stop = threading.Event()
        thread = threading.Thread(target=planner.run, args=(stop,), daemon=True)
        thread.start()
        self.threads.append((planner, stop, thread))
        return planner

    def stop_threads(self) -> None:
        for _, stop, _thread in self.threads:
            stop.set()
        for _, _, thread in self.threads:
            thread.join(60)
        self.threads.clear()

    def spawn(
        self, slot: str, extra_env: dict[str, str] | None = None, log: Path | None = None
    ) -> subprocess.Popen[bytes]:
        """A ``horae planner`` process in slot ``slot``; its output goes to ``log`` when given."""
        env = dict(
            os.environ,
            HORAE_KAFKA_BOOTSTRAP=self.bootstrap,
            HORAE_TOPIC_PREFIX=self.prefix,
            HORAE_TOPIC_PARTITIONS=str(PARTITIONS),
            HORAE_TENANT_KEYS=json.dumps(
                {TENANT: {KEY_ID: {"secret": SECRET.decode(), "roles": list(ROLES)}}}
            ),
            HORAE_DISPATCHER_WEBHOOK_SECRETS=json.dumps({TENANT: {HOOK_REF: "whsec_test"}}),
            HORAE_PLANNER_SLOT=slot,
            HORAE_MIN_INTERVAL_S="1",
            HORAE_PLANNER_TICK_S="0.2",
            HORAE_PLANNER_SESSION_TIMEOUT_MS="6000",
            HORAE_LOG_LEVEL="WARNING",
        )
        env.update(extra_env or {})  # may replace any of the above (the bootstrap too)
        command = [sys.executable, "-m", "horae.cli.main", "planner"]
        if log is None:
            proc = subprocess.Popen(command, env=env)
        else:
            with log.open("ab") as out:
                proc = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
        self.processes.append(proc)
        return proc

    def close(self) -> None:
        """Stop the threads and kill the processes still running (a failed test leaves them)."""
        kill_all(self.processes)
        self.stop_threads()
        if self.producer is not None:
            self.producer.flush(10)


def consumed(env: PlannerEnv, *topics: Topic) -> bool:
    """True once the planner group's committed offsets reach the end of every partition of
    ``topics``: all it decided from their records is committed (offsets commit in the same
    transaction as the decisions)."""
    consumer = Consumer(
        client_config(env.bootstrap, {"group.id": f"{env.prefix}planner", "log_level": 3,
                                      "enable.auto.commit": False})
    )  # fmt: skip
    try:
        tps = [TopicPartition(env.topic(t), p) for t in topics for p in range(PARTITIONS)]
        ends = [end_offset(consumer, tp) for tp in tps]
        committed = consumer.committed(tps, timeout=30)
        return all(end == 0 or c.offset >= end for c, end in zip(committed, ends, strict=True))
    finally:
        consumer.close()


def decided_since(env: PlannerEnv, instant: float, triggers: Iterable[str]) -> bool:
    """True once each of ``triggers`` has a committed fire record (fired or not) scheduled at
    ``instant`` or later."""
    late = {f.trigger_id for f in ledger(env) if f.scheduled_at.timestamp() >= instant}
    return set(triggers) <= late


def read_all(
    bootstrap: str, topic: str, partitions: int = PARTITIONS
) -> list[tuple[bytes | None, bytes | None]]:
    """Every committed record of ``topic``: (key, value)."""
    return [(k, v) for k, v, _ in read_committed(bootstrap, topic, partitions)]


def ledger(env: PlannerEnv) -> list[ev.FireRecord]:
    return [
        decode(v, ev.FireRecord)
        for _, v in read_all(env.bootstrap, env.topic(Topic.FIRES))
        if v is not None
    ]


def duplicates(fires: list[ev.FireRecord]) -> dict[str, int]:
    counts = Counter(f.fire_key for f in fires)
    return {k: n for k, n in counts.items() if n > 1}
