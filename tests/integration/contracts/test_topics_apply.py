from __future__ import annotations

import os
import subprocess
import sys

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from horae.contracts import topics as tp
from horae.kafka.admin import Plan, apply, drift
from horae.kafka.config import client_config
from tests.conftest import CREDENTIAL_VARIABLES
from tests.waiting import wait_until


def horae(*args: str, bootstrap: str) -> subprocess.CompletedProcess[str]:
    creds = {k: v for k, v in os.environ.items() if k in CREDENTIAL_VARIABLES}
    env = {"HORAE_KAFKA_BOOTSTRAP": bootstrap, "PATH": "/usr/bin:/bin", **creds}
    return subprocess.run(
        [sys.executable, "-m", "horae.cli.main", "topics", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=90,
        check=False,
    )


def test_cli_apply_twice_then_describe_no_drift(kafka_bootstrap: str, plan: Plan) -> None:
    flags = (
        *("--topic-prefix", plan.prefix, "--topic-partitions", "3"),
        *("--topic-replication-factor", "1"),
    )
    first = horae("apply", *flags, bootstrap=kafka_bootstrap)
    assert first.returncode == 0, first.stderr
    assert f"{len(plan.topics())} change(s)" in first.stdout
    second = horae("apply", *flags, bootstrap=kafka_bootstrap)
    assert second.returncode == 0, second.stderr
    assert "0 change(s)" in second.stdout
    # ACLs on an authorizing broker (the tests' private stack), a note on one without
    assert ("ACLs: " in second.stdout) and (
        "in place for roles planner, dispatcher, projector, api" in second.stdout
        or "no authorizer" in second.stdout
    )
    described = horae("describe", *flags, bootstrap=kafka_bootstrap)
    assert described.returncode == 0, described.stdout + described.stderr
    assert "0 drift(s)" in described.stdout


def test_describe_shows_config_drift_and_apply_fixes_it(admin: AdminClient, topics: Plan) -> None:
    assert drift(admin, topics) == []
    fires = tp.spec(tp.Topic.FIRES).name(topics.prefix)
    entry = ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource("topic", fires, incremental_configs=[entry])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result()
    # config changes propagate asynchronously
    found = wait_until(lambda: drift(admin, topics), 15, 0.2, "the altered config never showed")
    assert [(d.topic, d.what, d.expected) for d in found] == [
        (fires, "config cleanup.policy", "compact")
    ]
    assert apply(admin, topics) == [f"updated {fires}: cleanup.policy=compact"]
    wait_until(lambda: not drift(admin, topics), 15, 0.2, "the applied config never showed")
    assert apply(admin, topics) == []


def test_librdkafka_murmur2_agrees_with_partition_for(
    kafka_bootstrap: str, admin: AdminClient, topics: Plan
) -> None:
    name = tp.spec(tp.Topic.PLANNER_STATE).name(topics.prefix)
    producer = Producer(client_config(kafka_bootstrap, tp.PRODUCER_DEFAULTS))
    landed: dict[str, int] = {}

    def delivered(err: object, msg: object) -> None:
        assert err is None
        landed[msg.key().decode()] = msg.partition()  # type: ignore[attr-defined]

    keys = [f"tenant-{i}/trigger-{i * 7}" for i in range(40)]
    for key in keys:
        producer.produce(name, key=key.encode(), value=b"x", on_delivery=delivered)
    assert producer.flush(30) == 0
    assert landed == {k: tp.partition_for(k, 3) for k in keys}
