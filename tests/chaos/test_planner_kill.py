"""Exactly-once decisions through crashes: planners SIGKILLed at injected points (after producing,
before commit; after commit, before the next poll) and restarted while triggers fire every second.
The read_committed ledger must hold each instant of the window exactly once."""

from __future__ import annotations

import signal
import socket
import subprocess
import time
import urllib.request
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from horae.contracts import events as ev
from horae.contracts.codec import decode
from horae.contracts.topics import Topic
from horae.kafka.admin import admin_client
from horae.streams.planner.worker import PARTITIONS_LOST
from tests.integration.planner.harness import (
    PARTITIONS,
    PlannerEnv,
    decided_since,
    definition,
    duplicates,
    ledger,
)
from tests.integration.topic_reader import read_committed
from tests.waiting import wait_until

TRIGGERS = [f"sec-{i}" for i in range(6)]
# what librdkafka logs when it finds, on waking, that its group session expired meanwhile
SESSION_EXPIRED = "Consumer group session timed out"


def _contiguous_once(env: PlannerEnv) -> dict[str, int]:
    fires = ledger(env)
    assert not duplicates(fires), f"duplicate keys: {list(duplicates(fires))[:5]}"
    counts = {}
    for trigger in TRIGGERS:
        instants = sorted(int(f.scheduled_at.timestamp()) for f in fires if f.trigger_id == trigger)
        assert instants, f"{trigger} never fired"
        missing = set(range(instants[0], instants[-1] + 1)) - set(instants)
        assert not missing, f"{trigger}: instants missing {sorted(missing)[:5]}"
        counts[trigger] = len(instants)
    return counts


def _exited_or(proc: subprocess.Popen[bytes], done: Callable[[], bool]) -> Callable[[], bool]:
    return lambda: proc.poll() is not None or done()


def _all_fired_after(env: PlannerEnv, at: float) -> Callable[[], bool]:
    """Every trigger has a decision for an instant after ``at`` (the group settled since)."""
    return lambda: decided_since(env, at + 1, TRIGGERS)


def _members(env: PlannerEnv) -> set[str]:
    """The group instance ids of the planner group's members now."""
    group = f"{env.prefix}planner"
    admin = admin_client(env.bootstrap)  # referenced until the answer came
    future = admin.describe_consumer_groups([group])[group]
    return {m.group_instance_id for m in future.result(timeout=30).members}


