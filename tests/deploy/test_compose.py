"""The compose install in real containers (podman with runc and deploy/containers.conf, host
networking on free 127.0.0.1 ports, ``--pull=never``): the Horae image built from the committed
tree (deploy/image/build --source head), the stand-ins of apache/kafka, postgres and haproxy
(deploy/compose/images/build), three KRaft brokers on SASL_SSL only (SCRAM users; the CA made
here, which every Horae process verifies them with), PostgreSQL, the one-shots, two planners,
two dispatchers, a projector and two API replicas behind one port.

Readiness is polled here (podman runs no healthcheck timer without systemd). A webhook trigger
firing every second is created through the API; a receiver here verifies each call's signature.
The planner that owns the trigger's partition is SIGKILLed; the other takes its partitions over,
and every instant of the window arrives with exactly one fire key: none doubled, none lost.
"""

from __future__ import annotations

import base64
import json
import queue
import random
import secrets
import socket
import subprocess
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ConsumerGroupDescription
from standardwebhooks import Webhook

from horae.contracts.topics import fire_partition
from tests.deploy.tools import DEPLOY, container_env, deploy_tools, run
from tests.paths import REPO_ROOT
from tests.waiting import wait_until

pytestmark = pytest.mark.timeout(1200)  # a first run builds the images (minutes)
TENANT = "acme"
TRIGGER = "every-second"
PARTITIONS = 6
SERVICES = ("planner-1", "planner-2", "dispatcher-1", "dispatcher-2", "projector", "api-1")


def _free_prefix() -> str:
    """Three digits P such that nothing listens on 127.0.0.1:P00..P99."""
    for p in random.sample(range(300, 600), 300):
        with socket.socket() as probe:
            probe.settimeout(0.05)
            if any(probe.connect_ex(("127.0.0.1", p * 100 + i)) == 0 for i in range(100)):
                continue
        try:
            held = []
            for i in range(100):
                s = socket.socket()
                held.append(s)
                s.bind(("127.0.0.1", p * 100 + i))
        except OSError:
            continue
        finally:
            for s in held:
                s.close()
        return str(p)
    raise AssertionError("no free block of 100 ports on 127.0.0.1")


class Receiver:
    """The tenant's endpoint: records (scheduled_at, fire_key) of every call whose Standard
    Webhooks signature verifies."""

    def __init__(self, secret: str) -> None:
        self.calls: queue.Queue[dict[str, Any]] = queue.Queue()
        self.refused = 0
        hook = Webhook(secret)
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                try:
                    envelope: Any = hook.verify(body, dict(self.headers))
                except Exception:
                    receiver.refused += 1
                    self.send_response(401)
                else:
                    receiver.calls.put(envelope["data"])
                    self.send_response(204)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@dataclass
