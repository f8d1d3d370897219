"""``horae api`` end to end, through HTTP only: a real API process with a planner, a projector and
a dispatcher on the running stack (topics under this test's prefix, read models in a schema of its
own), and a local receiver. A webhook trigger is refused until its host is verified (the
receiver serves the challenge's answer), then delivers signed calls whose attempts and lateness
the history shows. An event trigger: create → an immediate GET sees the version → the history
shows fires → a manual run's predicted fire key appears → amend, pause, resume → backfill (cost,
confirm) fires the window → the audit shows the acts."""

from __future__ import annotations

import base64
import hmac
import json
import os
import secrets
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from horae.api.verification import expected_answer
from horae.devstack.stack import Endpoints
from horae.outbound.signing import body_signature, decode_secret
from tests.net import free_ports, kill_all
from tests.waiting import wait_until

TENANT = "acme"


class Receiver:
    """A tenant's endpoint: serves verification answers and counts calls whose signature
    verifies with the tenant's webhook secret."""

    def __init__(self, secret: str) -> None:
        key = decode_secret(secret)
        self.answers: dict[str, bytes] = {}
        self.verified: list[str] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                answer = receiver.answers.get(self.path)
                self.send_response(200 if answer else 404)
                self.end_headers()
                self.wfile.write(answer or b"")

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                ok = hmac.compare_digest(
                    body_signature(body, key), self.headers.get("X-Signature", "")
                )
                if ok:
                    receiver.verified.append(self.headers.get("Idempotency-Key", ""))
                self.send_response(200 if ok else 401)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.origin = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@dataclass
class Served:
    url: str
    headers: dict[str, str]
    logs: Path
    receiver: Receiver
    secret: str

    def call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        headers = {**self.headers, **kwargs.pop("headers", {})}
        return httpx.request(method, self.url + path, headers=headers, timeout=30, **kwargs)

    def tail(self) -> str:
        return "".join(
            f"\n--- {p.name}\n{p.read_text(errors='replace')[-3000:]}"
            for p in sorted(self.logs.glob("*.log"))
        )


def horae(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "horae.cli.main", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"horae {' '.join(args)}: {done.stdout}{done.stderr}"
    return done.stdout


@pytest.fixture
def served(stack: Endpoints, topic_prefix: str, unique: str, tmp_path: Path) -> Iterator[Served]:
    schema = f"api{unique}"
    [port] = free_ports(1)
    secret = "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()
    receiver = Receiver(secret)
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
        HORAE_MIN_INTERVAL_S="1",
        HORAE_TENANT_GRANTS=json.dumps({TENANT: {"horizon_max_s": 172_800}}),
        HORAE_PLANNER_SLOT=f"api-{unique}",
        HORAE_DISPATCHER_SLOT=f"api-{unique}",
        HORAE_DISPATCHER_WEBHOOK_SECRETS=json.dumps({TENANT: {"hook": secret}}),
        HORAE_DISPATCHER_ALLOW=json.dumps(["127.0.0.1/32"]),
        HORAE_PROJECTOR_BATCH_MS="100",
        HORAE_LOG_LEVEL="WARNING",
    )
    for name in ("HORAE_API_TOKEN_KID", "HORAE_API_HOST"):
        env.pop(name, None)
    logs = tmp_path / "logs"
    logs.mkdir()
    horae(env, "topics", "apply")
    horae(env, "migrate")
    processes: list[subprocess.Popen[bytes]] = []
    url = f"http://127.0.0.1:{port}"
    try:
        for name in ("planner", "projector", "dispatcher", "api"):
            with (logs / f"{name}.log").open("wb") as log:
                processes.append(
                    subprocess.Popen(
                        [sys.executable, "-m", "horae.cli.main", name],
                        env=env,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                    )
                )
        served = Served(url, {}, logs, receiver, secret)

        def ready() -> bool:
            assert all(p.poll() is None for p in processes), served.tail()
            try:
                return httpx.get(f"{url}/readyz", timeout=2).status_code == 200
            except httpx.TransportError:
                return False

        wait_until(ready, timeout_s=90, message=served.tail)
        token = horae(
            env,
            "tokens",
            "issue",
            "--tenant",
            TENANT,
            "--role",
            "author",
            "--role",
            "policy",
            "--subject",
            "alice",
        ).strip()
        served.headers = {"Authorization": f"Bearer {token}"}
        yield served
    finally:
        kill_all(processes)
        receiver.close()
        with psycopg.connect(stack.database_url, autocommit=True) as conn:
            for name in (schema, f"{schema}_api"):
                conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


