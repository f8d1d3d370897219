"""The soak's driver: a private Kafka broker and PostgreSQL (the devstack's own nodes, on free
ports, in a state directory of the run), every Horae process under its own Kafka principal,
triggers firing every second across tenants (webhook targets to a loopback receiver, event
targets), and seeded chaos: SIGKILL + restart of planners, dispatchers and the projector, SIGKILL +
restart of the broker and of PostgreSQL, members added and drained (SIGTERM) to force rebalances.
Then it lets the system settle, stops it in order, rebuilds the read models into a second schema
with ``horae projections rebuild`` and hands everything to the checker (:mod:`.check`).

It kills only the processes it started (their pids; the broker's and PostgreSQL's of its own
state directory) and reaps every one of them when it ends.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import random
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException

from horae.cli.common import ensure_topics
from horae.cli.projections import migrate_live
from horae.client import HoraeClient
from horae.contracts import events as ev
from horae.devstack.kafka import KafkaCluster, KafkaNode
from horae.devstack.procs import alive, port_open, wait_until
from horae.devstack.stack import LocalStack
from horae.kafka.acls import provision_roles
from horae.kafka.config import KafkaCredentials
from horae.kafka.connection import use_connection
from horae.projections import schema as pschema
from horae.projections.projector import ProjectorConfig
from horae.projections.rebuild import end_offsets
from horae.settings import DevSettings, Settings
from tests.chaos.brokers import TXN_STATE, active_controller, in_sync, kill, leader
from tests.chaos.soak.avro import WireReader
from tests.chaos.soak.check import CheckConfig, Verdict, by_trigger, check, records
from tests.chaos.soak.receiver import SoakReceiver
from tests.net import free_ports
from tests.paths import REPO_ROOT

PREFIX = "soak."
PARTITIONS = 6
SCHEMA = "horae"
SHADOW = "horae_soak_shadow"
DRAIN_WINDOW_S = 6.0  # the checker measures a drain by the instants due within 5 s after it


@dataclass(frozen=True)
class Profile:
    """How much load and how much chaos: the action counts are spread evenly, in a seeded random
    order, over ``minutes`` of chaos."""

    name: str
    minutes: float
    tenants: int
    triggers_per_tenant: int
    planners: int
    dispatchers: int
    process_kills: int
    broker_kills: int
    db_kills: int
    rebalances: int

    @property
    def actions(self) -> list[str]:
        kinds = ("planner", "dispatcher", "projector")
        kills = [f"kill_{kinds[i % 3]}" for i in range(self.process_kills)]
        return (
            kills
            + ["kill_broker"] * self.broker_kills
            + ["kill_db"] * self.db_kills
            + ["rebalance"] * self.rebalances
        )


def profile(name: str, minutes: float | None) -> Profile:
    """``short``: ≤ 8 minutes in all (CI); ``long``: ≥ 30 process kills, 3 broker kills, 3
    database restarts, ≥ 20,000 instants."""
    if name == "short":
        m = minutes or 2.0
        return Profile("short", m, 8, 3, 3, 2, max(3, int(2 * m)), 1, 1, 1)
    if name == "long":
        m = minutes or 24.0
        return Profile("long", m, 8, 6, 3, 2, max(30, int(1.5 * m)), max(3, int(m / 7)),
                       max(3, int(m / 7)), max(4, int(m / 5)))  # fmt: skip
    raise ValueError(f"unknown profile {name!r} (short, long)")


@dataclass
class Managed:
    """One Horae process the driver runs (and restarts)."""

    name: str
    kind: str  # planner | dispatcher | projector
    env: dict[str, str]
    log: Path
    proc: subprocess.Popen[bytes] | None = None
    wanted: bool = True
    restart_at: float = 0.0
    exits: list[int] = field(default_factory=list)

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "horae.cli.main", self.kind], env=self.env, cwd=REPO_ROOT,
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            )  # fmt: skip

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: int) -> None:
        if self.running():
            assert self.proc is not None
            self.proc.send_signal(sig)

    def reap(self, timeout: float = 60) -> int | None:
        if self.proc is None:
            return None
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:  # stuck: its threads' stacks go to its log first
            self.proc.send_signal(signal.SIGABRT)
            try:
                code = self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                code = self.proc.wait(30)
        self.exits.append(code)
        self.proc = None
        return code


#: what the soak sets for the processes it starts (its cluster's admin), put back at close
LOGIN_ENV = ("HORAE_KAFKA_USERNAME", "HORAE_KAFKA_PASSWORD")


@dataclass(frozen=True)
class Services:
    """A Kafka cluster and a PostgreSQL database handed to the soak instead of its own stack
    (left running when it ends; its topics are under ``prefix``, its read models in ``schema``
    and ``schema``_shadow, for the caller to remove). ``faults`` name the actions the soak runs
    instead of its profile's, in this order, spread over its minutes."""

    kafka: KafkaCluster
    database_url: str
    prefix: str
    schema: str
    faults: dict[str, Callable[[], None]]


