"""Exactly-once through broker deaths on a 3-broker KRaft cluster (RF 3,
``min.insync.replicas=2``, producers ``acks=all``).

Mid-steady, the whole system (the soak's: two planners, two dispatchers, the projector, webhook
and event targets, :mod:`tests.chaos.soak.driver`) runs while the leader of a ledger (``fires``)
partition is SIGKILLed, then the leader of the transaction coordinator's partition
(``__transaction_state``; one partition here, so it coordinates every transaction), then the
active controller; each broker is started again once the others took over, and the next fault
waits until every replica is back in sync. Last, the leader of another fires partition is paused
(SIGSTOP) for 20 s, past the broker's and the members' session timeouts, and continued. The
soak's checker (:mod:`tests.chaos.soak.check`) then finds every instant decided exactly once,
every webhook delivered with one key, every event once, and the read models equal to a rebuild.

Mid-peak, 1,000 triggers are due together every 5 s under two planners: the leader of a fires
partition, the transaction coordinator and the active controller are SIGKILLed 50 ms into a peak;
the read_committed ledger must hold every instant of every trigger exactly once.

Processes that exit (a fenced static member, status 1; a transaction call that hung, status 70)
are started again, as a supervisor would.

The cluster is the session's when it has three brokers (``HORAE_TEST_BROKERS=3``), else a
private one started here (free ports, a temporary state directory, removed afterwards) and
shared by both tests."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import pytest
from confluent_kafka import KafkaException, Producer

from horae.contracts import events as ev
from horae.contracts.codec import encode
from horae.contracts.topics import PRODUCER_DEFAULTS, Topic
from horae.devstack.kafka import KafkaCluster
from horae.devstack.private import private_cluster
from horae.devstack.stack import LocalStack
from horae.kafka.admin import Plan, admin_client, apply, delete_under
from horae.kafka.config import client_config
from horae.kafka.connection import use_connection
from horae.streams.planner.clock import ensure_clock_topic
from tests.chaos.brokers import TXN_STATE
from tests.chaos.brokers import active_controller as _active_controller
from tests.chaos.brokers import in_sync as _in_sync
from tests.chaos.brokers import kill as _kill
from tests.chaos.brokers import leader as _leader
from tests.chaos.soak.driver import Profile, Services, Soak, render
from tests.integration.planner.harness import (
    PARTITIONS,
    PlannerEnv,
    decided_since,
    definition,
    duplicates,
    ledger,
)
from tests.waiting import wait_until

TRIGGERS = [f"bk-{i}" for i in range(6)]
SLOTS = ("k1", "k2")
PAUSE_S = 20.0  # a paused broker's SIGSTOP: past every session timeout


@dataclass
class Cluster:
    kafka: KafkaCluster
    env: dict[str, str]  # what a spawned process needs to reach it as the admin


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    if os.environ.get("HORAE_TEST_BROKERS") == "3" and "HORAE_KAFKA_BOOTSTRAP" not in os.environ:
        local: LocalStack = request.getfixturevalue("local_stack")
        assert isinstance(local.kafka, KafkaCluster)
        yield Cluster(local.kafka, {})
        return
    with private_cluster(f"horae-3b-{os.getpid()}-") as kafka:
        admin = kafka.admin
        assert admin is not None
        connection = kafka.connection().as_user(admin)
        use_connection(connection)  # this process's clients (the harness's reads) too
        try:
            yield Cluster(
                kafka,
                {
                    "HORAE_KAFKA_USERNAME": admin.username,
                    "HORAE_KAFKA_PASSWORD": admin.password,
                    "HORAE_KAFKA_SECURITY_PROTOCOL": connection.security_protocol,
                },
            )
        finally:
            use_connection(None)


@dataclass
class Supervised:
    """The planners of the test, started again when one exits."""

    env: PlannerEnv
    extra: dict[str, str]
    logs: Path
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    restarts: list[tuple[str, int | None, str]] = field(default_factory=list)

    def start(self, slot: str) -> None:
        self.procs[slot] = self.env.spawn(slot, self.extra, self.logs / f"{slot}.log")

    def tend(self) -> bool:
        for slot, proc in list(self.procs.items()):
            if proc.poll() is not None:
                lines = (self.logs / f"{slot}.log").read_text(errors="replace").splitlines()
                said = [line for line in lines if line and not line.startswith("%")]
                self.restarts.append((slot, proc.returncode, said[-1][-160:] if said else ""))
                self.start(slot)
        return False

    def stop(self) -> None:
        for proc in self.procs.values():
            proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            proc.wait(60)


def _steady(planners: Supervised, seconds: float) -> None:
    """Let the planners run ``seconds`` (restarting any that exits)."""
    until = time.time() + seconds
    wait_until(lambda: planners.tend() or time.time() > until, seconds + 20, 0.5)


def _contiguous_once(
    env: PlannerEnv, triggers: list[str] = TRIGGERS, step: int = 1
) -> dict[str, tuple[int, int]]:
    """Each trigger's first and last decided instant, every instant between (``step`` s apart)
    decided exactly once."""
    fires = ledger(env)
    doubled = duplicates(fires)
    assert not doubled, f"doubled decisions: {list(doubled)[:5]}"
    by_trigger: dict[str, list[int]] = {}
    for f in fires:
        by_trigger.setdefault(f.trigger_id, []).append(int(f.scheduled_at.timestamp()))
    spans = {}
    for trigger in triggers:
        instants = sorted(by_trigger.get(trigger, []))
        assert instants, f"{trigger} never fired"
        missing = set(range(instants[0], instants[-1] + 1, step)) - set(instants)
        assert not missing, f"{trigger}: instants lost {sorted(missing)[:5]}"
        spans[trigger] = (instants[0], instants[-1])
    return spans


def _setup(cluster: Cluster, prefix: str, logs: Path) -> tuple[PlannerEnv, Supervised]:
    bootstrap = cluster.kafka.bootstrap
    env = PlannerEnv(bootstrap, prefix)
    apply(admin_client(bootstrap), Plan(prefix, PARTITIONS, 3))
    ensure_clock_topic(bootstrap, prefix)
    env.producer = Producer(client_config(bootstrap, PRODUCER_DEFAULTS))
    return env, Supervised(env, {"HORAE_KAFKA_BOOTSTRAP": bootstrap, **cluster.env}, logs)


PEAK = [f"pk-{i}" for i in range(1000)]
PEAK_EVERY_S = 5


@pytest.mark.timeout(600)
def test_kills_mid_peak_lose_and_double_nothing(
    cluster: Cluster, unique: str, tmp_path: Path
) -> None:
    """1,000 triggers due together every 5 s: the leader of a fires partition, then the
    transaction coordinator, then the active controller, is SIGKILLed 50 ms into a peak, while
    its decisions are being produced and committed."""
    kafka = cluster.kafka
    bootstrap = kafka.bootstrap
    prefix = f"t{unique}."
    env, planners = _setup(cluster, prefix, tmp_path)
    fires_topic = env.topic(Topic.FIRES)
    watched = [fires_topic, TXN_STATE, "__consumer_offsets"]
    recoveries: dict[str, float] = {}
    try:
        assert env.producer is not None
        for trigger in PEAK:
            d = definition(trigger, f"*/{PEAK_EVERY_S} * * * * *")
            key = ev.trigger_key(d.tenant, d.trigger_id)
            env.producer.produce(env.topic(Topic.DEFINITIONS), key=key, value=encode(d))
        env.producer.flush(60)
        for slot in SLOTS:
            planners.start(slot)
        wait_until(lambda: decided_since(env, 0, PEAK), 180, 1.0, "the planners decide")
        _steady(planners, 2 * PEAK_EVERY_S)
        victims: tuple[tuple[str, Callable[[], int]], ...] = (
            ("fires partition leader", lambda: _leader(bootstrap, fires_topic, 0)),
            ("transaction coordinator", lambda: _leader(bootstrap, TXN_STATE, 0)),
            ("active controller", lambda: _active_controller(kafka)),
        )
        for what, find in victims:
            wait_until(lambda: _in_sync(bootstrap, watched), 180, 1.0, "replicas back in sync")
            node = kafka.node_of(find())
            peak = (int(time.time()) // PEAK_EVERY_S + 1) * PEAK_EVERY_S
            wait_until(lambda at=peak: time.time() >= at + 0.05, 10, 0.01)  # type: ignore[misc]
            _kill(node)

            def resumed(at: float = peak) -> bool:
                planners.tend()
                try:
                    return decided_since(env, at + 1, PEAK)
                except KafkaException:  # a read that met the dead leader: ask again
                    return False

            wait_until(resumed, 240, 1.0, f"no peak decided after killing the {what}")
            recoveries[f"{what} (broker {node.node_id})"] = round(time.time() - peak, 1)
            node.stop()
            node.start()
            _steady(planners, PEAK_EVERY_S)
        calm = time.time()
        wait_until(lambda: decided_since(env, calm + 1, PEAK), 120, 1.0, "a calm peak")
        planners.stop()
        spans = _contiguous_once(env, PEAK, PEAK_EVERY_S)
        peaks = min((last - first) // PEAK_EVERY_S + 1 for first, last in spans.values())
        print(
            f"\nkills mid-peak: the next peaks decided after {recoveries} s; each of 1,000 "
            f"triggers decided >= {peaks} peaks once; planner restarts {planners.restarts}"
        )
    finally:
        for proc in planners.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(30)
        env.close()
        delete_under(bootstrap, prefix)


SOAK_SEED = 20261202
#: 4 tenants x 3 triggers firing every second (half webhooks to the soak's receiver, half events),
#: two planners, two dispatchers, a projector; the four faults below spread over two minutes
WHOLE = Profile("brokers3", 2.0, 4, 3, 2, 2, 0, 0, 0, 0)


@pytest.mark.timeout(900)
def test_whole_system_through_broker_kills_and_a_pause(
    cluster: Cluster, database_url: str, unique: str
) -> None:
    """The soak's whole system (planners, dispatchers, the projector, a webhook receiver, event
    targets) on the 3-broker cluster while the leader of a fires partition, the transaction
    coordinator and the active controller are SIGKILLed and a partition leader is paused past
    every session timeout; the soak's checker then finds no decision lost or doubled, every
    webhook delivered with one key, every event once, and the read models equal to a rebuild."""
    kafka = cluster.kafka
    bootstrap = kafka.bootstrap
    prefix, schema = f"t{unique}.", f"bk_{unique}"
    fires_topic, watched = f"{prefix}fires", [f"{prefix}fires", TXN_STATE, "__consumer_offsets"]
    recoveries: dict[str, float] = {}
    paused: list[int] = []
    faults: dict[str, Callable[[], None]] = {}
    workdir = Path(tempfile.mkdtemp(prefix="horae-bk-soak-"))
    soak = Soak(
        WHOLE,
        SOAK_SEED,
        workdir,
        lambda line: print(line, flush=True),
        Services(kafka, database_url, prefix, schema, faults),
    )

    def decided_since(at: float) -> bool:
        try:
            return soak.caught_up(at)
        except KafkaException:  # a read that met the dead leader: ask again
            return False

    def fault(how: str, what: str, find: Callable[[], int]) -> Callable[[], None]:
        def act() -> None:
            synced = soak._wait("replicas in sync", lambda: _in_sync(bootstrap, watched), 180)
            assert synced, "replicas not back in sync"
            node = kafka.node_of(find())
            hit_at = time.time()
            if how == "kill":
                _kill(node)
            else:  # SIGSTOP past the broker's session (9 s) and the members' (6 s)
                pid = node.running_pid()
                assert pid is not None
                os.killpg(pid, signal.SIGSTOP)
                paused.append(pid)

            def resumed() -> bool:
                if paused and time.time() >= hit_at + PAUSE_S:
                    os.killpg(paused.pop(), signal.SIGCONT)
                return decided_since(hit_at + 1)

            assert soak._wait(f"decisions after the {how} of the {what}", resumed, 240)
            recoveries[f"{how} {what} (broker {node.node_id})"] = round(time.time() - hit_at, 1)
            if how == "kill":
                node.stop()  # its pid file
                node.start()
            else:
                soak._idle(max(0.0, hit_at + PAUSE_S - time.time()))
                if paused:
                    os.killpg(paused.pop(), signal.SIGCONT)
            soak._idle(5)

        return act

    faults["kill fires leader"] = fault(
        "kill", "fires partition leader", lambda: _leader(bootstrap, fires_topic, 0)
    )
    faults["kill txn coordinator"] = fault(
        "kill", "transaction coordinator", lambda: _leader(bootstrap, TXN_STATE, 0)
    )
    faults["kill active controller"] = fault(
        "kill", "active controller", lambda: _active_controller(kafka)
    )
    faults["pause fires leader"] = fault(
        "pause", "fires partition leader", lambda: _leader(bootstrap, fires_topic, 1)
    )
    try:
        verdict = soak.run()
    finally:
        while paused:
            os.killpg(paused.pop(), signal.SIGCONT)
        soak.close()
        delete_under(bootstrap, prefix)
        with psycopg.connect(database_url, autocommit=True) as conn:
            for name in (schema, f"{schema}_shadow", f"{schema}_api"):
                conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
        shutil.rmtree(workdir, ignore_errors=True)
    print(render(verdict))
    f = verdict.figures
    print(f"\nwhole system on 3 brokers: decisions resumed after {recoveries} s")
    assert verdict.ok, verdict.problems
    assert len(recoveries) == 4
    assert f["instants"] > 0 and f["webhook_decisions"] > 0 and f["event_decisions"] > 0
    assert f["decision_lateness_max_s"] <= 180.0, "a member was silent"