class Install:
    project: str
    prefix: str
    env: dict[str, str]
    image: str
    compose: list[str]
    secrets_dir: Path
    timings: dict[str, float] = field(default_factory=dict)

    def port(self, suffix: str) -> int:
        return int(self.prefix + suffix)

    def up(self, *services: str, detach: bool = True) -> str:
        args = [*self.compose, "up", *(["-d"] if detach else []), "--no-deps", *services]
        return run(args, env=self.env, cwd=DEPLOY / "compose", timeout=300)

    def container(self, service: str) -> str:
        return f"{self.project}_{service}_1"

    def exit_code(self, service: str) -> int:
        out = run(
            ["podman", "inspect", "--format", "{{.State.ExitCode}}", self.container(service)],
            env=self.env,
        )
        return int(out.strip())

    def running(self, service: str) -> bool:
        out = subprocess.run(
            ["podman", "inspect", "--format", "{{.State.Running}}", self.container(service)],
            env=self.env,
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        return out.strip() == "true"

    def logs(self, *services: str) -> str:
        out = []
        for service in services or (*SERVICES, "kafka-1", "postgres", "topics", "migrate"):
            done = subprocess.run(
                ["podman", "logs", "--tail", "25", self.container(service)],
                env=self.env,
                capture_output=True,
                text=True,
                check=False,
            )
            text = "\n".join(
                line for line in (done.stdout + done.stderr).splitlines() if "systemd" not in line
            )
            out.append(f"\n--- {service}\n{text[-2500:]}")
        return "".join(out)

    def kafka_admin(self) -> AdminClient:
        """The admin on the CLIENT listeners (SASL_SSL, the CA of make-certs), as every Horae
        process of the install connects."""
        servers = ",".join(f"127.0.0.1:{self.port(f'1{n}')}" for n in (1, 2, 3))
        return AdminClient(
            {
                "bootstrap.servers": servers,
                "security.protocol": "SASL_SSL",
                "ssl.ca.location": str(self.secrets_dir / "ca.crt"),
                "sasl.mechanisms": "SCRAM-SHA-512",
                "sasl.username": "admin",
                "sasl.password": self.env["HORAE_KAFKA_ADMIN_PASSWORD"],
                "log_level": 0,
            }
        )


def _brokers(admin: AdminClient) -> int:
    try:
        return len(admin.list_topics(timeout=3).brokers)
    except Exception:
        return 0


def _database_answers(install: Install) -> bool:
    url = f"postgresql://horae:{install.env['HORAE_POSTGRES_PASSWORD']}@127.0.0.1:"
    try:
        with psycopg.connect(f"{url}{install.port('50')}/horae", connect_timeout=2) as conn:
            return conn.execute("SELECT 1").fetchone() == (1,)
    except psycopg.OperationalError:
        return False


def _ready(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.TransportError:
        return False


@pytest.fixture(scope="module")
def install(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Install]:
    started = time.monotonic()
    tools = deploy_tools(containers=True)
    env = container_env()
    timings: dict[str, float] = {"tools_s": time.monotonic() - started}
    mark = time.monotonic()
    built = run([DEPLOY / "image" / "build", "--source", "head"], env=env, cwd=REPO_ROOT)
    image = built.strip().splitlines()[-1]
    images = run([DEPLOY / "compose" / "images" / "build"], env=env, cwd=REPO_ROOT, timeout=900)
    timings["images_s"] = time.monotonic() - mark
    tmp = tmp_path_factory.mktemp("compose")
    secrets_dir = tmp / "secrets"
    run([DEPLOY / "compose" / "make-certs", secrets_dir])
    prefix = _free_prefix()
    project = f"horaet{secrets.token_hex(3)}"
    webhook_secret = "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()

    def pw() -> str:
        return secrets.token_hex(16)

    env.update(dict(line.split("=", 1) for line in images.splitlines() if "=" in line))
    env.update(
        HORAE_IMAGE=image,
        HORAE_PORT_PREFIX=prefix,
        HORAE_SECRETS_DIR=str(secrets_dir),
        HORAE_RESTART="no",  # a killed planner stays dead: the other must take over
        KAFKA_CLUSTER_ID="H" + base64.urlsafe_b64encode(secrets.token_bytes(16)).decode()[1:22],
        KAFKA_HEAP_OPTS="-Xms256m -Xmx384m",
        KAFKA_OFFSETS_PARTITIONS="3",
        KAFKA_TRANSACTION_PARTITIONS="3",
        KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS="0",
        HORAE_KAFKA_ADMIN_PASSWORD=pw(),
        HORAE_KAFKA_PLANNER_PASSWORD=pw(),
        HORAE_KAFKA_DISPATCHER_PASSWORD=pw(),
        HORAE_KAFKA_PROJECTOR_PASSWORD=pw(),
        HORAE_KAFKA_API_PASSWORD=pw(),
        HORAE_POSTGRES_PASSWORD=pw(),
        HORAE_DB_PROJECTOR_PASSWORD=pw(),
        HORAE_DB_READER_PASSWORD=pw(),
        HORAE_DB_API_PASSWORD=pw(),
        HORAE_TENANT_KEYS=json.dumps({TENANT: {f"{TENANT}-1": pw()}}),
        HORAE_PLATFORM_KEY=pw(),
        HORAE_API_TOKEN_KEYS=json.dumps({"k1": pw()}),
        HORAE_DISPATCHER_WEBHOOK_SECRETS=json.dumps({TENANT: {"hook": webhook_secret}}),
        HORAE_DISPATCHER_ALLOW=json.dumps(["127.0.0.1/32"]),  # the receiver is on loopback
        HORAE_API_REQUIRE_VERIFIED_TARGETS="false",
        HORAE_MIN_INTERVAL_S="1",
        HORAE_TOPIC_PARTITIONS=str(PARTITIONS),
        HORAE_WEBHOOK_SECRET=webhook_secret,
    )
    compose_file = str(DEPLOY / "compose" / "compose.yaml")
    compose = [tools["PODMAN_COMPOSE"], "-p", project, "-f", compose_file]
    it = Install(project, prefix, env, image, compose, secrets_dir, timings)
    try:
        mark = time.monotonic()
        it.up("kafka-1", "kafka-2", "kafka-3", "postgres")
        admin = it.kafka_admin()
        wait_until(lambda: _brokers(admin) == 3, timeout_s=240, interval_s=1, message=it.logs)
        wait_until(lambda: _database_answers(it), timeout_s=60, interval_s=0.5, message=it.logs)
        timings["services_s"] = time.monotonic() - mark
        mark = time.monotonic()
        it.up("topics", "migrate", detach=False)
        for one_shot in ("topics", "migrate"):
            assert it.exit_code(one_shot) == 0, it.logs(one_shot)
        timings["one_shots_s"] = time.monotonic() - mark
        mark = time.monotonic()
        it.up(*SERVICES, "api-2", "api")

        restarts: dict[str, int] = defaultdict(int)

        def all_ready() -> bool:
            # the supervisor's part (restart: unless-stopped in the file, "no" here so that the
            # killed planner stays dead): a process that exits while the cluster settles (its
            # start-up check of Kafka gives up after 10 s on a loaded machine) is started again
            for service in (*SERVICES, "api-2"):
                if not it.running(service):
                    restarts[service] += 1
                    assert restarts[service] <= 3, it.logs(service)
                    run(["podman", "start", it.container(service)], env=it.env)
            return all(_ready(f"http://127.0.0.1:{it.port(p)}/readyz") for p in ("61", "62", "60"))

        wait_until(all_ready, timeout_s=240, interval_s=1, message=it.logs)
        timings["processes_s"] = time.monotonic() - mark
        timings["restarts"] = float(sum(restarts.values()))
        yield it
    finally:
        subprocess.run(
            [*compose, "down", "-v", "-t", "5"],
            env=env,
            cwd=DEPLOY / "compose",
            capture_output=True,
            timeout=300,
            check=False,
        )
        leftover = subprocess.run(
            ["podman", "ps", "-aq", "--filter", f"label=io.podman.compose.project={project}"],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        ).stdout.split()
        if leftover:
            subprocess.run(["podman", "rm", "-f", *leftover], env=env, capture_output=True)
        rounded = {k: round(v, 1) for k, v in timings.items()}
        print(f"compose install timings: {json.dumps(rounded)}")


def _planner_owning(install: Install, partition: int) -> str:
    """The slot (= service name) of the planner whose assignment holds ``partition`` (the
    planner's topics are co-partitioned: any of them names the owner)."""
    admin = install.kafka_admin()
    group = "horae.planner"
    seen: list[object] = []
    for _ in range(60):
        futures = admin.describe_consumer_groups([group], request_timeout=10)
        description: ConsumerGroupDescription = futures[group].result()
        for member in description.members:
            parts = member.assignment.topic_partitions if member.assignment else []
            seen.append((member.group_instance_id, [(tp.topic, tp.partition) for tp in parts]))
            if any(tp.partition == partition for tp in parts):
                # the instance id is <prefix>planner-<slot>
                return str(member.group_instance_id).removeprefix("horae.planner-")
        time.sleep(1)
    raise AssertionError(f"no planner holds partition {partition}: {seen[-2:]}")


def test_tls_listeners_answer(install: Install) -> None:
    """Every listener of every broker is SASL_SSL (the CLIENT ones with the compose CA; no
    plaintext one is left), the Horae processes are members on them, and the topics have three
    replicas."""
    admin = install.kafka_admin()
    assert wait_until(lambda: _brokers(admin) == 3, timeout_s=30, interval_s=1)
    meta = admin.list_topics(timeout=10).topics["horae.fires"]
    assert {len(p.replicas) for p in meta.partitions.values()} == {3}
    for node in ("1", "2", "3"):
        resource = ConfigResource(ConfigResource.Type.BROKER, node)
        configs = admin.describe_configs([resource])[resource].result(timeout=30)
        listeners = configs["listener.security.protocol.map"].value
        protocols = {pair.split(":")[1] for pair in listeners.split(",")}
        assert protocols == {"SASL_SSL"}, f"broker {node}: {listeners}"
    # the planners, dispatchers and projector of the install are members through them
    expected = {"horae.planner": 2, "horae.dispatcher": 2, "horae.projector.horae": 1}
    members: dict[str, int] = {}

    def joined() -> bool:
        described = admin.describe_consumer_groups(list(expected), request_timeout=30)
        members.update({g: len(f.result().members) for g, f in described.items()})
        return members == expected

    wait_until(joined, timeout_s=120, interval_s=2, message=lambda: f"{members}{install.logs()}")


def test_signed_webhook_and_planner_takeover(install: Install) -> None:
    secret = install.env["HORAE_WEBHOOK_SECRET"]
    receiver = Receiver(secret)
    api = f"http://127.0.0.1:{install.port('60')}"
    try:
        token = run(
            [
                "podman",
                "run",
                "--rm",
                "--pull=never",
                "--network=host",
                "--read-only",
                "--no-healthcheck",
                "-e",
                "HORAE_API_TOKEN_KEYS",
                install.image,
                "tokens",
                "issue",
                "--tenant",
                TENANT,
                "--role",
                "author",
            ],
            env=install.env,
        ).strip()
        headers = {"Authorization": f"Bearer {token}"}
        body = {
            "trigger_id": TRIGGER,
            "recurrence": {"kind": "cron", "expr": "* * * * * *"},
            "target": {"kind": "webhook", "url": receiver.url, "secret_refs": ["hook"]},
        }
        made = httpx.post(f"{api}/v1/schedules", json=body, headers=headers, timeout=30)
        assert made.status_code == 201, made.text
        calls: list[dict[str, Any]] = []

        def received(n: int) -> bool:
            while True:
                try:
                    calls.append(receiver.calls.get_nowait())
                except queue.Empty:
                    return len(calls) >= n

        wait_until(lambda: received(3), timeout_s=90, message=install.logs)
        victim = _planner_owning(install, fire_partition(TENANT, TRIGGER, PARTITIONS))
        survivor = {"planner-1": "planner-2", "planner-2": "planner-1"}[victim]
        killed_at = time.time()
        run(["podman", "kill", "--signal", "KILL", install.container(victim)], env=install.env)

        def after_takeover() -> bool:
            received(0)
            latest = max(datetime.fromisoformat(c["scheduled_at"]).timestamp() for c in calls)
            return latest >= killed_at + 20

        wait_until(after_takeover, timeout_s=120, interval_s=0.5, message=install.logs)
        assert install.running(survivor), install.logs(survivor)
        assert _planner_owning(install, fire_partition(TENANT, TRIGGER, PARTITIONS)) == survivor
        gone = httpx.delete(f"{api}/v1/schedules/{TRIGGER}", headers=headers, timeout=30)
        assert gone.status_code in (200, 202, 204), gone.text
        # the instants decided late after the takeover travel the catch-up lane and may arrive
        # after later on-time ones: collect until the calls stop (15 s without one)
        quiet_since = time.monotonic()
        deadline = quiet_since + 180
        while time.monotonic() - quiet_since < 15 and time.monotonic() < deadline:
            before = len(calls)
            received(0)
            if len(calls) > before:
                quiet_since = time.monotonic()
            time.sleep(0.5)
    finally:
        receiver.close()
    keys: dict[int, set[str]] = defaultdict(set)
    for call in calls:
        assert call["tenant"] == TENANT and call["trigger_id"] == TRIGGER
        keys[int(datetime.fromisoformat(call["scheduled_at"]).timestamp())].add(call["fire_key"])
    doubled = {at: k for at, k in keys.items() if len(k) > 1}
    assert not doubled, f"instants decided twice: {doubled}"
    first, last = min(keys), max(keys)
    lost = sorted(set(range(first, last + 1)) - set(keys))
    assert not lost, f"instants lost around the kill at {killed_at:.0f}: {lost}"
    assert last - first >= 20 and receiver.refused == 0
    print(
        f"{len(keys)} instants, {len(calls)} calls, {victim} killed, {survivor} took over; "
        f"timings {install.timings}"
    )
