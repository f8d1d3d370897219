"""The tenant CLI as a person runs it, in subprocesses, against a real ``horae api`` on a free
port with a planner and a projector on the running stack (topics under this test's prefix, read
models in a schema of its own): ``horae diff`` / ``apply`` twice (the second plans nothing),
``horae triggers create/list/export/show/pause/resume/run``, ``horae history`` showing the
manual fire, ``horae diff`` exit codes; and every state a trigger can be in, as the planner
applies it and the CLI shows it: paused by a command (kept through an amend, lifted by ``apply``
with ``state: live``), completed (a ``count`` fired), suspended (``horae tenants suspend``)."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from collections.abc import Callable, Iterator
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
        HORAE_MIN_INTERVAL_S="1",  # a count-bounded trigger completes within seconds
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

    # an event target's fire was delivered when decided: nothing to cancel, the API says why
    code, _, err = running.horae("fires", "cancel", fire_key)
    assert code == 1 and "(409)" in err and "event target" in err, err

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


def rows(out: str) -> dict[str, list[str]]:
    """``horae triggers list`` by id: [state, version, ..., next, last run, last state]."""
    return {line.split()[0]: line.split()[1:] for line in out.splitlines()[1:]}


def next_of(out: str, trigger_id: str) -> str:
    """The NEXT column of ``trigger_id``'s row (third from the end)."""
    return rows(out)[trigger_id][-3]


@pytest.mark.timeout(300)
def test_every_state_a_trigger_can_be_in(running: Running, tmp_path: Path) -> None:
    def listing(want: dict[str, tuple[str, str]], *flags: str) -> Callable[[], str]:
        """Waits for ``horae triggers list`` to show each id in (state, version)."""

        def shown() -> str:
            out = running.ok("triggers", "list", *flags)
            got = {t: (r[0], r[1]) for t, r in rows(out).items()}
            return out if all(got.get(t) == w for t, w in want.items()) else ""

        return shown

    running.ok("triggers", "create", "beat", "--every", "60", "--topic", "events.acme")
    out = wait_until(listing({"beat": ("live", "1")}), timeout_s=60, message=running.tail)
    assert next_of(out, "beat").endswith("Z")  # its next instant

    # paused by a command: the list says so and shows no next instant
    assert "accepted" in running.ok("triggers", "pause", "beat")
    out = wait_until(listing({"beat": ("paused", "1")}), timeout_s=60, message=running.tail)
    assert next_of(out, "beat") == "-"
    card = running.ok("triggers", "show", "beat", "--json")
    assert json.loads(card)["next_instants"] == []
    assert "beat is paused" in running.ok("history", "beat").splitlines()[-1]

    # an amend without a state keeps the pause
    running.ok("triggers", "amend", "beat", "--set", "description=kept paused")
    out = wait_until(listing({"beat": ("paused", "2")}), timeout_s=60, message=running.tail)
    assert next_of(out, "beat") == "-"

    # apply with state: live resumes it (diff shows the state change)
    document = tmp_path / "beat.yaml"
    document.write_text(
        "id: beat\nstate: live\ndescription: kept paused\n"
        "recurrence: {kind: every, interval_s: 60}\ntarget: {kind: event, topic: events.acme}\n"
    )
    code, out, _ = running.horae("diff", "-f", str(document))
    assert code == 2 and "    state: paused -> live" in out, out
    running.ok("apply", "-f", str(document), "--yes")
    out = wait_until(listing({"beat": ("live", "3")}), timeout_s=60, message=running.tail)
    assert next_of(out, "beat").endswith("Z")
    assert running.horae("diff", "-f", str(document))[:2] == (0, "No changes.\n")

    # a count-bounded trigger that fired its count is completed
    bounded = tmp_path / "twice.yaml"
    bounded.write_text(
        "id: twice\nrecurrence: {kind: every, interval_s: 1, count: 2}\n"
        "target: {kind: event, topic: events.acme}\n"
    )
    running.ok("apply", "-f", str(bounded), "--yes")
    done = listing({"twice": ("completed", "1")}, "--state", "completed")
    out = wait_until(done, timeout_s=90, message=running.tail)
    assert list(rows(out)) == ["twice"] and next_of(out, "twice") == "-"
    history = running.ok("history", "twice")
    assert sum(" fired " in f" {line} " for line in history.splitlines()) == 2, history
    assert history.splitlines()[-1] == "twice is completed: its recurrence has no instant left"
    assert "twice" not in rows(running.ok("triggers", "list", "--state", "live"))

    # the tenant suspended: each of its triggers shows suspended
    code, out, err = running.horae("tenants", "suspend", TENANT, "--reason", "unpaid")
    assert code == 0, out + err
    suspended = {"beat": ("suspended", "3"), "twice": ("suspended", "1")}
    out = wait_until(listing(suspended, "--state", "suspended"), 60, message=running.tail)
    assert next_of(out, "beat") == "-"
    card = running.ok("triggers", "show", "beat")
    assert "state        suspended (run state live)" in card.splitlines()
    assert "is suspended with its tenant" in running.ok("history", "beat").splitlines()[-1]
    assert rows(running.ok("triggers", "list", "--state", "live")) == {}
