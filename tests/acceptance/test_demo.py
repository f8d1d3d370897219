"""`horae demo` (the README's run command, minus the stack it reuses): every process runs, the
event trigger fires and the webhook trigger is delivered, signed, to the local receiver."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from horae.devstack.stack import Endpoints
from tests.waiting import wait_until


@pytest.fixture
def demo_schema(stack: Endpoints, unique: str) -> Iterator[str]:
    """The demo's read-model schema, dropped when the test ends."""
    name = f"demo{unique}"
    yield name
    with psycopg.connect(stack.database_url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def _demo_env(stack: Endpoints, topic_prefix: str, demo_schema: str) -> dict[str, str]:
    return dict(
        os.environ,
        HORAE_KAFKA_BOOTSTRAP=stack.kafka_bootstrap,
        HORAE_DATABASE_URL=stack.database_url,
        HORAE_TOPIC_PREFIX=topic_prefix,
        HORAE_PROJECTION_SCHEMA=demo_schema,
        HORAE_TOPIC_PARTITIONS="3",
    )


@pytest.mark.timeout(180)
def test_demo_fires_and_delivers(stack: Endpoints, topic_prefix: str, demo_schema: str) -> None:
    env = _demo_env(stack, topic_prefix, demo_schema)
    done = subprocess.run(
        [sys.executable, "-m", "horae.cli.main", "demo", "--seconds", "25"],
        env=env,
        capture_output=True,
        text=True,
        timeout=150,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "started planner, projector, dispatcher" in out
    if "HORAE_KAFKA_USERNAME" in os.environ:  # the stack authenticates: least privilege
        assert "each runs as its own Kafka user (api, dispatcher, planner, projector)" in out
    assert len(re.findall(r"^  fired \S+Z", out, re.M)) >= 2
    delivered = re.findall(r"^  delivered (\S+)  signature (\w+)", out, re.M)
    assert len(delivered) >= 2 and all(ok == "ok" for _, ok in delivered)
    assert all(key.startswith("v1/demo/") for key, _ in delivered)


def _child(pid: int, command: str) -> int | None:
    """The child process of ``pid`` running ``horae <command>``."""
    try:
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        for kid in map(int, kids):
            if Path(f"/proc/{kid}/cmdline").read_bytes().split(b"\0")[-2] == command.encode():
                return kid
    except (OSError, IndexError):
        return None
    return None


@pytest.mark.timeout(240)
def test_the_demo_starts_a_process_that_died_again(
    stack: Endpoints, topic_prefix: str, demo_schema: str
) -> None:
    env = _demo_env(stack, topic_prefix, demo_schema) | {"HORAE_DEMO_EXPR": "* * * * * *"}
    demo = subprocess.Popen(
        [sys.executable, "-m", "horae.cli.main", "demo", "--seconds", "90"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []

    def read() -> None:
        for line in demo.stdout or []:
            lines.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        wait_until(lambda: any(line.startswith("  fired ") for line in lines), 120, 0.2, "fires")
        planner = _child(demo.pid, "planner")
        assert planner is not None, "the demo's planner process was not found"
        os.kill(planner, signal.SIGKILL)
        wait_until(lambda: "demo: planner started again\n" in lines, 30, 0.2, "not restarted")
        after = len(lines)
        wait_until(
            lambda: any(line.startswith("  fired ") for line in lines[after:]),
            90, 0.2, "no fire after the restart",
        )  # fmt: skip
    finally:
        demo.send_signal(signal.SIGINT)
        demo.wait(60)
        reader.join(10)
        if demo.stdout is not None:
            demo.stdout.close()
    assert "demo: planner exited with -9\n" in lines
