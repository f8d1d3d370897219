"""Horae on TLS end to end: a private stack of its own started as ``horae dev up --tls`` makes it
(a throwaway CA, Kafka on SASL_SSL only, PostgreSQL with ssl=on; free ports, a temporary state
directory, torn down afterwards), then a planner, a projector, a dispatcher and the API — the API
itself served over HTTPS with the stack's certificate — run on it, configured only through the
settings the stack prints (``HORAE_KAFKA_SECURITY_PROTOCOL=SASL_SSL``,
``HORAE_KAFKA_SSL_CA_FILE``, ``HORAE_DATABASE_SSLMODE=verify-full``,
``HORAE_DATABASE_SSL_CA_FILE``, ``HORAE_API_TLS_CERT_FILE`` / ``_KEY_FILE``). A trigger created
through the API fires and its history is projected and read back over HTTPS."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import ssl
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from horae.devstack.stack import LocalStack
from horae.settings import DevSettings, Settings
from tests.net import free_ports, kill_all
from tests.waiting import wait_until

TENANT = "acme"


@pytest.fixture(scope="module")
def tls_stack() -> Iterator[LocalStack]:
    kafka, controller, postgres = free_ports(3)
    settings = Settings(
        kafka_bootstrap=None,
        database_url=None,
        dev=DevSettings(
            kafka_port=kafka, kafka_controller_port=controller, postgres_port=postgres, tls=True
        ),
    )
    state_dir = Path(tempfile.mkdtemp(prefix=f"horae-tls-{os.getpid()}-"))
    local = LocalStack.from_settings(settings, state_dir=state_dir)
    try:
        local.up()
        yield local
    finally:
        try:
            local.down()
        finally:
            shutil.rmtree(state_dir, ignore_errors=True)


def _env(stack: LocalStack, **more: str) -> dict[str, str]:
    admin = stack.kafka.admin if stack.kafka is not None else None
    assert admin is not None and stack.tls is not None
    env = {k: v for k, v in os.environ.items() if not k.startswith("HORAE_")}
    env.update(stack.client_env())
    env.update(
        HORAE_KAFKA_USERNAME=admin.username,
        HORAE_KAFKA_PASSWORD=admin.password,
        **more,
    )
    return env


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


@dataclass
class Served:
    url: str
    tls: ssl.SSLContext
    logs: Path
    headers: dict[str, str]

    def call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        return httpx.request(
            method, self.url + path, headers=self.headers, verify=self.tls, timeout=30, **kwargs
        )

    def tail(self) -> str:
        return "".join(
            f"\n--- {p.name}\n{p.read_text(errors='replace')[-3000:]}"
            for p in sorted(self.logs.glob("*.log"))
        )


@pytest.mark.timeout(300)
def test_every_process_on_tls(tls_stack: LocalStack, tmp_path: Path) -> None:
    assert tls_stack.tls is not None
    ca = tls_stack.tls.ca
    env = tls_stack.client_env()
    assert env["HORAE_KAFKA_SECURITY_PROTOCOL"] == "SASL_SSL"
    assert "sslmode=verify-full" in env["HORAE_DATABASE_URL"]
    with psycopg.connect(env["HORAE_DATABASE_URL"], connect_timeout=10) as conn:
        row = conn.execute("select ssl from pg_stat_ssl where pid = pg_backend_pid()").fetchone()
        assert row == (True,)  # the connection is encrypted, the server's certificate verified

    [port] = free_ports(1)
    env = _env(
        tls_stack,
        HORAE_TOPIC_PREFIX="tls.",
        HORAE_TOPIC_PARTITIONS="2",
        HORAE_TENANT_KEYS=json.dumps({TENANT: {f"{TENANT}-1": secrets.token_hex(16)}}),
        HORAE_PLATFORM_KEY=secrets.token_hex(16),
        HORAE_API_TOKEN_KEYS=json.dumps({"k1": secrets.token_hex(32)}),
        HORAE_API_PORT=str(port),
        HORAE_API_TLS_CERT_FILE=str(tls_stack.tls.cert),
        HORAE_API_TLS_KEY_FILE=str(tls_stack.tls.key),
        HORAE_MIN_INTERVAL_S="1",
        HORAE_PLANNER_SLOT="tls-planner",
        HORAE_DISPATCHER_SLOT="tls-dispatcher",
        HORAE_PROJECTOR_BATCH_MS="100",
        HORAE_LOG_LEVEL="WARNING",
    )
    horae(env, "topics", "apply")
    horae(env, "migrate")
    logs = tmp_path / "logs"
    logs.mkdir()
    processes: list[subprocess.Popen[bytes]] = []
    served = Served(f"https://127.0.0.1:{port}", ssl.create_default_context(cafile=ca), logs, {})
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

        def ready() -> bool:
            assert all(p.poll() is None for p in processes), served.tail()
            try:
                return served.call("GET", "/readyz").status_code == 200
            except httpx.TransportError:
                return False

        wait_until(ready, timeout_s=90, message=served.tail)
        with pytest.raises(httpx.TransportError):  # HTTPS only: plain HTTP gets no answer
            httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5)
        token = horae(env, "tokens", "issue", "--tenant", TENANT, "--role", "author").strip()
        served.headers = {"Authorization": f"Bearer {token}"}
        body = {
            "trigger_id": "beat",
            "recurrence": {"kind": "cron", "expr": "* * * * * *"},
            "target": {"kind": "event", "topic": f"events.{TENANT}"},
        }
        created = served.call("POST", "/v1/schedules", json=body)
        assert created.status_code == 201, created.text + served.tail()

        def fired() -> list[dict[str, Any]]:
            items = served.call("GET", "/v1/schedules/beat/history?limit=100").json()["items"]
            return [i for i in items if i["decision"] == "fired"]

        fires = wait_until(fired, timeout_s=90, message=served.tail)
        story = served.call("GET", f"/v1/fires/{fires[0]['fire_key']}")
        assert story.status_code == 200, story.text

        def delivered() -> bool:  # the dispatcher wrote it to the tenant's topic over TLS
            items = served.call("GET", "/v1/schedules/beat/events?limit=100").json()["items"]
            return any(e["type"] == "schedule.triggered" for e in items)

        wait_until(delivered, timeout_s=90, message=served.tail)
        assert all(p.poll() is None for p in processes), served.tail()
    finally:
        kill_all(processes)