@pytest.mark.timeout(300)
def test_webhook_after_verification_then_event_trigger_acts(served: Served) -> None:
    hook_url = f"{served.receiver.origin}/hook"
    webhook = {
        "trigger_id": "hook",
        "recurrence": {"kind": "cron", "expr": "*/2 * * * * *"},
        "target": {"kind": "webhook", "url": hook_url, "secret_refs": ["hook"]},
    }
    refused = served.call("POST", "/v1/schedules", json=webhook)
    assert refused.status_code == 422 and "/v1/targets/verifications" in refused.json()["detail"]
    made = served.call("POST", "/v1/targets/verifications", json={"url": hook_url}).json()
    path = made["well_known_url"].removeprefix(served.receiver.origin)
    answer = expected_answer(served.secret, TENANT, made["host"], made["challenge"])
    served.receiver.answers[path] = answer.encode()
    check = served.call("POST", f"/v1/targets/verifications/{made['host']}/check").json()
    assert check["state"] == "verified", check
    created = served.call("POST", "/v1/schedules", json=webhook)
    assert created.status_code == 201, created.text

    def delivered() -> list[dict[str, Any]]:
        items = served.call("GET", "/v1/schedules/hook/history").json()["items"]
        return [i for i in items if i["attempts"] >= 1 and i["lateness_ms"] is not None]

    fires = wait_until(delivered, timeout_s=90, message=served.tail)
    assert fires[0]["fire_key"] in served.receiver.verified
    story = served.call("GET", f"/v1/fires/{fires[0]['fire_key']}").json()
    assert story["attempts"][0]["http_status"] == 200
    late = served.call("GET", "/v1/schedules/hook/lateness").json()
    assert late["fires"] >= 1 and late["max_ms"] is not None
    body = {
        "trigger_id": "beat",
        "recurrence": {"kind": "cron", "expr": "*/2 * * * * *"},
        "target": {"kind": "event", "topic": f"events.{TENANT}"},
        "labels": {"team": "ops"},
    }
    created = served.call("POST", "/v1/schedules", json=body)
    assert created.status_code == 201, created.text + served.tail()
    assert created.headers["etag"] == '"1"'
    seen = served.call("GET", "/v1/schedules/beat")  # read-your-writes: no wait
    assert seen.status_code == 200 and seen.json()["version"] == 1

    def fired() -> list[dict[str, Any]]:
        items = served.call("GET", "/v1/schedules/beat/history?limit=1000").json()["items"]
        return [i for i in items if i["decision"] == "fired" and i["origin"] == "scheduled"]

    fires = wait_until(fired, timeout_s=90, message=served.tail)
    story = served.call("GET", f"/v1/fires/{fires[0]['fire_key']}")
    assert story.status_code == 200 and story.json()["fire"]["tzdata_version"]

    run = served.call("POST", "/v1/schedules/beat/run")
    assert run.status_code == 202, run.text
    manual = run.json()["fire_key"]
    wait_until(
        lambda: served.call("GET", f"/v1/fires/{manual}").status_code == 200,
        timeout_s=60,
        message=served.tail,
    )

    amended = served.call(
        "PUT",
        "/v1/schedules/beat",
        headers={"If-Match": '"1"'},
        json={**body, "recurrence": {"kind": "cron", "expr": "*/3 * * * * *"}},
    )
    assert amended.status_code == 200 and amended.json()["version"] == 2
    stale = served.call("PUT", "/v1/schedules/beat", headers={"If-Match": '"1"'}, json=body)
    assert stale.status_code == 412
    assert served.call("GET", "/v1/schedules/beat").json()["version"] == 2
    for act in ("pause", "resume"):
        assert served.call("POST", f"/v1/schedules/beat/{act}").status_code == 202

    now = datetime.now(UTC).replace(microsecond=0)
    window = {"from": (now - timedelta(seconds=20)).isoformat(), "to": now.isoformat()}
    cost = served.call("POST", "/v1/schedules/beat/backfill", json=window)
    assert cost.status_code == 200 and cost.json()["fires"] > 0, cost.text
    done = served.call(
        "POST", "/v1/schedules/beat/backfill", json={**window, "confirm": cost.json()["confirm"]}
    )
    assert done.status_code == 202, done.text

    def backfilled() -> bool:
        q = f"from={window['from'].replace('+00:00', 'Z')}&to={window['to'].replace('+00:00', 'Z')}"
        items = served.call("GET", f"/v1/schedules/beat/history?{q}&limit=1000").json()["items"]
        return any(i["origin"] == "backfill" for i in items)

    wait_until(backfilled, timeout_s=90, message=served.tail)

    def audited() -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = served.call("GET", "/v1/audit").json()["items"]
        wanted = {"manual_run.request", "backfill.request", "horizon.above_default"}
        return items if wanted <= {a["action"] for a in items} else []

    horizon = served.call("POST", "/v1/schedules/beat/horizon", json={"horizon_s": 100_000})
    assert horizon.status_code == 202, horizon.text
    entries = wait_until(audited, timeout_s=60, message=served.tail)
    assert all(a["tenant"] == TENANT and a["allowed"] for a in entries)
    actor = "alice (api; roles author,policy)"  # the token's subject and roles
    by_action = {a["action"]: a for a in entries}
    assert by_action["manual_run.request"]["detail"]["requested_by"] == actor
    assert by_action["backfill.request"]["detail"]["requested_by"] == actor
    assert by_action["horizon.above_default"]["detail"]["author"] == actor
    late = served.call("GET", "/v1/schedules/beat/lateness").json()
    assert set(late) >= {"fires", "p50_ms", "p99_ms", "max_ms", "missed"}

    def event_types() -> set[str]:
        items = served.call("GET", "/v1/schedules/beat/events?limit=1000").json()["items"]
        types = {e["type"] for e in items}
        wanted = {"schedule.triggered", "schedule.paused", "schedule.resumed"}
        return types if wanted <= types else set()

    # the tenant's events topic had them: the projector read them from there
    wait_until(event_types, timeout_s=60, message=served.tail)
    # the amended versions fire: their instants carry version 2 or 3 (the horizon) in the history
    wait_until(
        lambda: max(i["trigger_version"] for i in fired()) >= 2, timeout_s=60, message=served.tail
    )
    other = served.call("GET", "/v1/schedules/nope")
    assert other.status_code == 404 and other.headers["content-type"] == "application/problem+json"
