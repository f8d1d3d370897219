"""``horae dev up --tls --brokers 3`` through the real CLI, on a stack of its own (free ports, a
temporary state directory): three brokers on SASL_SSL and PostgreSQL with ssl=on; the settings it
prints are enough for a client (``horae topics apply`` makes every topic with replication factor
3); ``status`` finds the cluster and its TLS without the flags; ``down`` stops every process and
removes the CA."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.net import free_ports

HORAE = [sys.executable, "-m", "horae.cli.main"]


@pytest.fixture
def dev_env(tmp_path: Path) -> Iterator[dict[str, str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HORAE_")}
    kafka, controller, postgres, *nodes = free_ports(7)
    env.update(
        HORAE_STATE_DIR=str(tmp_path / "state"),
        HORAE_DEV_KAFKA_PORT=str(kafka),
        HORAE_DEV_KAFKA_CONTROLLER_PORT=str(controller),
        HORAE_DEV_POSTGRES_PORT=str(postgres),
        HORAE_DEV_KAFKA_NODE_PORTS=json.dumps(nodes),
    )
    yield env
    subprocess.run([*HORAE, "dev", "down"], env=env, capture_output=True, timeout=200)


def _horae(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*HORAE, *args], env=env, capture_output=True, text=True, timeout=200)


def _running(marker: str) -> list[str]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if marker in cmdline:
            found.append(f"{pid}: {cmdline[:120]}")
    return found


def _exports(text: str) -> dict[str, str]:
    return dict(re.findall(r"\b(HORAE_[A-Z_]+)=(\S+?)[)\s]", text + " "))


@pytest.mark.timeout(600)
def test_tls_cluster_up_status_down(dev_env: dict[str, str]) -> None:
    up = _horae(dev_env, "dev", "up", "--tls", "--brokers", "3")
    assert up.returncode == 0, up.stdout + up.stderr
    exports = _exports(up.stdout)
    state = Path(dev_env["HORAE_STATE_DIR"])
    assert exports["HORAE_KAFKA_SECURITY_PROTOCOL"] == "SASL_SSL"
    assert exports["HORAE_KAFKA_SSL_CA_FILE"] == str(state / "tls" / "ca.pem")
    assert exports["HORAE_DATABASE_SSL_CA_FILE"] == str(state / "tls" / "ca.pem")
    assert len(exports["HORAE_KAFKA_BOOTSTRAP"].split(",")) == 3
    assert "kafka users" in up.stdout  # the role users and ACLs were made over TLS

    status = _horae(dev_env, "dev", "status")  # no flags: the state says cluster and TLS
    assert status.returncode == 0, status.stdout + status.stderr
    assert status.stdout.count("healthy") == 2

    # a client configured only by what `up` printed (another state dir: nothing found by itself)
    client = {k: v for k, v in dev_env.items() if not k.startswith("HORAE_")}
    client.update(exports, HORAE_STATE_DIR=str(state.parent / "elsewhere"), HORAE_TOPIC_PREFIX="c.")
    applied = _horae(client, "topics", "apply")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    described = _horae(client, "topics", "describe")
    assert described.returncode == 0, described.stdout + described.stderr
    rows = [line for line in described.stdout.splitlines() if line.startswith("c.")]
    assert rows and all(" rf=3 " in line for line in rows), described.stdout

    assert len(_running(str(state))) >= 4  # three brokers and PostgreSQL
    down = _horae(dev_env, "dev", "down")
    assert down.returncode == 0, down.stderr
    assert _running(str(state)) == []
    assert not (state / "tls").exists()
