"""``horae tenants suspend|resume`` as a user runs it, against a running ``horae planner``: the
suspended tenant's every-second trigger records each instant ``tenant suspended`` (not fired),
every partition audits the suspension, and after ``resume`` the trigger fires again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from horae.contracts import events as ev
from horae.contracts.codec import decode
from horae.contracts.topics import Topic
from horae.streams.planner.commands import SUSPENDED
from tests.integration.planner.harness import (
    PARTITIONS,
    TENANT,
    PlannerEnv,
    definition,
    ledger,
    read_all,
)
from tests.waiting import wait_until

PLATFORM_KEY = "platform-secret-for-tests"


def _tenants(env: PlannerEnv, *args: str, key: str | None = PLATFORM_KEY) -> tuple[int, str]:
    environ = dict(os.environ, HORAE_KAFKA_BOOTSTRAP=env.bootstrap, HORAE_TOPIC_PREFIX=env.prefix)
    environ.pop("HORAE_PLATFORM_KEY", None)
    if key is not None:
        environ["HORAE_PLATFORM_KEY"] = key
    done = subprocess.run(
        [sys.executable, "-m", "horae.cli.main", "tenants", *args],
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.returncode, done.stdout + done.stderr


def _fires(env: PlannerEnv, since: float) -> list[ev.FireRecord]:
    return [f for f in ledger(env) if f.trigger_id == "sec" and f.scheduled_at.timestamp() > since]


@pytest.mark.timeout(300)
def test_suspend_records_instants_and_resume_fires_again(planner_env: PlannerEnv) -> None:
    code, out = _tenants(planner_env, "suspend", TENANT, key=None)
    assert code == 2 and "HORAE_PLATFORM_KEY is not set" in out
    code, out = _tenants(planner_env, "resume")
    assert code == 2 and "NAME (the tenant) is required" in out

    planner_env.put(definition("sec"))  # every second
    planner = planner_env.spawn("a", {"HORAE_PLATFORM_KEY": PLATFORM_KEY})
    wait_until(lambda: _fires(planner_env, 0), 90, 0.5, "the trigger never fired")

    suspended_at = time.time()
    code, out = _tenants(planner_env, "suspend", TENANT, "--reason", "unpaid")
    assert code == 0, out
    assert f"{PARTITIONS}/{PARTITIONS} partitions" in out
    assert all(f"commands[{p}]: offset" in out for p in range(PARTITIONS)), out

    def suspended_instants() -> list[ev.FireRecord]:
        return [f for f in _fires(planner_env, suspended_at) if f.cause == SUSPENDED]

    wait_until(lambda: len(suspended_instants()) >= 3, 90, 0.5, "no 'tenant suspended' instants")
    resumed_at = time.time()
    code, out = _tenants(planner_env, "resume", TENANT)
    assert code == 0, out

    def fired_after_resume() -> bool:
        return any(f.state is ev.FireState.FIRED for f in _fires(planner_env, resumed_at))

    wait_until(fired_after_resume, 90, 0.5, "the trigger did not fire again after resume")
    planner.send_signal(signal.SIGTERM)
    assert planner.wait(60) == 0

    stopped = [int(f.scheduled_at.timestamp()) for f in suspended_instants()]
    assert all(f.state is not ev.FireState.FIRED for f in suspended_instants())
    first, last = min(stopped), max(stopped)
    assert sorted(stopped) == list(range(first, last + 1))  # each instant in between recorded
    fired_inside = [
        f
        for f in _fires(planner_env, first - 1)
        if f.state is ev.FireState.FIRED and first <= f.scheduled_at.timestamp() <= last
    ]
    assert not fired_inside
    audit = [decode(v, ev.AuditEntry) for _, v in read_all(planner_env.bootstrap,
             planner_env.topic(Topic.AUDIT)) if v]  # fmt: skip
    acts = sorted((a.action, a.allowed, a.principal) for a in audit)
    expected = [("tenant.resume", True, "horae-platform")] * PARTITIONS
    expected += [("tenant.suspend", True, "horae-platform")] * PARTITIONS
    assert acts == expected
