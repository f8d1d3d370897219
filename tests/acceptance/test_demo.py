"""`horae demo` (the README's run command, minus the stack it reuses): every process runs, the
event trigger fires and the webhook trigger is delivered, signed, to the local receiver; a
second run finds one demo trigger pair, cleans up what an earlier demo left and stops on
Ctrl-C; `./scripts/run` under a pseudo-terminal leaves no process behind after Ctrl-C."""

from __future__ import annotations

import fcntl
import json
import os
import re
import signal
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest

from horae.client import HoraeClient
from horae.contracts import events as ev
from horae.devstack.stack import Endpoints
from tests.net import free_ports
from tests.paths import REPO_ROOT
from tests.waiting import wait_until

DEMO_KEY = "demo-test-secret"  # the demo tenant's ingress key (demo/demo-1) in these tests


@pytest.fixture
def demo_schema(stack: Endpoints, unique: str) -> Iterator[str]:
    """The demo's read-model schema, dropped when the test ends (with the API's state schema
    beside it)."""
    name = f"demo{unique}"
    yield name
    with psycopg.connect(stack.database_url, autocommit=True) as conn:
        for schema in (name, f"{name}_api"):
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _demo_env(stack: Endpoints, topic_prefix: str, demo_schema: str) -> dict[str, str]:
    return dict(
        os.environ,
        HORAE_KAFKA_BOOTSTRAP=stack.kafka_bootstrap,
        HORAE_DATABASE_URL=stack.database_url,
        HORAE_TOPIC_PREFIX=topic_prefix,
        HORAE_PROJECTION_SCHEMA=demo_schema,
        HORAE_TOPIC_PARTITIONS="3",
        HORAE_API_PORT=str(free_ports(1)[0]),
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


class Demo:
    """``horae demo`` as a subprocess, its output (stdout and stderr) collected by a thread."""

    def __init__(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "horae.cli.main", "demo"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout or []:
            self.lines.append(line)

    def fired(self) -> bool:
        return any(line.startswith("  fired ") for line in self.lines)

    def interrupt(self, within_s: float) -> int:
        """Ctrl-C (SIGINT to the demo); its exit status, which must come within ``within_s``."""
        self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(within_s)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the demo did not stop within {within_s} s of Ctrl-C") from None
        finally:
            self.close()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)
        self.reader.join(10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    @property
    def text(self) -> str:
        return "".join(self.lines)


def _demo_triggers(database_url: str, schema: str) -> dict[str, str]:
    """The demo tenant's triggers in the read model: trigger id -> state."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        try:
            rows = conn.execute(
                f'SELECT trigger_id, state FROM "{schema}".triggers WHERE tenant = %s', ("demo",)
            ).fetchall()
        except psycopg.errors.UndefinedTable:
            return {}
    return dict(rows)


def _live(database_url: str, schema: str) -> set[str]:
    return {t for t, state in _demo_triggers(database_url, schema).items() if state != "deleted"}


def _leftovers(stack: Endpoints, topic_prefix: str) -> list[str]:
    """Two triggers as an earlier demo made them (ids with a random suffix, version 1), signed
    with the demo tenant's key; the webhook's target is gone and it fires once a year."""
    client = HoraeClient(
        stack.kafka_bootstrap, tenant="demo", key_id="demo-1", key=DEMO_KEY.encode(),
        prefix=topic_prefix,
    )  # fmt: skip
    event = ev.TriggerDefinition(
        tenant="demo",
        trigger_id="heartbeat-0a1b2c",
        version=1,
        state=ev.DefinitionState.LIVE,
        recurrence=ev.Recurrence(kind=ev.RecurrenceKind.CRON, expr="0 0 1 1 *"),
        target=ev.Target(kind=ev.TargetKind.EVENT, topic=client.events_topic),
        authored_at=datetime.now(UTC).replace(microsecond=0),
        author="horae-demo",
    )
    hook = replace(
        event,
        trigger_id="heartbeat-0a1b2c-hook",
        target=ev.Target(
            kind=ev.TargetKind.WEBHOOK, url="http://127.0.0.1:9/hook", secret_refs=("demo",)
        ),
    )
    with client:
        client.put(event)
        client.put(hook)
    return [event.trigger_id, hook.trigger_id]


@pytest.mark.timeout(300)
def test_a_second_demo_finds_one_trigger_pair_and_stops_on_ctrl_c(
    stack: Endpoints, topic_prefix: str, demo_schema: str
) -> None:
    """Two runs in a row. While the first runs, two triggers named as earlier demos named theirs
    are made live; the second deletes them at start (and says so), so only its own pair
    (``heartbeat``, ``heartbeat-hook``) is live while it runs; Ctrl-C stops it, and its pair is
    deleted too."""
    env = _demo_env(stack, topic_prefix, demo_schema) | {
        "HORAE_TENANT_KEYS": json.dumps({"demo": {"demo-1": DEMO_KEY}}),
    }
    db = stack.database_url
    first = Demo(env)
    try:
        wait_until(first.fired, 120, 0.2, lambda: f"no fire in the first run:\n{first.text}")
        old = _leftovers(stack, topic_prefix)
        wait_until(lambda: set(old) <= _live(db, demo_schema), 60, 0.2, "leftovers not live")
        assert first.interrupt(60) == 0, first.text
    finally:
        first.close()
    assert "demo: triggers demo/heartbeat and demo/heartbeat-hook deleted" in first.text
    assert _live(db, demo_schema) == set(old), "the first run left its own triggers live"

    second = Demo(env)
    try:
        wait_until(second.fired, 120, 0.2, lambda: f"no fire in the second run:\n{second.text}")
        said = (
            "demo: deleted 2 trigger(s) an earlier demo left live: "
            "demo/heartbeat-0a1b2c, demo/heartbeat-0a1b2c-hook\n"
        )
        assert said in second.lines, second.text
        pair = {"heartbeat", "heartbeat-hook"}
        wait_until(lambda: _live(db, demo_schema) == pair, 30, 0.2, "not exactly one pair live")
        started = time.monotonic()
        assert second.interrupt(30) == 0, second.text
        print(f"the second demo stopped {time.monotonic() - started:.1f} s after Ctrl-C")
    finally:
        second.close()
    assert "demo: triggers demo/heartbeat and demo/heartbeat-hook deleted" in second.text
    assert not re.search(r"^%\d\|", second.text, re.M), "librdkafka's own lines were printed"
    assert _live(db, demo_schema) == set()
    assert set(_demo_triggers(db, demo_schema)) == pair | set(old)


def _run_pids(prefix: str) -> list[int]:
    """Every process whose environment holds this run's topic prefix (what ``scripts/run``
    started, however deep, orphans included), zombies aside."""
    mark = f"HORAE_TOPIC_PREFIX={prefix}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if mark not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            if (entry / "stat").read_text().rpartition(")")[2].split()[0] == "Z":
                continue
        except OSError:
            continue
        found.append(int(entry.name))
    return found


def _controlling_tty() -> None:
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)  # in the child: the pty becomes its terminal


@pytest.mark.timeout(300)
def test_ctrl_c_on_scripts_run_in_a_terminal_leaves_no_process(
    stack: Endpoints, topic_prefix: str, demo_schema: str
) -> None:
    """``./scripts/run`` in a pseudo-terminal, as a newcomer runs it: in a session of its own with
    the pty as its controlling terminal, so the Ctrl-C written to the pty's master is a SIGINT to
    the whole foreground process group, as a real terminal sends it. ``scripts/run`` runs
    ``scripts/bootstrap`` (nothing to do: the test runs from that virtualenv), ``horae dev up``
    (which, with HORAE_KAFKA_BOOTSTRAP and HORAE_DATABASE_URL set, starts nothing and only checks
    the test's stack) and then ``horae demo``. Once fires are seen, one Ctrl-C; within 15 s no
    process of that run may remain (none carrying its topic prefix in its environment)."""
    env = _demo_env(stack, topic_prefix, demo_schema)
    master, slave = os.openpty()
    try:
        run = subprocess.Popen(
            [str(REPO_ROOT / "scripts" / "run")],
            cwd=REPO_ROOT,
            env=env,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            start_new_session=True,
            preexec_fn=_controlling_tty,
        )
    finally:
        os.close(slave)
    out = bytearray()

    def read() -> None:
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: every holder of the terminal closed it
                return
            if not chunk:
                return
            out.extend(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    text = lambda: out.decode(errors="replace").replace("\r\n", "\n")  # noqa: E731
    try:
        wait_until(lambda: "\n  fired " in text(), 180, 0.2, lambda: f"no fire:\n{text()}")
        assert len(_run_pids(topic_prefix)) >= 5, "the demo and its four processes"
        os.write(master, b"\x03")  # Ctrl-C
        wait_until(
            lambda: not _run_pids(topic_prefix), 15, 0.1,
            lambda: f"still running: {_run_pids(topic_prefix)}\n{text()}",
        )  # fmt: skip
        assert run.wait(5) == 0, text()
    finally:
        for pid in _run_pids(topic_prefix):
            os.kill(pid, signal.SIGKILL)
        if run.poll() is None:
            run.kill()
            run.wait(30)
        reader.join(10)
        os.close(master)
    assert "demo: triggers demo/heartbeat and demo/heartbeat-hook deleted" in text()
    assert "started again" not in text(), "a process stopped by the same Ctrl-C was restarted"
    assert not re.search(r"^%\d\|", text(), re.M), "librdkafka's own lines were printed"
