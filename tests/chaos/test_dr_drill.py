"""The disaster-recovery drill: region a writes, MirrorMaker 2 replicates it into region b, a is
killed whole (its broker, planner and dispatcher: SIGKILL), b is promoted and decides on.

Two private regions (each a Kafka broker of the devstack on free loopback ports, in a temporary
directory, removed afterwards; every Horae process as its own Kafka user under the shipped
ACLs, made in each region by the same code), three triggers firing every second with a webhook
target to one loopback receiver that records every call and deduplicates by key:
``fire_once``, ``skip`` and ``fire_all`` (``max_catchup`` 3), each with a misfire grace of 2 s.

Checked from both ledgers (a's read again once its broker is restarted alone) and the receiver:

- nothing is decided in a after its kill;
- every decision b made is its only decision of that instant (exactly once in b), and every
  instant from a's first to b's last is decided (in a's ledger or by b);
- the outage window is handled by policy: ``fire_once`` one late (catch-up) fire, the instants
  before it ``skipped: misfire policy``; ``skip`` every missed instant skipped; ``fire_all`` the
  latest 3 missed instants fired late, the earlier ones skipped;
- an instant decided in both regions was decided in a within the replication lag before the kill,
  and both decisions carry the same fire key;
- every fire b decided is delivered, and every delivery is of a decided fire (a fire delivered by
  both regions arrives with one key);
- the promotion is audited in b, and the DR state says b writes.

RPO (a's decisions not replicated into b) and RTO (kill -> b's first decision) are printed.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from horae.contracts import events as ev
from horae.contracts.codec import decode, encode
from horae.contracts.topics import PRODUCER_DEFAULTS, Topic, topic_name
from horae.devstack.procs import alive
from horae.dr import DrError
from horae.dr.mirror import flow
from horae.dr.promote import promote, provision_standby, read_topic, status
from horae.dr.regions import Region, provision, read_state, region
from horae.kafka.config import KafkaCredentials
from horae.settings import Settings
from tests.chaos.soak.receiver import SoakReceiver
from tests.integration.planner.harness import HOOK_REF, KEY_ID, ROLES, SECRET, TENANT, definition
from tests.paths import REPO_ROOT
from tests.waiting import wait_until

PARTITIONS = 3
GRACE_S = 2
POLICIES = {
    "once": ev.Policies(misfire=ev.Misfire.FIRE_ONCE, misfire_grace_s=GRACE_S),
    "skip": ev.Policies(misfire=ev.Misfire.SKIP, misfire_grace_s=GRACE_S),
    "all": ev.Policies(misfire=ev.Misfire.FIRE_ALL, max_catchup=3, misfire_grace_s=GRACE_S),
}
STEADY_S = 12.0  # a decides (and is replicated) this long before the kill
AFTER_S = 10.0  # b decides this long after its first decision
LAG_BOUND_S = 15.0  # an instant decided in both regions was decided in a this close to the kill
SKIPPED = "skipped: misfire policy"


@dataclass
class Drill:
    home: Path
    settings: Settings
    a: Region
    b: Region
    receiver: SoakReceiver
    whsec: str
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def env(self, r: Region, role: KafkaCredentials, slot: str) -> dict[str, str]:
        base = {k: v for k, v in os.environ.items() if not k.startswith("HORAE_")}
        keys = {TENANT: {KEY_ID: {"secret": SECRET.decode(), "roles": list(ROLES)}}}
        return {
            **base,
            "PYTHONPATH": str(REPO_ROOT),
            "HORAE_KAFKA_BOOTSTRAP": r.bootstrap,
            "HORAE_KAFKA_USERNAME": role.username,
            "HORAE_KAFKA_PASSWORD": role.password,
            "HORAE_TOPIC_PREFIX": r.settings.topic_prefix,
            "HORAE_TOPIC_PARTITIONS": str(PARTITIONS),
            "HORAE_TOPIC_REPLICATION_FACTOR": "1",
            "HORAE_TENANT_KEYS": json.dumps(keys),
            "HORAE_MIN_INTERVAL_S": "1",
            "HORAE_DISPATCHER_ALLOW": json.dumps(["127.0.0.1/32"]),
            "HORAE_DISPATCHER_WEBHOOK_SECRETS": json.dumps({TENANT: {HOOK_REF: self.whsec}}),
            "HORAE_DISPATCHER_CALLBACK_SECRET": secrets.token_hex(16),
            "HORAE_PLANNER_SLOT": slot,
            "HORAE_DISPATCHER_SLOT": slot,
            "HORAE_PLANNER_TICK_S": "0.2",
            "HORAE_PLANNER_SESSION_TIMEOUT_MS": "6000",
            "HORAE_DISPATCHER_SESSION_TIMEOUT_MS": "6000",
            "HORAE_LOG_LEVEL": "WARNING",
        }

    def spawn(self, r: Region, kind: str, role: KafkaCredentials) -> subprocess.Popen[bytes]:
        log = self.home / f"{r.name}-{kind}.log"
        with log.open("ab") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "horae.cli.main", kind],
                env=self.env(r, role, f"{r.name}1"), cwd=REPO_ROOT,
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            )  # fmt: skip
        self.procs.append(proc)
        return proc

    def ledger(self, r: Region) -> list[ev.FireRecord]:
        fires = topic_name(Topic.FIRES, r.settings.topic_prefix)
        return [decode(v, ev.FireRecord) for _, v in read_topic(r, fires) if v is not None]


@pytest.fixture
def drill(unique: str) -> Iterator[Drill]:
    home = Path(tempfile.mkdtemp(prefix=f"horae-dr-{os.getpid()}-"))
    settings = Settings(
        kafka_bootstrap=None,
        database_url=None,
        topic_prefix=f"t{unique}.",
        topic_partitions=PARTITIONS,
        state_dir=home,
    )
    a, b = region(settings, "a"), region(settings, "b")
    receiver = SoakReceiver(home / "receiver.jsonl")
    whsec = "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()
    d = Drill(home, settings, a, b, receiver, whsec)
    try:
        starts = [threading.Thread(target=r.kafka.start) for r in (a, b)]
        for t in starts:
            t.start()
        for t in starts:
            t.join()
        assert a.reachable() and b.reachable(), "a region's broker did not start"
        receiver.start()
        yield d
    finally:
        for proc in d.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(30)
        flow(a, b, home / "dr", settings.cache_dir).stop()
        for r in (a, b):
            r.kafka.stop()
        receiver.stop()
        shutil.rmtree(home, ignore_errors=True)


def _sigkill_broker(r: Region) -> None:
    pid = r.kafka.running_pid()
    assert pid is not None, f"region {r.name}'s broker is not running"
    os.killpg(pid, signal.SIGKILL)
    wait_until(lambda: not alive(pid), 30, 0.1, f"region {r.name}'s broker outlived SIGKILL")


def _committed(r: Region, group: str, topic: str) -> bool:
    """``group`` has a committed offset on some partition of ``topic`` in region ``r``."""
    consumer = Consumer(r.client({"group.id": group, "enable.auto.commit": False,
                                  "log_level": 3}))  # fmt: skip
    try:
        parts = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        return any(c.offset >= 0 for c in consumer.committed(parts, timeout=10))
    finally:
        consumer.close()


def _instants(fires: list[ev.FireRecord], trigger: str) -> list[ev.FireRecord]:
    return sorted((f for f in fires if f.trigger_id == trigger), key=lambda f: f.scheduled_at)


def _t(f: ev.FireRecord) -> int:
    return int(f.scheduled_at.timestamp())


@pytest.mark.timeout(420)
def test_region_a_lost_region_b_promoted_decides_on(drill: Drill) -> None:
    a, b, home = drill.a, drill.b, drill.home / "dr"
    prefix = drill.settings.topic_prefix
    roles_a = provision(a, (TENANT,))
    roles_b = provision_standby(b, (TENANT,))  # fenced until promoted
    mirror = flow(a, b, home, drill.settings.cache_dir)
    mirror.start()

    producer = Producer(a.client({**PRODUCER_DEFAULTS, "log_level": 3}))
    target = ev.Target(kind=ev.TargetKind.WEBHOOK, url=drill.receiver.url, secret_refs=(HOOK_REF,))
    for name, policies in POLICIES.items():
        d = definition(name, "* * * * * *", policies=policies, target=target)
        key = ev.trigger_key(d.tenant, d.trigger_id)
        producer.produce(topic_name(Topic.DEFINITIONS, prefix), key=key, value=encode(d))
    assert producer.flush(30) == 0
    drill.spawn(a, "planner", roles_a["planner"])
    drill.spawn(a, "dispatcher", roles_a["dispatcher"])

    def decided(r: Region, since: float) -> bool:
        fires = drill.ledger(r)
        late = {f.trigger_id for f in fires if f.scheduled_at.timestamp() >= since}
        return set(POLICIES) <= late

    began = time.time()
    wait_until(lambda: decided(a, began), 120, 1.0, "region a decides")
    steady = time.time() + STEADY_S
    wait_until(lambda: time.time() >= steady and decided(b, steady - 3), STEADY_S + 90, 1.0,
               "region a's decisions reach region b")  # fmt: skip
    for group, topic in (("planner", Topic.DEFINITIONS), ("dispatcher", Topic.LANE_ON_TIME)):
        wait_until(
            lambda g=group, t=topic: _committed(b, f"{prefix}{g}", topic_name(t, prefix)),  # type: ignore[misc]
            60, 1.0, f"the {group}'s offsets translated into region b",
        )  # fmt: skip
    lag_before = mirror.lag()

    # --- region a is lost whole ---------------------------------------------------------------
    for proc in drill.procs:
        proc.send_signal(signal.SIGKILL)
    _sigkill_broker(a)
    killed_at = time.time()
    for proc in drill.procs:
        proc.wait(30)
    with pytest.raises(DrError, match="declare-lost"):
        promote(mirror, home)  # a cannot be fenced: the operator must declare it lost
    done = promote(mirror, home, declare_lost=True)
    promoted_at = time.time()
    assert read_state(home).active == "b" and mirror.running_pid() is None
    drill.spawn(b, "planner", roles_b["planner"])
    drill.spawn(b, "dispatcher", roles_b["dispatcher"])

    def first_in_b() -> float | None:
        own = [f.decided_at.timestamp() for f in drill.ledger(b)]
        later = [t for t in own if t >= killed_at]
        return min(later) if later else None

    first: float = wait_until(first_in_b, 120, 0.5, "region b decides")  # type: ignore[assignment]
    rto = first - killed_at
    settled = time.time() + AFTER_S
    wait_until(lambda: time.time() >= settled and decided(b, settled), AFTER_S + 60, 1.0,
               "region b decides on")  # fmt: skip
    fires_b = drill.ledger(b)
    own_b = [f for f in fires_b if f.decided_at.timestamp() >= killed_at]
    fired_b = {f.fire_key for f in own_b if f.state is ev.FireState.FIRED}
    wait_until(lambda: fired_b <= _delivered(drill), 90, 1.0,
               lambda: f"undelivered: {sorted(fired_b - _delivered(drill))[:5]}")  # fmt: skip
    for proc in drill.procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in drill.procs:
        proc.wait(60)

    fires_b = drill.ledger(b)  # b's processes stopped: its ledger is final
    own_b = [f for f in fires_b if f.decided_at.timestamp() >= killed_at]
    # --- region a's broker back, alone, to read its ledger -------------------------------------
    a.kafka.stop()
    a.kafka.start()
    fires_a = drill.ledger(a)
    mirrored = {(f.fire_key, f.decided_at) for f in fires_b if f.decided_at.timestamp() < killed_at}

    assert fires_a and own_b
    late_a = [f for f in fires_a if f.decided_at.timestamp() > killed_at]
    assert not late_a, f"decided in a after its kill: {late_a[:3]}"
    counts = Counter(f.fire_key for f in own_b)
    doubled_b = {k: n for k, n in counts.items() if n > 1}
    assert not doubled_b, f"decided more than once in b: {list(doubled_b)[:5]}"
    assert all(f.decided_at.timestamp() >= promoted_at - 1 for f in own_b)

    lost = [f for f in fires_a if (f.fire_key, f.decided_at) not in mirrored]
    rpo_s = killed_at - max(d for _, d in mirrored).timestamp() if mirrored else float("inf")
    by_key_a = {(f.trigger_id, _t(f)): f for f in fires_a}
    both: list[tuple[ev.FireRecord, ev.FireRecord]] = []
    windows: dict[str, dict[str, int]] = {}
    for name in POLICIES:
        in_a, in_b = _instants(fires_a, name), _instants(own_b, name)
        assert in_a and in_b, f"{name}: decided in a {len(in_a)}, in b {len(in_b)}"
        seconds = {_t(f) for f in in_a} | {_t(f) for f in in_b}
        missing = set(range(_t(in_a[0]), _t(in_b[-1]) + 1)) - seconds
        assert not missing, f"{name}: instants never decided {sorted(missing)[:5]}"
        for f in in_b:
            pair = by_key_a.get((name, _t(f)))
            if pair is not None:
                both.append((pair, f))
        # the outage window: b's decisions of instants missed by more than the grace
        catch_up = [f for f in in_b if f.state is ev.FireState.FIRED and f.lane is ev.Lane.CATCH_UP]
        skipped = [f for f in in_b if f.state is ev.FireState.SKIPPED and f.cause == SKIPPED]
        assert skipped, f"{name}: no missed instant was skipped (the outage is longer than 5 s)"
        latest_skip = max(_t(f) for f in skipped)
        if name == "once":  # one late fire, unless an on-time fire of that evaluation supersedes it
            superseded = [f for f in skipped if "supersedes" in (f.cause_detail or "")]
            assert len(catch_up) + (1 if superseded else 0) == 1, (
                f"fire_once: {len(catch_up)} late fires, {len(superseded)} superseded"
            )
            if catch_up:
                assert _t(catch_up[0]) > latest_skip, "fire_once: the latest missed instant fires"
        elif name == "skip":
            assert not catch_up, f"skip: {len(catch_up)} late fires"
        else:
            assert len(catch_up) == 3, f"fire_all: {len(catch_up)} late fires, max_catchup 3"
            assert min(_t(f) for f in catch_up) > latest_skip, "fire_all: the latest 3 fire"
        windows[name] = {"skipped": len(skipped), "late_fires": len(catch_up)}
    for in_a_f, in_b_f in both:
        assert in_a_f.fire_key == in_b_f.fire_key
        assert in_a_f.decided_at.timestamp() >= killed_at - LAG_BOUND_S, (
            f"decided in both regions outside the lag: {in_a_f.fire_key}"
        )

    delivered = _deliveries(drill)
    decided_fired = {f.fire_key for f in [*fires_a, *own_b] if f.state is ev.FireState.FIRED}
    assert set(delivered) <= decided_fired, "a delivery of a fire nobody decided"
    audit = [
        decode(v, ev.AuditEntry)
        for _, v in read_topic(b, topic_name(Topic.AUDIT, prefix))
        if v is not None
    ]
    assert [e.tenant for e in audit if e.action == "dr.promote"] == [TENANT]
    st = status(mirror, home)
    assert st.active == "b" and not st.mirror_running and st.last_replicated is not None
    assert st.lag is not None  # both answer again: what a holds that b never got
    never = sum(st.lag.values())
    print(
        f"\nDR drill: RPO {len(lost)} decisions of a not replicated ({never} records in all; the "
        f"last replicated decision {rpo_s:.1f} s before the "
        f"kill); RTO {rto:.1f} s (kill -> b's first decision); promotion took "
        f"{done.finished_at - done.started_at:.1f} s {done.steps}; lag before the kill "
        f"{ {t: n for t, n in lag_before.items() if n} } records; "
        f"decided in both regions {len(both)} (same fire key each); outage by policy {windows}; "
        f"decisions a {len(fires_a)}, b {len(own_b)}; deliveries {sum(delivered.values())} "
        f"calls, {len(delivered)} keys, {sum(n - 1 for n in delivered.values())} repeated"
    )


def _deliveries(drill: Drill) -> Counter[str]:
    """Calls per fire key the receiver had (its log: one JSON line per call)."""
    calls: Counter[str] = Counter()
    for line in drill.receiver.log.read_text().splitlines():
        hit = json.loads(line)
        if hit.get("body_key"):
            calls[hit["body_key"]] += 1
    return calls


def _delivered(drill: Drill) -> set[str]:
    return set(_deliveries(drill))
