"""Fail-back, as a drill: a writes, b is promoted (a planned switch: a answers and is fenced), b
decides; then a is wiped and made b's standby (``reset_standby``), MirrorMaker 2 runs b -> a, and
a is promoted back (fencing b). Two private regions on loopback, each process as its own Kafka
user under the shipped ACLs (the planner only: what is checked is the ledger).

Checked: after the wipe, a holds b's ledger, replicated (every decision b made before the
fail-back); once a is promoted back and its planner runs, a's ledger holds every instant of the
trigger from its first to its last exactly once (the decisions of a, then of b, then of a again:
nothing lost, nothing decided twice); b decides nothing after it was fenced; the DR state says a
writes after two promotions, each audited in the region promoted (and a's mirror of b's)."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from horae.contracts import events as ev
from horae.contracts.codec import decode, encode
from horae.contracts.topics import PRODUCER_DEFAULTS, Topic, topic_name
from horae.dr.failback import reset_standby
from horae.dr.mirror import flow
from horae.dr.promote import promote, provision_standby, read_topic
from horae.dr.regions import Region, provision, read_state, region
from horae.settings import Settings
from tests.chaos.soak.receiver import SoakReceiver
from tests.chaos.test_dr_drill import PARTITIONS, Drill
from tests.integration.planner.harness import HOOK_REF, TENANT, definition
from tests.waiting import wait_until

TRIGGER = "fb"
STEADY_S = 6.0  # each region decides this long before the switch


@pytest.fixture
def regions(unique: str) -> Iterator[Drill]:
    home = Path(tempfile.mkdtemp(prefix=f"horae-drfb-{os.getpid()}-"))
    settings = Settings(
        kafka_bootstrap=None, database_url=None, topic_prefix=f"t{unique}.",
        topic_partitions=PARTITIONS, state_dir=home,
    )  # fmt: skip
    a, b = region(settings, "a"), region(settings, "b")
    d = Drill(home, settings, a, b, SoakReceiver(home / "receiver.jsonl"), "whsec_unused")
    try:
        starts = [threading.Thread(target=r.kafka.start) for r in (a, b)]
        for t in starts:
            t.start()
        for t in starts:
            t.join()
        assert a.reachable() and b.reachable(), "a region's broker did not start"
        yield d
    finally:
        for proc in d.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(30)
        for source, target in ((a, b), (b, a)):
            flow(source, target, home / "dr", settings.cache_dir).stop()
        for r in (a, b):
            r.kafka.stop()
        d.receiver.stop()  # the Drill's; no dispatcher calls it here
        shutil.rmtree(home, ignore_errors=True)


def _instants(d: Drill, r: Region) -> list[ev.FireRecord]:
    return [f for f in d.ledger(r) if f.trigger_id == TRIGGER]


def _decided_since(d: Drill, r: Region, since: float) -> bool:
    return any(f.decided_at.timestamp() >= since for f in _instants(d, r))


def _audited(r: Region) -> list[ev.AuditEntry]:
    topic = topic_name(Topic.AUDIT, r.settings.topic_prefix)
    entries = [decode(v, ev.AuditEntry) for _, v in read_topic(r, topic) if v is not None]
    return [e for e in entries if e.action == "dr.promote"]


@pytest.mark.timeout(420)
def test_fail_back_to_a_wiped_and_mirrored_from_b(regions: Drill) -> None:
    d = regions
    a, b, home = d.a, d.b, d.home / "dr"
    prefix = d.settings.topic_prefix
    roles_a = provision(a, (TENANT,))
    roles_b = provision_standby(b, (TENANT,))  # fenced until promoted
    forth = flow(a, b, home, d.settings.cache_dir)
    forth.start()
    producer = Producer(a.client({**PRODUCER_DEFAULTS, "log_level": 3}))
    target = ev.Target(
        kind=ev.TargetKind.WEBHOOK, url="http://127.0.0.1:9/", secret_refs=(HOOK_REF,)
    )
    policies = ev.Policies(misfire=ev.Misfire.FIRE_ALL, max_catchup=1000, misfire_grace_s=2)
    dfn = definition(TRIGGER, "* * * * * *", policies=policies, target=target)
    producer.produce(topic_name(Topic.DEFINITIONS, prefix),
                     key=ev.trigger_key(dfn.tenant, dfn.trigger_id), value=encode(dfn))  # fmt: skip
    assert producer.flush(30) == 0
    planner_a = d.spawn(a, "planner", roles_a["planner"])
    began = time.time()
    wait_until(lambda: _decided_since(d, a, began), 120, 1.0, "region a decides")
    steady = time.time() + STEADY_S
    wait_until(lambda: time.time() >= steady and _decided_since(d, b, steady - 3),
               STEADY_S + 60, 1.0, "a's decisions reach b")  # fmt: skip

    # --- a planned switch to b (a answers: fenced), b decides ---------------------------------
    first = promote(forth, home, lag_timeout_s=60)
    assert first.fenced and first.lag is not None and not any(first.lag.values()), first.lag
    planner_a.terminate()
    planner_a.wait(60)
    planner_b = d.spawn(b, "planner", roles_b["planner"])
    switched = time.time()
    steady = switched + STEADY_S
    wait_until(lambda: time.time() >= steady and _decided_since(d, b, steady),
               STEADY_S + 120, 1.0, "region b decides")  # fmt: skip

    # --- fail-back: a wiped, b mirrored into it, a promoted back --------------------------------
    wiped = reset_standby(a, b, home)
    assert wiped["topics"] > 0 and read_state(home).fresh == "a"
    assert _instants(d, a) == []  # the wipe left nothing of a's own ledger
    back = flow(b, a, home, d.settings.cache_dir)
    back.start()
    wait_until(lambda: _decided_since(d, a, steady), 90, 1.0, "b's decisions reach a")
    second = promote(back, home, lag_timeout_s=60)
    assert second.fenced and second.lag is not None and not any(second.lag.values()), second.lag
    fenced_at = second.finished_at
    planner_a2 = d.spawn(a, "planner", roles_a["planner"])
    steady = time.time() + STEADY_S
    wait_until(lambda: time.time() >= steady and _decided_since(d, a, steady),
               STEADY_S + 120, 1.0, "region a decides again")  # fmt: skip
    planner_a2.terminate()
    planner_a2.wait(60)
    planner_b.terminate()
    planner_b.wait(60)

    ledger_a = _instants(d, a)
    counts = Counter(int(f.scheduled_at.timestamp()) for f in ledger_a)
    twice = {t: n for t, n in counts.items() if n > 1}
    assert not twice, f"instants decided twice in a: {twice}"
    span = range(min(counts), max(counts) + 1)
    missing = [t for t in span if t not in counts]
    assert not missing, f"instants never decided: {missing[:10]} (of {len(span)})"
    assert any(f.decided_at.timestamp() < switched for f in ledger_a)  # a's first decisions
    assert any(switched <= f.decided_at.timestamp() < fenced_at for f in ledger_a)  # b's
    assert any(f.decided_at.timestamp() > fenced_at for f in ledger_a)  # a's again
    late_b = [f for f in _instants(d, b) if f.decided_at.timestamp() > fenced_at]
    assert not late_b, f"b decided after it was fenced: {late_b[:3]}"
    state = read_state(home)
    assert state.active == "a" and len(state.promotions) == 2 and state.fresh is None
    assert [e.tenant for e in _audited(b)] == [TENANT]
    # a (wiped since the first) holds the first promotion's entry as mirrored from b, then its own
    assert [e.tenant for e in _audited(a)] == [TENANT, TENANT]
    print(f"fail-back: wiped {wiped}, switch {first.to_dict()['took_s']} s, "
          f"fail-back {second.to_dict()['took_s']} s, {len(span)} instants")  # fmt: skip
