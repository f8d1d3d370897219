"""The tenant CLI as a person runs it, in subprocesses, against a real ``horae api`` on a free
port with a planner and a projector on the running stack (topics under this test's prefix, read
models in a schema of its own): ``horae diff`` / ``apply`` twice (the second plans nothing),
``horae triggers create/list/export/show/pause/resume/run``, ``horae history`` showing the
manual fire, ``horae diff`` exit codes."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import psycopg
import pytest

from horae.devstack.stack import Endpoints
from tests.net import free_ports, kill_all
from tests.waiting import wait_until

TENANT = "acme"
DOCUMENTS = """\
id: every-minute
recurrence: {kind: cron, expr: "* * * * *"}
target: {kind: event, topic: events.acme}
labels: {team: ops}
---
id: hourly
recurrence: {kind: every, interval_s: 3600}
target: {kind: event, topic: events.acme}
policies: {misfire: skip}
"""


@dataclass
class Running:
    env: dict[str, str]
    url: str
    logs: Path

    def horae(self, *args: str, stdin: str | None = None) -> tuple[int, str, str]:
        done = subprocess.run(
            [sys.executable, "-m", "horae.cli.main", *args],
            input=stdin,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        return done.returncode, done.stdout, done.stderr

    def ok(self, *args: str) -> str:
        code, out, err = self.horae(*args)
        assert code == 0, f"horae {' '.join(args)}: exit {code}\n{out}{err}{self.tail()}"
        return out

    def tail(self) -> str:
        return "".join(
            f"\n--- {p.name}\n{p.read_text(errors='replace')[-2000:]}"
            for p in sorted(self.logs.glob("*.log"))
        )


@pytest.fixture
def running(stack: Endpoints, topic_prefix: str, unique: str, tmp_path: Path) -> Iterator[Running]:
    """Topics, read models, planner, projector and ``horae api`` for this test; the CLI's env
    has the API's URL and an author + policy token of tenant ``acme``."""
    schema = f"cli{unique}"
    [port] = free_ports(1)
    env = dict(
        os.environ,
        HORAE_KAFKA_BOOTSTRAP=stack.kafka_bootstrap,
        HORAE_DATABASE_URL=stack.database_url,
        HORAE_TOPIC_PREFIX=topic_prefix,
        HORAE_TOPIC_PARTITIONS="3",
        HORAE_PROJECTION_SCHEMA=schema,
        HORAE_TENANT_KEYS=json.dumps({TENANT: {f"{TENANT}-1": secrets.token_hex(16)}}),
        HORAE_PLATFORM_KEY=secrets.token_hex(16),
        HORAE_API_TOKEN_KEYS=json.dumps({"k1": secrets.token_hex(32)}),
        HORAE_API_PORT=str(port),
        HORAE_API_WORKERS="2",  # the CLI's reads after its writes may reach the other process
        HORAE_PLANNER_SLOT=f"cli-{unique}",
        HORAE_LOG_LEVEL="WARNING",
    )
    for name in ("HORAE_API_URL", "HORAE_API_TOKEN", "HORAE_API_TOKEN_KID", "HORAE_API_HOST"):
        env.pop(name, None)
    logs = tmp_path / "logs"
    logs.mkdir()
    setup = Running(env, f"http://127.0.0.1:{port}", logs)
    setup.ok("topics", "apply")
    setup.ok("migrate")
    processes: list[subprocess.Popen[bytes]] = []
    try:
        for name in ("planner", "projector", "api"):
            with (logs / f"{name}.log").open("wb") as log:
                processes.append(
                    subprocess.Popen(
                        [sys.executable, "-m", "horae.cli.main", name],
                        env=env,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                    )
                )

        def ready() -> bool:
            assert all(p.poll() is None for p in processes), setup.tail()
            try:
                return httpx.get(f"{setup.url}/readyz", timeout=2).status_code == 200
            except httpx.TransportError:
                return False

        wait_until(ready, timeout_s=60, message=setup.tail)
        token = setup.ok("tokens", "issue", "--tenant", TENANT, "--role", "author",
                         "--role", "policy").strip()  # fmt: skip
        # the CLI finds the API from HORAE_API_PORT (no HORAE_API_URL) and the token in the env
        yield Running({**env, "HORAE_API_TOKEN": token}, setup.url, logs)
    finally:
        kill_all(processes)
        with psycopg.connect(stack.database_url, autocommit=True) as conn:
            for name in (schema, f"{schema}_api"):
                conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