class Soak:
    def __init__(
        self,
        prof: Profile,
        seed: int,
        workdir: Path,
        say: Callable[[str], None],
        services: Services | None = None,
        brokers: int = 1,
    ) -> None:
        if brokers not in (1, 3):
            raise ValueError(f"the soak runs on 1 or 3 brokers, not {brokers}")
        self.prof = prof
        self.services = services
        self._saved_env: dict[str, str | None] = {}
        self.replicated = services is not None or brokers == 3
        self.broker_victims: list[str] = []
        self.prefix = services.prefix if services else PREFIX
        self.schema = services.schema if services else SCHEMA
        self.shadow = f"{services.schema}_shadow" if services else SHADOW
        self.rng = random.Random(seed)
        self.seed = seed
        self.workdir = workdir
        self.say = say
        self.kills: Counter[str] = Counter()
        self.joins = 0
        self.outages: dict[str, list[float]] = {"broker": [], "db": []}
        self.drains: list[tuple[str, float]] = []
        self.drain_exit_s: list[float] = []
        self.crashes: Counter[str] = Counter()
        self.procs: dict[str, Managed] = {}
        self.triggers: dict[tuple[str, str], str] = {}
        self._stored: dict[tuple[str, int], int] = {}
        self.stack: LocalStack | None = None
        if services is not None:
            self.kafka: KafkaNode | KafkaCluster = services.kafka
            self.bootstrap, self.database_url = services.kafka.bootstrap, services.database_url
            self.settings = Settings(
                kafka_bootstrap=self.bootstrap,
                database_url=self.database_url,
                topic_prefix=self.prefix,
                topic_partitions=PARTITIONS,
            )
        else:
            kport, cport, pport = free_ports(3)
            self.settings = Settings(
                kafka_bootstrap=None,
                database_url=None,
                topic_prefix=PREFIX,
                topic_partitions=PARTITIONS,
                dev=DevSettings(
                    kafka_port=kport,
                    kafka_controller_port=cport,
                    postgres_port=pport,
                    brokers=brokers,
                    kafka_node_ports=free_ports(4) if brokers == 3 else [],
                ),
            )
            self.stack = LocalStack.from_settings(self.settings, state_dir=workdir / "stack")
            assert isinstance(self.stack.kafka, KafkaNode | KafkaCluster)
            assert self.stack.postgres is not None
            self.kafka, self.postgres = self.stack.kafka, self.stack.postgres
            self.bootstrap = self.stack.endpoints.kafka_bootstrap
            self.database_url = self.stack.endpoints.database_url
        self.receiver = SoakReceiver(workdir / "receiver.jsonl")
        self.reader = WireReader()

    # --- the stack --------------------------------------------------------------------------
    @property
    def admin(self) -> KafkaCredentials:
        admin = self.kafka.admin
        assert admin is not None
        return admin

    def kill_broker(self) -> None:
        if isinstance(self.kafka, KafkaCluster):
            self._kill_one_of_three(self.kafka)
            return
        pid = self.kafka.running_pid()
        assert pid is not None, "the soak's broker is not running"
        os.killpg(pid, signal.SIGKILL)
        wait_until(lambda: not alive(pid), 30)
        self.kills["broker"] += 1
        time.sleep(self.rng.uniform(2, 8))
        started = time.monotonic()
        self.kafka.start()
        self.outages["broker"].append(round(time.monotonic() - started, 1))

    def _kill_one_of_three(self, cluster: KafkaCluster) -> None:
        """SIGKILL one broker of the three by its role, in turn: the leader of a fires
        partition, the transaction coordinator's, the active controller; once every replica is
        in sync, so that each kill meets a whole cluster. Started again after 2-8 s."""
        fires = f"{self.prefix}fires"
        watched = [fires, TXN_STATE, "__consumer_offsets"]

        def synced() -> bool:
            try:
                return in_sync(self.bootstrap, watched)
            except KafkaException:  # a broker still starting: ask again
                return False

        self._wait("replicas in sync", synced, 180)
        turn = self.kills["broker"] % 3
        role = ("fires leader", "txn coordinator", "active controller")[turn]
        if turn == 0:
            victim = leader(self.bootstrap, fires, self.kills["broker"] % PARTITIONS)
        elif turn == 1:
            victim = leader(self.bootstrap, TXN_STATE, 0)
        else:
            victim = active_controller(cluster)
        node = cluster.node_of(victim)
        kill(node)
        self.kills["broker"] += 1
        self.broker_victims.append(f"{role} (broker {victim})")
        self._idle(self.rng.uniform(2, 8))
        started = time.monotonic()
        node.stop()  # its pid file
        node.start()
        self.outages["broker"].append(round(time.monotonic() - started, 1))

    def _postgres_pids(self) -> list[int]:
        pid_file = self.postgres.data_dir / "postmaster.pid"
        try:
            master = int(pid_file.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return []
        children = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[1]) == master:
                children.append(int(stat.parent.name))
        return [master, *children]

    def kill_db(self) -> None:
        pids = self._postgres_pids()
        assert pids, "the soak's PostgreSQL is not running"
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        wait_until(
            lambda: not any(alive(p) for p in pids) and not port_open(self.postgres.port), 30
        )
        self.kills["db"] += 1
        time.sleep(self.rng.uniform(2, 6))
        started = time.monotonic()
        self.postgres.start()
        self.outages["db"].append(round(time.monotonic() - started, 1))

    # --- the processes ----------------------------------------------------------------------
    def _env(self, roles: dict[str, KafkaCredentials]) -> dict[str, dict[str, str]]:
        base = {k: v for k, v in os.environ.items() if not k.startswith("HORAE_")}
        tenant_keys = {t: {f"{t}-k": self.keys[t]} for t in self.tenants}
        hooks = {t: {"hook": self.whsec} for t in self.tenants}
        common = {
            **base,
            "PYTHONPATH": str(REPO_ROOT),
            "PYTHONFAULTHANDLER": "1",
            "HORAE_KAFKA_BOOTSTRAP": self.bootstrap,
            "HORAE_DATABASE_URL": self.database_url,
            "HORAE_TOPIC_PREFIX": self.prefix,
            "HORAE_TOPIC_PARTITIONS": str(PARTITIONS),
            "HORAE_TOPIC_REPLICATION_FACTOR": "3" if self.replicated else "1",
            "HORAE_TENANT_KEYS": json.dumps(tenant_keys),
            "HORAE_MIN_INTERVAL_S": "1",
            "HORAE_DISPATCHER_ALLOW": json.dumps(["127.0.0.1/32"]),
            "HORAE_DISPATCHER_WEBHOOK_SECRETS": json.dumps(hooks),
            "HORAE_DISPATCHER_CALLBACK_SECRET": secrets.token_hex(16),
            "HORAE_PLANNER_SESSION_TIMEOUT_MS": "6000",
            # snapshots often: planners killed, fenced or moved start from them under chaos
            "HORAE_PLANNER_SNAPSHOT_CHANGES": "200",
            "HORAE_DISPATCHER_SESSION_TIMEOUT_MS": "6000",
            "HORAE_PROJECTOR_SESSION_TIMEOUT_MS": "6000",
            "HORAE_PROJECTOR_INSTANCE_ID": "soak-projector",
            "HORAE_PROJECTION_SCHEMA": self.schema,
            "HORAE_LOG_LEVEL": "WARNING",
        }
        return {
            role: {
                **common,
                "HORAE_KAFKA_USERNAME": c.username,
                "HORAE_KAFKA_PASSWORD": c.password,
            }
            for role, c in roles.items()
        }

    def add(self, name: str, kind: str) -> Managed:
        env = dict(self.role_env[kind])
        if kind == "planner":
            env["HORAE_PLANNER_SLOT"] = name
        if kind == "dispatcher":
            env["HORAE_DISPATCHER_SLOT"] = name
        m = Managed(name, kind, env, self.workdir / "logs" / f"{name}.log")
        m.start()
        self.procs[name] = m
        return m

    def supervise(self) -> None:
        """Restart wanted processes that are down (crashed or killed) once their time came."""
        now = time.monotonic()
        for m in self.procs.values():
            if not m.wanted or m.running():
                continue
            if m.proc is not None:  # it exited by itself (a broker or database outage)
                code = m.reap()
                self.crashes[m.kind] += 1
                self.say(f"  {m.name} exited with {code}; restarting")
                m.restart_at = now + 2.0
            if now >= m.restart_at:
                m.start()

    def sigkill(self, kind: str) -> None:
        victims = [m for m in self.procs.values() if m.kind == kind and m.wanted and m.running()]
        if not victims:
            return
        m = self.rng.choice(victims)
        m.signal(signal.SIGKILL)
        m.reap()
        m.restart_at = time.monotonic() + self.rng.uniform(0, 4)
        self.kills[kind] += 1

    def drain(self, m: Managed) -> None:
        """SIGTERM ``m`` (graceful drain) and note when; it must exit 0 promptly."""
        at = time.time()
        m.wanted = False
        m.signal(signal.SIGTERM)
        code = m.reap(30)
        self.drain_exit_s.append(round(time.time() - at, 2))
        self.drains.append((m.kind, at))
        if code != 0:
            self.crashes[f"{m.kind}-drain"] += 1
            self.say(f"  {m.name} exited with {code} on SIGTERM")

    def rebalance(self) -> None:
        """A member joins; after the group settled, a random member of that kind is drained; a
        drained original slot joins again."""
        kind = self.rng.choice(("planner", "dispatcher"))
        self._wait("healthy before a rebalance", lambda: self.caught_up(time.time() - 3), 180)
        extra = self.add(f"{kind[0]}x{len(self.drains)}", kind)
        self.joins += 1
        self._idle(10)
        members = [m for m in self.procs.values() if m.kind == kind and m.wanted]
        victim = self.rng.choice(members)
        self.drain(victim)
        self._idle(8)
        if victim is not extra:
            victim.wanted = True
            victim.restart_at = 0.0
            self.supervise()
            self._idle(15)  # its start and join settled: the next drain is measured alone
            self.drain(extra)
        self._idle(DRAIN_WINDOW_S)  # no other action inside the window a drain is measured in

    def _idle(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.supervise()
            time.sleep(0.5)

    # --- setup, load, settle ----------------------------------------------------------------
    def setup(self) -> None:
        (self.workdir / "logs").mkdir(parents=True, exist_ok=True)
        self.say(f"soak: stack at {self.bootstrap} and {self.database_url}")
        if self.stack is not None:
            self.stack.up()
            # this process's clients log in as the stack's admin, whatever connection it was
            # started with (``horae chaos`` installs one from its own settings)
            use_connection(self.kafka.connection().as_user(self.admin))
        # the processes it starts inherit these; close() puts back what the caller had
        self._saved_env = {k: os.environ.get(k) for k in LOGIN_ENV}
        os.environ["HORAE_KAFKA_USERNAME"] = self.admin.username
        os.environ["HORAE_KAFKA_PASSWORD"] = self.admin.password
        self.tenants = [f"soak{i}" for i in range(self.prof.tenants)]
        self.keys = {t: secrets.token_hex(16) for t in self.tenants}
        self.whsec = "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()
        ensure_topics(self.settings, self.bootstrap, tuple(self.tenants))
        migrate_live(
            self.settings.model_copy(update={"projection_schema": self.schema}), self.database_url
        )
        roles = provision_roles(self.bootstrap, self.admin, self.prefix, self.tenants)
        self.role_env = self._env(roles)
        self.receiver.start()
        for i in range(self.prof.planners):
            self.add(f"p{i + 1}", "planner")
        for i in range(self.prof.dispatchers):
            self.add(f"d{i + 1}", "dispatcher")
        self.add("projector", "projector")
        self._put_triggers()

    def _put_triggers(self) -> None:
        authored = datetime.now(UTC).replace(microsecond=0)
        for tenant in self.tenants:
            client = HoraeClient(self.bootstrap, tenant=tenant, key_id=f"{tenant}-k",
                                 key=self.keys[tenant].encode(), prefix=self.prefix)  # fmt: skip
            try:
                for j in range(self.prof.triggers_per_tenant):
                    hook = j % 2 == 0
                    target = (
                        ev.Target(kind=ev.TargetKind.WEBHOOK, url=self.receiver.url,
                                  secret_refs=("hook",))
                        if hook
                        else ev.Target(kind=ev.TargetKind.EVENT, topic=client.events_topic)
                    )  # fmt: skip
                    client.put(
                        ev.TriggerDefinition(
                            tenant=tenant, trigger_id=f"tr{j}", version=1,
                            state=ev.DefinitionState.LIVE,
                            recurrence=ev.Recurrence(kind=ev.RecurrenceKind.CRON,
                                                     expr="* * * * * *"),
                            target=target, authored_at=authored, author="soak",
                            payload=b'{"soak": true}',
                        )
                    )  # fmt: skip
                    self.triggers[(tenant, f"tr{j}")] = "webhook" if hook else "event"
            finally:
                client.close()
        self.put_at = time.time()

    def _fires(self) -> list[dict[str, Any]]:
        return records(self.check_config(0.0), self.reader, f"{self.prefix}fires", "FireRecord")

    def caught_up(self, since: float) -> bool:
        """Every trigger has a committed decision of an instant at or after ``since``."""
        decided = by_trigger(self._fires())
        return all(max(decided.get(t, [0.0])) >= since for t in self.triggers)

    def _wait(self, what: str, check: Callable[[], bool], timeout_s: float) -> bool:
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            self.supervise()
            if check():
                return True
            time.sleep(2.0)
        self.say(f"soak: gave up waiting ({timeout_s:.0f} s): {what}")
        return False

    def webhooks_delivered(self) -> bool:
        fired = {
            f["fire_key"]
            for f in self._fires()
            if f["state"] == "fired" and f["target_kind"] == "webhook"
        }
        return fired <= self.receiver.seen

    def projector_caught_up(self) -> bool:
        config = ProjectorConfig(self.bootstrap, self.database_url, self.schema, self.prefix)
        ends = end_offsets(self.bootstrap, config.existing_topics())
        import psycopg

        with psycopg.connect(self.database_url) as conn:
            stored = pschema.stored_offsets(conn, self.schema)
        # a transaction's commit marker takes the last offset of a partition: never projected;
        # so "one short" must also hold still between two looks
        still, self._stored = stored == self._stored, stored
        return still and all(stored.get(tp, 0) >= end - 1 for tp, end in ends.items() if end > 0)

    def check_config(self, cutoff: float) -> CheckConfig:
        return CheckConfig(
            bootstrap=self.bootstrap,
            username=self.admin.username,
            password=self.admin.password,
            prefix=self.prefix,
            database_url=self.database_url,
            live_schema=self.schema,
            shadow_schema=self.shadow,
            receiver_log=self.receiver.log,
            triggers=self.triggers,
            put_at=getattr(self, "put_at", 0.0),
            cutoff=cutoff,
            drains=[t for k, t in self.drains if k == "planner"],
            dispatcher_drains=[t for k, t in self.drains if k == "dispatcher"],
        )

    # --- the run ----------------------------------------------------------------------------
    def run(self) -> Verdict:
        self.setup()
        self._wait("every trigger decides", lambda: self.caught_up(self.put_at), 180)
        faults = self.services.faults if self.services else {}
        actions = list(faults) if faults else self.prof.actions
        if not faults:
            self.rng.shuffle(actions)
        gap = self.prof.minutes * 60 / max(1, len(actions))
        self.say(f"soak: {len(actions)} actions over {self.prof.minutes:g} min (seed {self.seed})")
        started = time.monotonic()
        for i, action in enumerate(actions):
            self._idle(max(0.0, started + i * gap - time.monotonic()))
            self.say(f"  [{time.monotonic() - started:6.0f} s] {action}")
            if action in faults:
                faults[action]()
            elif action == "kill_broker":
                self.kill_broker()
            elif action == "kill_db":
                self.kill_db()
            elif action == "rebalance":
                self.rebalance()
            else:
                self.sigkill(action.removeprefix("kill_"))
        self._idle(max(0.0, started + self.prof.minutes * 60 - time.monotonic()))
        chaos_end = time.time()
        cutoff = chaos_end + 10
        self.say("soak: chaos over; settling")
        self._wait("planners caught up", lambda: self.caught_up(cutoff + 5), 300)
        for m in self.procs.values():
            if m.kind == "planner" and m.wanted:
                m.wanted = False
                m.signal(signal.SIGTERM)
                m.reap(60)
        self._wait("every webhook delivered", self.webhooks_delivered, 300)
        for m in self.procs.values():
            if m.kind == "dispatcher" and m.wanted:
                m.wanted = False
                m.signal(signal.SIGTERM)
                m.reap(90)
        self._wait("projector caught up", self.projector_caught_up, 300)
        projector = self.procs["projector"]
        projector.wanted = False
        projector.signal(signal.SIGTERM)
        projector.reap(60)
        self.say("soak: rebuilding the read models into a second schema")
        rebuild = subprocess.run(
            [sys.executable, "-m", "horae.cli.main", "projections", "rebuild", "--shadow",
             self.shadow],
            env={**self.role_env["projector"], "HORAE_KAFKA_USERNAME": self.admin.username,
                 "HORAE_KAFKA_PASSWORD": self.admin.password},
            cwd=REPO_ROOT, capture_output=True, text=True, check=False, timeout=900,
        )  # fmt: skip
        if rebuild.returncode != 0:
            raise RuntimeError(f"horae projections rebuild failed: {rebuild.stderr[-2000:]}")
        self.say("soak: checking")
        verdict = check(self.check_config(cutoff))
        verdict.figures.update(self.figures())
        return verdict

    def figures(self) -> dict[str, Any]:
        return {
            "profile": self.prof.name,
            "seed": self.seed,
            "minutes": self.prof.minutes,
            "triggers": len(self.triggers),
            "tenants": len(self.tenants),
            "kills": dict(self.kills),
            "joins": self.joins,
            "process_kills": sum(self.kills[k] for k in ("planner", "dispatcher", "projector")),
            "broker_kills": self.kills["broker"],
            "db_restarts": self.kills["db"],
            "brokers": 3 if self.replicated else 1,
            "broker_victims": self.broker_victims,
            "broker_restart_s": self.outages["broker"],
            "db_restart_s": self.outages["db"],
            "drain_exit_s": self.drain_exit_s,
            "unplanned_exits": dict(self.crashes),
        }

    def close(self) -> None:
        for m in self.procs.values():
            m.wanted = False
            if m.running():
                m.signal(signal.SIGKILL)
            m.reap(30)
        self.receiver.stop()
        for k, v in self._saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        if self.stack is not None:
            use_connection(None)
            self.stack.down()


FIGURES = [
    ("instants", "instants decided in the window"),
    ("expected_instants", "instants expected"),
    ("decisions_lost", "decisions lost"),
    ("decisions_duplicated", "decisions duplicated"),
    ("not_fired_causes", "recorded not fired (state:cause)"),
    ("not_fired_without_cause", "not fired without a cause"),
    ("decision_lateness_p99_s", "decision lateness p99 (s)"),
    ("decision_lateness_max_s", "decision lateness max (s)"),
    ("webhook_decisions", "webhook decisions"),
    ("webhook_calls", "webhook calls"),
    ("webhook_redeliveries", "webhook redeliveries (deduplicated)"),
    ("deliveries_lost", "deliveries lost"),
    ("deliveries_without_key", "deliveries without a key"),
    ("receiver_dedup_exact", "receiver dedup exact"),
    ("event_decisions", "event decisions"),
    ("events_duplicated", "events duplicated"),
    ("read_model_divergence", "read-model divergence (rows)"),
    ("kills", "kills by kind"),
    ("joins", "members added (then drained)"),
    ("brokers", "Kafka brokers"),
    ("broker_victims", "brokers killed (role)"),
    ("broker_restart_s", "broker restart (s)"),
    ("db_restart_s", "database restart (s)"),
    ("drain_handover_s", "planner drain: partitions deciding again after (s)"),
    ("dispatcher_drain_handover_s", "dispatcher drain: deliveries again after (s)"),
    ("drain_exit_s", "drained member exited after (s)"),
    ("unplanned_exits", "processes that exited by themselves"),
]


def render(verdict: Verdict) -> str:
    width = max(len(label) for _, label in FIGURES)
    lines = [f"{label:<{width}}  {verdict.figures.get(key)}" for key, label in FIGURES]
    lines.append("verdict: " + ("OK" if verdict.ok else "FAILED: " + "; ".join(verdict.problems)))
    return "\n".join(lines)


def _exit_on_sigterm(*_: object) -> None:
    raise SystemExit(143)


def run_soak(
    profile_name: str, minutes: float | None, seed: int, keep: bool = False,
    say: Callable[[str], None] = lambda s: print(s, flush=True), brokers: int = 1,
) -> tuple[Verdict, Path]:  # fmt: skip
    """One soak on its own private stack (removed afterwards unless ``keep``), its Kafka one
    broker or a 3-broker KRaft cluster (``brokers``: its broker kills then take a fires
    leader, the transaction coordinator and the active controller in turn); the checker's
    verdict and the run's folder (logs, receiver log, ``result.json``)."""
    prof = profile(profile_name, minutes)
    workdir = Path(tempfile.mkdtemp(prefix="horae-soak-"))
    soak = Soak(prof, seed, workdir, say, brokers=brokers)
    try:
        verdict = soak.run()
    finally:
        soak.close()
        if not keep:
            shutil.rmtree(workdir / "stack", ignore_errors=True)
    summary = {k: v for k, v in verdict.figures.items() if k != "lost_samples"}
    summary["ok"] = verdict.ok
    (workdir / "result.json").write_text(json.dumps(summary, default=str))
    return verdict, workdir


def main(
    minutes: float | None, profile_name: str, seed: int | None, keep: bool = False,
    brokers: int = 1,
) -> int:  # fmt: skip
    """Run a soak and print its figure table and a JSON last line; 0 when the checker passes."""
    seed = seed if seed is not None else random.randrange(1 << 30)
    previous = signal.signal(signal.SIGTERM, _exit_on_sigterm)  # run_soak's finally stops all
    try:
        verdict, workdir = run_soak(profile_name, minutes, seed, keep, brokers=brokers)
    finally:
        signal.signal(signal.SIGTERM, previous)
    print(render(verdict))
    print(f"logs: {workdir}")
    print((workdir / "result.json").read_text(), flush=True)
    return 0 if verdict.ok else 1
