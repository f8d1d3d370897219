"""Shared fixtures. The integration tier gets a real Kafka broker and PostgreSQL, started once per
test session on free ports in a state directory of its own (so a running ``horae dev up`` stack and
another test run on the same machine are left alone) and stopped and removed afterwards;
``HORAE_KAFKA_BOOTSTRAP`` / ``HORAE_DATABASE_URL`` use existing services instead."""

from __future__ import annotations

import gc
import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from horae.contracts.codec import set_wire_mode
from horae.contracts.memo import set_ingest_memo
from horae.devstack.stack import Endpoints, LocalStack
from horae.kafka.acls import provision_roles
from horae.kafka.admin import delete_under
from horae.kafka.config import settings_credentials
from horae.settings import DevSettings, Settings
from horae.streams.planner.index import set_planner_index
from tests.integration.planner.harness import PlannerEnv
from tests.net import free_ports

# ``./scripts/test`` (and so CI) runs the property tests derandomized: the same examples every run,
# so a submission's verdict does not depend on luck; plain ``pytest`` keeps exploring.
settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
set_wire_mode(Settings().codec)  # HORAE_CODEC=fastavro runs the suite on fastavro bodies
set_ingest_memo(Settings().ingest_memo)  # HORAE_INGEST_MEMO=false: the ingest memos off
set_planner_index(Settings().planner.index)  # HORAE_PLANNER_INDEX=objects: the objects index

# The session stack's ports: free ones chosen at start unless set in the environment.
PORT_VARIABLES = (
    "HORAE_DEV_KAFKA_PORT",
    "HORAE_DEV_KAFKA_CONTROLLER_PORT",
    "HORAE_DEV_POSTGRES_PORT",
)
# The private stack's broker authenticates: the session's clients log in as its admin; on TLS
# they also get the protocol and the stack's CA.
CREDENTIAL_VARIABLES = (
    "HORAE_KAFKA_USERNAME",
    "HORAE_KAFKA_PASSWORD",
    "HORAE_KAFKA_SECURITY_PROTOCOL",
    "HORAE_KAFKA_SSL_CA_FILE",
    "HORAE_DATABASE_SSLMODE",
    "HORAE_DATABASE_SSL_CA_FILE",
)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Every test reaps the processes it started: one still running here fails the session (it is
    killed and reaped, so the run ends; its command line says which test left it)."""
    left = [
        obj for obj in gc.get_objects() if isinstance(obj, subprocess.Popen) and obj.poll() is None
    ]
    for proc in left:
        print(f"\nconftest: a test left process {proc.pid} running: {proc.args!r}")
        proc.kill()
        proc.wait(30)
    if left and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        path = str(item.path)
        if "/tests/integration/" in path or "/tests/chaos/" in path:
            item.add_marker(pytest.mark.integration)
        if "/tests/acceptance/" in path:
            item.add_marker(pytest.mark.acceptance)
        if "/tests/chaos/" in path:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def stack(local_stack: LocalStack) -> Endpoints:
    """Endpoints of a real Kafka and PostgreSQL for this test session."""
    return local_stack.endpoints


@pytest.fixture(scope="session")
def local_stack() -> Iterator[LocalStack]:
    """The session's stack (its parts ``None`` where existing services are used):
    ``HORAE_TEST_BROKERS=3``
    makes the private Kafka a 3-broker cluster (RF 3, min.insync.replicas 2), and
    ``HORAE_TEST_TLS=1`` runs the private stack on TLS (``horae dev up --tls``)."""
    kafka, controller, postgres = (
        int(os.environ.get(name, port))
        for name, port in zip(PORT_VARIABLES, free_ports(len(PORT_VARIABLES)), strict=True)
    )
    brokers = int(os.environ.get("HORAE_TEST_BROKERS", "1"))
    settings = Settings(
        dev=DevSettings(
            kafka_port=kafka,
            kafka_controller_port=controller,
            postgres_port=postgres,
            brokers=brokers,
            kafka_node_ports=free_ports(2 * (brokers - 1)) if brokers > 1 else [],
            tls=os.environ.get("HORAE_TEST_TLS", "") not in ("", "0", "false"),
        )
    )
    state_dir = Path(tempfile.mkdtemp(prefix=f"horae-test-{os.getpid()}-"))
    local = LocalStack.from_settings(settings, state_dir=state_dir)
    saved = {name: os.environ.get(name) for name in CREDENTIAL_VARIABLES}
    try:
        local.up()
        admin = local.kafka.admin if local.kafka is not None else None
        if admin is not None:  # every client of the session (spawned processes too)
            os.environ["HORAE_KAFKA_USERNAME"] = admin.username
            os.environ["HORAE_KAFKA_PASSWORD"] = admin.password
        if local.tls is not None and local.kafka is not None:
            os.environ.update(
                {k: v for k, v in local.client_env().items() if k in CREDENTIAL_VARIABLES}
            )
        yield local
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        try:
            local.down()
        finally:
            shutil.rmtree(state_dir, ignore_errors=True)


@pytest.fixture
def kafka_bootstrap(stack: Endpoints) -> str:
    return stack.kafka_bootstrap


@pytest.fixture
def database_url(stack: Endpoints) -> str:
    return stack.database_url


@pytest.fixture
def unique() -> str:
    """A short unique token to isolate a test's topics, groups and schemas."""
    return uuid.uuid4().hex[:10]


@pytest.fixture
def topic_prefix(kafka_bootstrap: str, unique: str) -> Iterator[str]:
    """``t<unique>.``, the prefix of this test's topics: every topic under it is deleted when the
    test ends, passed or failed."""
    prefix = f"t{unique}."
    yield prefix
    delete_under(kafka_bootstrap, prefix)


@pytest.fixture
def role_env(kafka_bootstrap: str, topic_prefix: str) -> dict[str, dict[str, str]]:
    """Each process role's Kafka login (``HORAE_KAFKA_USERNAME`` / ``HORAE_KAFKA_PASSWORD``), its
    user and ACLs under this test's prefix made by the session's admin, as ``horae demo`` and a
    deployment make them: a process spawned with ``role_env[role]`` has exactly its role's
    grants, so an ACL gap fails the test. Skipped on a broker that does not authenticate."""
    admin = settings_credentials()
    if admin is None:
        pytest.skip("the broker does not authenticate: no role users to run as")
    roles = provision_roles(kafka_bootstrap, admin, topic_prefix)
    return {
        role: {"HORAE_KAFKA_USERNAME": c.username, "HORAE_KAFKA_PASSWORD": c.password}
        for role, c in roles.items()
    }


@pytest.fixture
def planner_env(kafka_bootstrap: str, topic_prefix: str) -> Iterator[PlannerEnv]:
    """Topics under this test's prefix, a producer, and the planners the test starts (stopped
    or killed at the end)."""
    env = PlannerEnv(kafka_bootstrap, topic_prefix)
    env.setup()
    try:
        yield env
    finally:
        env.close()