@pytest.mark.timeout(300)
def test_the_tenant_cli_against_a_running_api(running: Running, tmp_path: Path) -> None:
    folder = tmp_path / "triggers"
    folder.mkdir()
    (folder / "triggers.yaml").write_text(DOCUMENTS)

    # declarative: diff says there are changes, apply makes them, a second apply plans nothing
    code, out, _ = running.horae("diff", "-f", str(folder))
    assert code == 2 and "+ create every-minute" in out and "+ create hourly" in out
    out = running.ok("apply", "-f", str(folder), "--yes")
    assert "created every-minute" in out and "created hourly" in out
    assert running.ok("apply", "-f", str(folder), "--yes") == "No changes.\n"
    assert running.horae("diff", "-f", str(folder))[:2] == (0, "No changes.\n")

    # imperative
    out = running.ok("triggers", "create", "beat", "--every", "60", "--topic", "events.acme")
    assert out.startswith("created beat: version 1")

    def listed() -> str:  # the listing is the read model: the projector's pace
        out = running.ok("triggers", "list")
        return out if out.count("\n") == 4 else ""

    listing = wait_until(listed, timeout_s=60, message=running.tail)
    rows = [line.split()[:3] for line in listing.splitlines()]
    assert rows == [
        ["ID", "STATE", "VERSION"],
        ["beat", "live", "1"],
        ["every-minute", "live", "1"],
        ["hourly", "live", "1"],
    ]
    exported = tmp_path / "exported.yaml"  # every stored trigger as apply documents
    exported.write_text(running.ok("triggers", "export"))
    assert running.horae("diff", "-f", str(exported), "--prune")[:2] == (0, "No changes.\n")
    card = running.ok("triggers", "show", "hourly")
    assert "schedule     every 3600s" in card and "misfire      skip" in card
    assert json.loads(running.ok("triggers", "show", "hourly", "--json"))["version"] == 1
    assert "accepted (command api-pause-" in running.ok("triggers", "pause", "beat")
    assert "accepted (command api-resume-" in running.ok("triggers", "resume", "beat")
    ran = running.ok("triggers", "run", "hourly", "--json")
    fire_key = json.loads(ran)["fire_key"]
    assert fire_key.startswith("v1/acme/hourly/") and fire_key.endswith("/manual")

    # the manual fire reaches the history (planner decides it, projector records it)
    def manual_in_history() -> str:
        code, out, _ = running.horae("history", "hourly")
        return out if code == 0 and fire_key in out else ""

    history = wait_until(manual_in_history, timeout_s=90, message=running.tail)
    header, *fires = history.splitlines()
    assert header.split()[:3] == ["SCHEDULED", "DUE", "STATE"]
    manual = next(line.split() for line in fires if fire_key in line)
    assert manual[2] == "fired" and manual[3] == "manual"

    # a changed file: diff shows the field and exits 2; --prune plans deleting what it lacks
    (folder / "triggers.yaml").write_text(DOCUMENTS.replace("misfire: skip", "misfire: fire_all"))
    code, out, _ = running.horae("diff", "-f", str(folder))
    assert code == 2
    assert "~ change hourly (version 1)" in out
    assert "    policies.misfire: skip -> fire_all" in out
    assert "(beat); --prune deletes them" in out
    code, out, _ = running.horae("diff", "-f", str(folder), "--prune")
    assert code == 2 and "- delete beat (version 1)" in out

    # refusals: the problem on stderr, exit 1; a usage error exits 2
    code, _, err = running.horae("triggers", "show", "nope")
    assert code == 1 and "(404)" in err
    code, _, err = running.horae("triggers", "list", "--token", "not-a-token")
    assert code == 1 and "(401)" in err
    assert running.horae("triggers", "pause")[0] == 2
