"""`horae dev up | status | down` through the real CLI, on a stack of its own."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.net import free_ports

HORAE = [sys.executable, "-m", "horae.cli.main"]


@pytest.fixture
def dev_env(tmp_path: Path) -> Iterator[dict[str, str]]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("HORAE_KAFKA_BOOTSTRAP", "HORAE_DATABASE_URL")
    }
    kafka, controller, postgres = free_ports(3)
    env.update(
        HORAE_STATE_DIR=str(tmp_path / "state"),
        HORAE_DEV_KAFKA_PORT=str(kafka),
        HORAE_DEV_KAFKA_CONTROLLER_PORT=str(controller),
        HORAE_DEV_POSTGRES_PORT=str(postgres),
    )
    yield env
    subprocess.run([*HORAE, "dev", "down"], env=env, capture_output=True, timeout=120)


def _horae(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*HORAE, *args], env=env, capture_output=True, text=True, timeout=150)


def _processes_using(marker: str) -> list[str]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if marker in cmdline:
            found.append(f"{pid}: {cmdline[:120]}")
    return found


@pytest.mark.timeout(300)
def test_up_status_down_leaves_nothing_running(dev_env: dict[str, str]) -> None:
    up = _horae(dev_env, "dev", "up")
    assert up.returncode == 0, up.stderr
    kafka, postgres = dev_env["HORAE_DEV_KAFKA_PORT"], dev_env["HORAE_DEV_POSTGRES_PORT"]
    assert f"127.0.0.1:{kafka}" in up.stdout and f"127.0.0.1:{postgres}" in up.stdout

    again = _horae(dev_env, "dev", "up")  # idempotent
    assert again.returncode == 0, again.stderr

    status = _horae(dev_env, "dev", "status")
    assert status.returncode == 0, status.stdout + status.stderr
    assert status.stdout.count("healthy") == 2

    state_dir = dev_env["HORAE_STATE_DIR"]
    assert _processes_using(state_dir), "the stack's processes should be running"

    down = _horae(dev_env, "dev", "down")
    assert down.returncode == 0, down.stderr
    assert _processes_using(state_dir) == []

    after = _horae(dev_env, "dev", "status")
    assert after.returncode == 1
    assert after.stdout.count("DOWN") == 2


def test_port_taken_is_explained_without_traceback(dev_env: dict[str, str]) -> None:
    port = int(dev_env["HORAE_DEV_KAFKA_PORT"])
    with socket.socket() as blocker:
        blocker.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        blocker.bind(("127.0.0.1", port))
        blocker.listen()
        up = _horae(dev_env, "dev", "up")
    assert up.returncode == 1
    assert f"port {port}" in up.stderr and "already in use" in up.stderr
    assert "Traceback" not in up.stderr


@pytest.mark.parametrize("command", ["planner", "dispatcher", "projector"])
def test_processes_explain_unreachable_services(dev_env: dict[str, str], command: str) -> None:
    (silent,) = free_ports(1)
    env = dict(dev_env, HORAE_KAFKA_BOOTSTRAP=f"127.0.0.1:{silent}")  # nothing listens there
    done = _horae(env, command)
    assert done.returncode == 1
    assert f"Kafka at 127.0.0.1:{silent} does not answer" in done.stderr
    assert "horae dev up" in done.stderr and "Traceback" not in done.stderr
