"""Exactly-once decisions through crashes: planners SIGKILLed at injected points (after producing,
before commit; after commit, before the next poll) and restarted while triggers fire every second.
The read_committed ledger must hold each instant of the window exactly once."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator

import pytest

from tests.integration.planner.harness import PlannerEnv, definition, duplicates, ledger

TRIGGERS = [f"sec-{i}" for i in range(6)]


@pytest.fixture
def planner_env(kafka_bootstrap: str, topic_prefix: str) -> Iterator[PlannerEnv]:
    env = PlannerEnv(kafka_bootstrap, topic_prefix)
    env.setup()
    try:
        yield env
    finally:
        env.close()


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


@pytest.mark.timeout(400)
def test_sigkill_at_injected_points_decides_each_instant_once(planner_env: PlannerEnv) -> None:
    for trigger in TRIGGERS:
        planner_env.put(definition(trigger))
    chaos = {"HORAE_FAILPOINTS": "before_commit=0.05,after_commit=0.05"}
    kills = 0
    proc = planner_env.spawn("crashy", chaos)
    started = time.monotonic()
    # at least 60 s of firing, and at least 3 crashes (a slow machine restarts slowly)
    while time.monotonic() - started < 60 or (kills < 3 and time.monotonic() - started < 150):
        if proc.poll() is not None:
            assert proc.returncode == -signal.SIGKILL, f"planner died with {proc.returncode}"
            kills += 1
            proc = planner_env.spawn("crashy", chaos)
        time.sleep(0.2)
    proc.kill()
    proc.wait()
    calm = planner_env.spawn("crashy")  # the same slot, no failpoints: catches up and settles
    time.sleep(8)
    calm.send_signal(signal.SIGTERM)
    assert calm.wait(60) == 0
    assert kills >= 3, f"only {kills} injected crashes happened"
    counts = _contiguous_once(planner_env)
    assert min(counts.values()) >= 55


@pytest.mark.timeout(300)
def test_members_joining_and_leaving_lose_and_double_nothing(planner_env: PlannerEnv) -> None:
    for trigger in TRIGGERS:
        planner_env.put(definition(trigger))
    procs = {slot: planner_env.spawn(slot) for slot in ("p1", "p2", "p3")}
    schedule = [
        (8, "stop", "p2"),
        (16, "start", "p2"),
        (24, "stop", "p1"),
        (32, "stop", "p3"),
        (40, "start", "p1"),
        (48, "start", "p3"),
    ]
    started = time.monotonic()
    for at_s, action, slot in schedule:
        time.sleep(max(0.0, started + at_s - time.monotonic()))
        if action == "stop":
            procs[slot].send_signal(signal.SIGTERM)
            assert procs[slot].wait(60) == 0
        else:
            procs[slot] = planner_env.spawn(slot)
    time.sleep(max(0.0, started + 60 - time.monotonic()))
    for proc in procs.values():
        proc.send_signal(signal.SIGTERM)
    for proc in procs.values():
        assert proc.wait(60) == 0
    counts = _contiguous_once(planner_env)
    assert min(counts.values()) >= 50


@pytest.mark.timeout(240)
def test_zombie_cannot_commit_after_its_session_expired(planner_env: PlannerEnv) -> None:
    for trigger in TRIGGERS:
        planner_env.put(definition(trigger))
    zombie = planner_env.spawn("z1")
    time.sleep(5)
    zombie.send_signal(signal.SIGSTOP)  # paused past its 6 s session timeout
    survivor = planner_env.spawn("z2")
    time.sleep(15)
    zombie.send_signal(signal.SIGCONT)  # wakes up believing it owns partitions
    time.sleep(8)
    for proc in (zombie, survivor):
        proc.send_signal(signal.SIGTERM)
    for proc in (zombie, survivor):
        proc.wait(60)
    _contiguous_once(planner_env)