def _joined(env: PlannerEnv, *slots: str) -> Callable[[], bool]:
    """True once every slot's process is a member of the group (started: SIGTERM stops it
    cleanly, where during its start-up it would not)."""
    return lambda: {f"{env.prefix}planner-{s}" for s in slots} <= _members(env)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _aborts(port: int) -> float:
    """The planner's ``horae_planner_transaction_aborts_total``, read from its /metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "horae_planner_transaction_aborts_total":
                return float(sample.value)
    raise AssertionError("no horae_planner_transaction_aborts_total served")


def _crash_loop(
    env: PlannerEnv, slot: str, chaos: dict[str, str], at_least_s: float, kills_needed: int = 3
) -> int:
    """Run a planner in ``slot`` under failpoints (``chaos``), restarting it after each injected
    crash, for at least ``at_least_s`` and ``kills_needed`` crashes (150 s at most: a slow
    machine restarts slowly); then kill it. The number of crashes."""
    kills = 0
    proc = env.spawn(slot, chaos)
    started = time.monotonic()

    def over() -> bool:
        elapsed = time.monotonic() - started
        return elapsed >= 150 or (elapsed >= at_least_s and kills >= kills_needed)

    while not over():
        wait_until(_exited_or(proc, over), 200, 0.1, "neither a crash nor the end of the run")
        if proc.poll() is not None:
            assert proc.returncode == -signal.SIGKILL, f"planner died with {proc.returncode}"
            kills += 1
            proc = env.spawn(slot, chaos)
    proc.kill()
    proc.wait()
    return kills


@pytest.mark.timeout(400)
def test_sigkill_at_injected_points_decides_each_instant_once(planner_env: PlannerEnv) -> None:
    for trigger in TRIGGERS:
        planner_env.put(definition(trigger))
    chaos = {"HORAE_FAILPOINTS": "before_commit=0.05,after_commit=0.05"}
    kills = _crash_loop(planner_env, "crashy", chaos, 60)
    calm_at = time.time()
    calm = planner_env.spawn("crashy")  # the same slot, no failpoints: catches up and settles
    wait_until(_all_fired_after(planner_env, calm_at), 90, 0.5, "the calm planner caught up")
    calm.send_signal(signal.SIGTERM)
    assert calm.wait(60) == 0
    assert kills >= 3, f"only {kills} injected crashes happened"
    counts = _contiguous_once(planner_env)
    assert min(counts.values()) >= 55


@pytest.mark.timeout(300)
def test_members_joining_and_leaving_lose_and_double_nothing(planner_env: PlannerEnv) -> None:
    """After each join or leave, every trigger fires again (the group settled) before the next."""
    for trigger in TRIGGERS:
        planner_env.put(definition(trigger))
    procs = {slot: planner_env.spawn(slot) for slot in ("p1", "p2", "p3")}
    wait_until(lambda: decided_since(planner_env, 0, TRIGGERS), 90, 0.5, "three members fire")
    wait_until(_joined(planner_env, *procs), 90, 0.5, "three members joined")
    schedule = [
        ("stop", "p2"),
        ("start", "p2"),
        ("stop", "p1"),
        ("stop", "p3"),
        ("start", "p1"),
        ("start", "p3"),
    ]
    for action, slot in schedule:
        at = time.time()
        if action == "stop":
            procs[slot].send_signal(signal.SIGTERM)
            assert procs[slot].wait(60) == 0
        else:
            procs[slot] = planner_env.spawn(slot)
            wait_until(_joined(planner_env, slot), 90, 0.5, f"{slot} never joined")
        wait_until(_all_fired_after(planner_env, at), 90, 0.5, f"none after {action} {slot}")
    for proc in procs.values():
        proc.send_signal(signal.SIGTERM)
    for proc in procs.values():
        assert proc.wait(60) == 0
    _contiguous_once(planner_env)


@pytest.mark.timeout(240)
def test_zombie_cannot_commit_after_its_session_expired(
    planner_env: PlannerEnv, tmp_path: Path
) -> None:
    """A member paused past its session timeout wakes believing it owns its partitions. Either it
    tries to commit what it decides and the group refuses the commit (its transaction aborts,
    its records stay invisible read_committed), or librdkafka notices the expired session first
    and revokes its partitions before it commits. Either way each instant is committed once."""
    for trigger in TRIGGERS:
        planner_env.put(definition(trigger))
    port = _free_port()
    zombie = planner_env.spawn("z1", {"HORAE_PLANNER_METRICS_PORT": str(port)}, tmp_path / "z1")
    wait_until(lambda: decided_since(planner_env, 0, TRIGGERS), 90, 0.5, "the zombie decides")
    aborts = _aborts(port)
    zombie.send_signal(signal.SIGSTOP)  # paused past its 6 s session timeout
    paused_at = time.time()
    survivor = planner_env.spawn("z2", log=tmp_path / "z2")
    wait_until(_all_fired_after(planner_env, paused_at), 90, 0.5, "the survivor never took over")
    zombie.send_signal(signal.SIGCONT)  # wakes up believing it owns partitions
    zombie_log = tmp_path / "z1"

    def fenced() -> str:
        if _aborts(port) > aborts:
            return "commit refused"
        text = zombie_log.read_text()
        return "revoked" if SESSION_EXPIRED in text or PARTITIONS_LOST in text else ""

    def neither() -> str:
        tail = "\n".join(zombie_log.read_text().splitlines()[-30:])
        return f"the zombie was neither refused nor revoked; its log ends:\n{tail}"

    how = wait_until(fenced, 60, 0.2, neither)
    for proc in (zombie, survivor):
        proc.send_signal(signal.SIGTERM)
    for proc in (zombie, survivor):
        proc.wait(60)
    _contiguous_once(planner_env)  # read_committed: each instant once
    everything = read_committed(
        planner_env.bootstrap, planner_env.topic(Topic.FIRES), PARTITIONS, "read_uncommitted"
    )
    written = Counter(decode(v, ev.FireRecord).fire_key for _, v, _ in everything if v)
    committed = Counter(f.fire_key for f in ledger(planner_env))
    if how == "commit refused":
        assert written - committed, "the zombie's aborted decisions are in the log, not committed"


@pytest.mark.timeout(400)
def test_a_peak_killed_between_its_transactions_is_decided_once(planner_env: PlannerEnv) -> None:
    """Hundreds of triggers due every second, committed in transactions of 100 decisions: the
    planner is killed between two transactions of one second's peak (failpoint
    ``between_transactions``), restarted, and every instant of every trigger is in the ledger
    exactly once."""
    herd = [f"herd-{i}" for i in range(400)]
    for trigger in herd:
        planner_env.put(definition(trigger))
    small = {"HORAE_PLANNER_TXN_MAX_DECISIONS": "100"}
    chaos = {**small, "HORAE_FAILPOINTS": "between_transactions=0.05"}
    kills = _crash_loop(planner_env, "herd", chaos, 20)
    calm_at = time.time()
    calm = planner_env.spawn("herd", small)
    wait_until(lambda: decided_since(planner_env, calm_at + 1, herd), 90, 0.5, "caught up")
    calm.send_signal(signal.SIGTERM)
    assert calm.wait(60) == 0
    assert kills >= 3, f"only {kills} injected crashes happened"
    fires = ledger(planner_env)
    assert not duplicates(fires), f"duplicate keys: {list(duplicates(fires))[:5]}"
    by_trigger: dict[str, list[int]] = {}
    for f in fires:
        by_trigger.setdefault(f.trigger_id, []).append(int(f.scheduled_at.timestamp()))
    assert set(by_trigger) == set(herd)
    for trigger, instants in by_trigger.items():
        missing = set(range(min(instants), max(instants) + 1)) - set(instants)
        assert not missing, f"{trigger}: instants missing {sorted(missing)[:5]}"
