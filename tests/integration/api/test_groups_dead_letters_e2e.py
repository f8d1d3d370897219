"""Group acts and dead letters through the real broker and PostgreSQL: ``horae planner``,
``projector``, ``dispatcher`` and ``api`` processes, each logged in as its own Kafka role user
under the shipped ACLs (``role_env``), topics under this test's prefix, read models in a schema
of their own, and a local receiver; every act through HTTP (and the CLI for a few).

- Groups: a dry run counts the triggers a selector names; a group pause reaches the planner
  (the read models show both paused, the others live); a group amend of policies makes new
  versions that stay paused; the same request again answers ``replayed`` without acting; the
  act is one audit entry; ``horae triggers resume --selector`` resumes them; another tenant's
  selector never names them.
- Dead letters: a webhook whose target answers 503 with one attempt allowed is dead-lettered;
  the projector's read model lists it (cause, attempts); another tenant lists nothing and gets
  404 for its id, to show or to redrive, and a selector of its own selects nothing of it; the
  tenant redrives it (dry run first): the target is called again under the same fire key, that
  attempt dies too, and its dead letter links back to the first (``redrive_of``), which shows
  ``redriven`` by the token's subject; ``horae dead-letters list`` shows them."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from horae.devstack.stack import Endpoints
from tests.net import free_ports, kill_all
from tests.waiting import wait_until

TENANTS = ("acme", "globex")
HOOK_SECRET = "whsec_aGVsbG8taG9yYWUtd2ViaG9vay1rZXkh"


@dataclass
class Hits:
    """What the receiver was sent: (path, idempotency key)."""

    calls: list[tuple[str, str]] = field(default_factory=list)

    def of(self, key: str) -> int:
        return sum(1 for _, k in self.calls if k == key)


def receiver(hits: Hits) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            hits.calls.append((self.path, self.headers.get("Idempotency-Key", "")))
            self.send_response(503 if self.path == "/busy" else 204)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@dataclass
class System:
    url: str
    env: dict[str, str]
    tokens: dict[str, str]
    logs: Path
    processes: list[subprocess.Popen[bytes]]
    origin: str
    hits: Hits

    def call(self, tenant: str, method: str, path: str, **kwargs: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.tokens[tenant]}"}
        return httpx.request(method, self.url + path, headers=headers, timeout=30, **kwargs)

    def ok(self, tenant: str, method: str, path: str, **kwargs: Any) -> Any:
        r = self.call(tenant, method, path, **kwargs)
        assert r.status_code in (200, 201, 202), f"{method} {path}: {r.text}{self.tail()}"
        return r.json()

    def cli(self, tenant: str, *args: str) -> str:
        env = {**self.env, "HORAE_API_URL": self.url, "HORAE_API_TOKEN": self.tokens[tenant]}
        done = subprocess.run(
            [sys.executable, "-m", "horae.cli.main", *args],
            env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, f"horae {' '.join(args)}: {done.stdout}{done.stderr}"
        return done.stdout

    def tail(self) -> str:
        return "".join(
            f"\n--- {p.name}\n{p.read_text(errors='replace')[-3000:]}"
            for p in sorted(self.logs.glob("*.log"))
        )


def horae(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "horae.cli.main", *args],
        env=env, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"horae {' '.join(args)}: {done.stdout}{done.stderr}"
    return done.stdout


@pytest.fixture
def system(
    stack: Endpoints,
    topic_prefix: str,
    unique: str,
    role_env: dict[str, dict[str, str]],
    tmp_path: Path,
) -> Iterator[System]:
    schema = f"grp{unique}"
    [port] = free_ports(1)
    hits = Hits()
    server = receiver(hits)
    env = dict(
        os.environ,
        HORAE_KAFKA_BOOTSTRAP=stack.kafka_bootstrap,
        HORAE_DATABASE_URL=stack.database_url,
        HORAE_TOPIC_PREFIX=topic_prefix,
        HORAE_TOPIC_PARTITIONS="3",
        HORAE_PROJECTION_SCHEMA=schema,
        HORAE_TENANT_KEYS=json.dumps({t: {f"{t}-1": secrets.token_hex(16)} for t in TENANTS}),
        HORAE_PLATFORM_KEY=secrets.token_hex(16),
        HORAE_API_TOKEN_KEYS=json.dumps({"k1": secrets.token_hex(32)}),
        HORAE_API_PORT=str(port),
        HORAE_API_REQUIRE_VERIFIED_TARGETS="false",
        HORAE_MIN_INTERVAL_S="1",
        HORAE_PLANNER_SLOT=f"grp-{unique}",
        HORAE_DISPATCHER_SLOT=f"grp-{unique}",
        HORAE_DISPATCHER_WEBHOOK_SECRETS=json.dumps({t: {"hook": HOOK_SECRET} for t in TENANTS}),
        HORAE_DISPATCHER_ALLOW=json.dumps(["127.0.0.1/32"]),
        HORAE_PROJECTOR_BATCH_MS="100",
        HORAE_LOG_LEVEL="WARNING",
    )
    for name in ("HORAE_API_TOKEN_KID", "HORAE_API_HOST", "HORAE_API_URL", "HORAE_API_TOKEN"):
        env.pop(name, None)
    logs = tmp_path / "logs"
    logs.mkdir()
    horae(env, "topics", "apply")
    horae(env, "migrate")
    processes: list[subprocess.Popen[bytes]] = []
    url = f"http://127.0.0.1:{port}"
    try:
        for role in ("planner", "projector", "dispatcher", "api"):
            with (logs / f"{role}.log").open("wb") as log:
                processes.append(
                    subprocess.Popen(
                        [sys.executable, "-m", "horae.cli.main", role],
                        env={**env, **role_env[role]},
                        stdout=log,
                        stderr=subprocess.STDOUT,
                    )
                )
        origin = f"http://127.0.0.1:{server.server_address[1]}"
        system = System(url, env, {}, logs, processes, origin, hits)

        def ready() -> bool:
            assert all(p.poll() is None for p in processes), system.tail()
            try:
                return httpx.get(f"{url}/readyz", timeout=2).status_code == 200
            except httpx.TransportError:
                return False

        wait_until(ready, timeout_s=120, message=system.tail)
        for tenant in TENANTS:
            system.tokens[tenant] = horae(
                env, "tokens", "issue", "--tenant", tenant, "--role", "author",
                "--role", "read", "--subject", f"{tenant}-alice",
            ).strip()  # fmt: skip
        yield system
    finally:
        kill_all(processes)
        server.shutdown()
        server.server_close()
        with psycopg.connect(stack.database_url, autocommit=True) as conn:
            for name in (schema, f"{schema}_api"):
                conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def event_trigger(tenant: str, trigger_id: str, env: str) -> dict[str, Any]:
    return {
        "trigger_id": trigger_id,
        "recurrence": {"kind": "cron", "expr": "*/5 * * * * *"},
        "target": {"kind": "event", "topic": f"events.{tenant}"},
        "labels": {"env": env},
    }


def shown(system: System, tenant: str, trigger_id: str) -> tuple[str, int]:
    body = system.ok(tenant, "GET", f"/v1/schedules/{trigger_id}")
    return body["state"], body["version"]


@pytest.mark.timeout(400)
def test_group_acts_reach_the_planner_once_and_stay_in_the_tenant(system: System) -> None:
    for tenant, trigger_id, env in (
        ("acme", "p1", "prod"), ("acme", "p2", "prod"), ("acme", "d1", "dev"),
        ("globex", "g1", "prod"),
    ):  # fmt: skip
        system.ok(tenant, "POST", "/v1/schedules", json=event_trigger(tenant, trigger_id, env))

    def listed(tenant: str) -> int:
        return len(system.ok(tenant, "GET", "/v1/schedules")["items"])

    wait_until(lambda: listed("acme") == 3 and listed("globex") == 1, 60, 0.3, system.tail)
    dry = system.ok("acme", "POST", "/v1/groups/pause", json={"selector": "env=prod",
                                                               "dry_run": True})  # fmt: skip
    assert (dry["matched"], dry["trigger_ids"]) == (2, ["p1", "p2"])
    theirs = system.ok("globex", "POST", "/v1/groups/pause",
                       json={"selector": "env=prod", "dry_run": True})  # fmt: skip
    assert theirs["trigger_ids"] == ["g1"]

    paused = system.ok("acme", "POST", "/v1/groups/pause",
                       json={"selector": "env=prod", "request_id": "pause-1"})  # fmt: skip
    assert [c["trigger_id"] for c in paused["changed"]] == ["p1", "p2"]

    def states() -> dict[str, str]:
        ids = (("acme", "p1"), ("acme", "p2"), ("acme", "d1"), ("globex", "g1"))
        return {t: shown(system, tenant, t)[0] for tenant, t in ids}

    want = {"p1": "paused", "p2": "paused", "d1": "live", "g1": "live"}
    wait_until(lambda: states() == want, 60, 0.5, lambda: f"{states()}{system.tail()}")

    amended = system.ok(
        "acme",
        "POST",
        "/v1/groups/policies",
        json={"selector": "env=prod", "request_id": "skip-1", "policies": {"misfire": "skip"}},
    )
    assert [c["version"] for c in amended["changed"]] == [2, 2]
    wait_until(
        lambda: all(shown(system, "acme", t) == ("paused", 2) for t in ("p1", "p2")),
        60, 0.5, lambda: f"{states()}{system.tail()}",
    )  # fmt: skip
    p1 = system.ok("acme", "GET", "/v1/schedules/p1")
    assert p1["policies"]["misfire"] == "skip" and p1["next_instants"] == []

    def audited() -> list[dict[str, Any]]:
        items = system.ok("acme", "GET", "/v1/audit")["items"]
        return [i for i in items if i["action"].startswith("group.")]

    wait_until(lambda: len(audited()) == 2, 60, 0.5, system.tail)
    entries = audited()
    pause_entry = next(e for e in entries if e["action"] == "group.pause")
    assert pause_entry["principal"].startswith("acme-alice (")
    assert pause_entry["detail"]["trigger_ids"] == "p1,p2"
    again = system.ok("acme", "POST", "/v1/groups/pause",
                      json={"selector": "env=prod", "request_id": "pause-1"})  # fmt: skip
    assert again["replayed"] is True and again["matched"] == 2
    assert system.call("acme", "POST", "/v1/groups/resume",
                       json={"selector": "env=prod", "request_id": "pause-1"}
                       ).status_code == 409  # fmt: skip
    assert [e["action"] for e in audited()].count("group.pause") == 1
    assert system.ok("globex", "GET", "/v1/audit")["items"] == []

    out = system.cli("acme", "triggers", "resume", "--selector", "env=prod", "--dry-run")
    assert "2 trigger(s) match, 2 would change" in out and "p1" in out
    out = system.cli("acme", "triggers", "resume", "--selector", "env=prod", "--yes",
                     "--request-id", "resume-1")  # fmt: skip
    assert "2 changed" in out
    want = {"p1": "live", "p2": "live", "d1": "live", "g1": "live"}
    wait_until(lambda: states() == want, 60, 0.5, lambda: f"{states()}{system.tail()}")
    assert [shown(system, "acme", t)[1] for t in ("p1", "p2")] == [2, 2]


@pytest.mark.timeout(400)
def test_dead_letters_listed_redriven_with_lineage_and_out_of_other_tenants_reach(
    system: System,
) -> None:
    dead = {
        "trigger_id": "dead",
        "recurrence": {"kind": "cron", "expr": "*/30 * * * * *"},
        "target": {"kind": "webhook", "url": f"{system.origin}/busy", "secret_refs": ["hook"]},
        "policies": {"retry": {"max_attempts": 1}},
        "labels": {"env": "prod"},
    }
    system.ok("acme", "POST", "/v1/schedules", json=dead)
    system.ok("globex", "POST", "/v1/schedules", json=event_trigger("globex", "g1", "prod"))

    def letters(tenant: str, **params: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = system.ok(tenant, "GET", "/v1/dead-letters", params=params)[
            "items"
        ]
        return items

    first = wait_until(lambda: letters("acme"), 120, 0.5, system.tail)[0]
    assert first["trigger_id"] == "dead" and first["attempts"] == 1
    assert first["state"] == "dead" and "503" in first["cause"], first
    dlq_id, key = first["id"], first["fire_key"]
    assert system.hits.of(key) == 1

    # another tenant: nothing listed, 404 by id, nothing selected by its own filters
    assert letters("globex") == []
    assert system.call("globex", "GET", f"/v1/dead-letters/{dlq_id}").status_code == 404
    stolen = system.call("globex", "POST", "/v1/redrives",
                         json={"ids": [dlq_id], "request_id": "steal"})  # fmt: skip
    assert stolen.status_code == 404, stolen.text
    for selected in ({"trigger_id": "dead"}, {"selector": "env=prod"}, {"cause": "503"}):
        dry = system.ok("globex", "POST", "/v1/redrives",
                        json={**selected, "dry_run": True})  # fmt: skip
        assert dry["matched"] == 0, (selected, dry)

    one = system.ok("acme", "GET", f"/v1/dead-letters/{dlq_id}")
    assert one["order"]["max_attempts"] == 1 and one["fire_key"] == key
    dry = system.ok("acme", "POST", "/v1/redrives",
                    json={"ids": [dlq_id], "dry_run": True})  # fmt: skip
    assert dry == {"dry_run": True, "matched": 1, "ids": [dlq_id]}
    done = system.ok("acme", "POST", "/v1/redrives",
                     json={"ids": [dlq_id], "request_id": "redrive-1"})  # fmt: skip
    assert done["redriven"] == [{"id": dlq_id, "fire_key": key, "attempt": 2}]
    wait_until(lambda: system.hits.of(key) == 2, 60, 0.2, system.tail)

    def lineage() -> list[dict[str, Any]]:
        return [d for d in letters("acme") if d["redrive_of"] == dlq_id]

    (again,) = wait_until(lineage, 60, 0.5, system.tail)
    assert again["fire_key"] == key and again["attempts"] == 2
    original = system.ok("acme", "GET", f"/v1/dead-letters/{dlq_id}")
    assert original["state"] == "redriven" and original["redriven_by"].startswith("acme-alice (")
    assert dlq_id not in [d["id"] for d in letters("acme", state="dead")]

    listed = json.loads(system.cli("acme", "dead-letters", "list", "--trigger", "dead", "--json"))
    assert {dlq_id, again["id"]} <= {d["id"] for d in listed}
    assert json.loads(system.cli("globex", "dead-letters", "list", "--json")) == []
