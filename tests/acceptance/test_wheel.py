"""Acceptance: the wheel, installed into a fresh virtualenv outside the checkout at the versions of
``requirements.lock``, works on its own: ``horae next``, a codec round trip with the packaged
schemas, and the client example against the test stack's Kafka."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from horae.devstack.stack import Endpoints
from tests.conftest import CREDENTIAL_VARIABLES
from tests.paths import REPO_ROOT

pytestmark = pytest.mark.timeout(600)  # building and installing take a while on a busy machine

# Run by the installed interpreter: encode and decode a definition, decode the golden v1 bytes.
ROUND_TRIP = """
import json
from importlib.resources import files

import horae
from horae.client import cron_trigger
from horae.contracts.codec import SCHEMAS, decode, encode
from horae.contracts.events import TriggerDefinition

d = cron_trigger("acme", "standup", "0 9 * * MON-FRI", "https://hooks.acme.example/standup",
                 zone="Europe/Berlin")
data = encode(d)
assert decode(data) == d, "round trip"
golden = files("horae.contracts") / "schemas" / "golden" / "v1" / "TriggerDefinition.hex"
old = decode(bytes.fromhex(golden.read_text().strip()))
assert isinstance(old, TriggerDefinition)
print(json.dumps({"package": horae.__file__, "schemas": str(SCHEMAS), "magic": data[0]}))
"""

# The client example of docs/contracts.md, with a schedule event produced in place of a planner.
CLIENT_EXAMPLE = """
import json
import sys
import uuid
from datetime import UTC, datetime

from confluent_kafka import Consumer, Producer

from horae.client import HoraeClient, cron_trigger
from horae.contracts import events as ev
from horae.contracts.codec import decode, encode
from horae.contracts.topics import PRODUCER_DEFAULTS, Topic, events_topic, topic_name
from horae.kafka.config import client_config

bootstrap, prefix = sys.argv[1:3]
with HoraeClient(bootstrap, tenant="acme", key_id="acme-1", key=b"acme-secret",
                 prefix=prefix) as client:
    signed = client.put(cron_trigger("acme", "standup", "0 9 * * 1-5",
                                     "https://hooks.acme.example/standup", zone="Europe/Berlin"))

consumer = Consumer(client_config(bootstrap, {"group.id": prefix + "check",
                                              "auto.offset.reset": "earliest"}))
consumer.subscribe([topic_name(Topic.DEFINITIONS, prefix)])
msg = None
for _ in range(120):
    got = consumer.poll(0.5)
    if got is not None and got.error() is None:
        msg = got
        break
consumer.close()

now = datetime.now(UTC).replace(microsecond=0)
producer = Producer(client_config(bootstrap, PRODUCER_DEFAULTS))
for tenant in ("other", "acme"):
    event = ev.ScheduleEvent(
        event_id=uuid.uuid4().hex, type=ev.ScheduleEventType.TRIGGERED, tenant=tenant,
        trigger_id="standup", emitted_at=now, trigger_version=1,
        fire_key=f"{tenant}/standup/{now:%Y-%m-%dT%H:%M:%SZ}/0/scheduled", scheduled_at=now,
        origin=ev.Origin.SCHEDULED, payload=b"",
    )
    producer.produce(events_topic(tenant, prefix),
                     key=f"{tenant}/standup".encode(), value=encode(event))
assert producer.flush(30) == 0
with HoraeClient(bootstrap, tenant="acme", key_id="acme-1", key=b"acme-secret",
                 prefix=prefix) as client:
    events = list(client.schedule_events(timeout_s=30, max_events=1))
print(json.dumps({
    "definition_key": msg.key().decode() if msg is not None else None,
    "definition_equal": msg is not None and decode(msg.value()) == signed,
    "signed": signed.signature is not None,
    "events": [[e.tenant, e.trigger_id] for e in events],
}))
"""


def run(
    args: list[str | Path], cwd: Path, env: dict[str, str], timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert proc.returncode == 0, f"{args}: {proc.stdout}\n{proc.stderr}"
    return proc


def clean_env() -> dict[str, str]:
    """The environment without Horae settings, Python path overrides or the checkout's venv."""
    drop = ("HORAE_", "PYTHON", "VIRTUAL_ENV")
    return {k: v for k, v in os.environ.items() if not k.startswith(drop)}


def source_copy(target: Path) -> Path:
    """The checkout's files (tracked, and new ones not ignored) copied to ``target``: a build in
    the checkout itself could package stale files left in its ``build/`` folder."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO_ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = REPO_ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv outside the checkout with the wheel installed; returns its root."""
    work = tmp_path_factory.mktemp("wheel")
    assert not work.is_relative_to(REPO_ROOT)
    env = clean_env()
    source = source_copy(work / "src")
    dist = work / "dist"
    run([sys.executable, "-m", "build", "--wheel", "--outdir", dist, source], work, env)
    (wheel,) = dist.glob("horae-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    packaged = REPO_ROOT / "horae"
    data = [
        *packaged.glob("contracts/schemas/**/*.avsc"),
        *packaged.glob("contracts/schemas/**/*.hex"),
        packaged / "contracts/schemas/catalogue.json",
        *packaged.glob("projections/sql/**/*.sql"),
        *packaged.glob("devstack/kafka_files/*"),
    ]
    assert len(data) > 40
    missing = {p.relative_to(REPO_ROOT).as_posix() for p in data} - names
    assert not missing, f"not in the wheel: {sorted(missing)}"
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)

    root = work / "venv"
    venv.create(root, with_pip=False)
    python = root / "bin" / "python"
    run(
        [sys.executable, "-m", "pip", "--python", python, "install", "-q", wheel,
         "-c", REPO_ROOT / "requirements.lock"],
        work, env,
    )  # fmt: skip
    return root


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A working directory outside the checkout."""
    assert not tmp_path.is_relative_to(REPO_ROOT)
    return tmp_path


def test_horae_next(installed: Path, outside: Path) -> None:
    proc = run(
        [installed / "bin" / "horae", "next", "0 9 * * MON-FRI", "--zone", "Europe/Berlin",
         "--count", "3", "--after", "2026-03-27T00:00:00Z"],
        outside, clean_env(),
    )  # fmt: skip
    # Friday 09:00 CET, then Monday and Tuesday 09:00 CEST (DST starts on Sunday 29 March).
    assert proc.stdout.split() == [
        "2026-03-27T08:00:00Z",
        "2026-03-30T07:00:00Z",
        "2026-03-31T07:00:00Z",
    ]


def test_codec_round_trip_from_the_installed_package(installed: Path, outside: Path) -> None:
    proc = run([installed / "bin" / "python", "-c", ROUND_TRIP], outside, clean_env())
    found = json.loads(proc.stdout)
    assert Path(found["package"]).is_relative_to(installed), found
    assert Path(found["schemas"]).is_relative_to(installed), found
    assert found["magic"] == 0


def test_client_example_against_the_stack(
    installed: Path, outside: Path, stack: Endpoints, topic_prefix: str
) -> None:
    # the stack's credentials, if its broker authenticates (the example's clients read them)
    creds = {k: v for k, v in os.environ.items() if k in CREDENTIAL_VARIABLES}
    env = (
        clean_env()
        | creds
        | {
            "HORAE_KAFKA_BOOTSTRAP": stack.kafka_bootstrap,
            "HORAE_TOPIC_PREFIX": topic_prefix,
            "HORAE_TOPIC_PARTITIONS": "3",
            # topics apply creates each tenant's events topic
            "HORAE_TENANT_KEYS": json.dumps(
                {"acme": {"acme-1": "acme-secret"}, "other": {"o-1": "o"}}
            ),
        }
    )
    run([installed / "bin" / "horae", "topics", "apply"], outside, env)
    (outside / "example.py").write_text(CLIENT_EXAMPLE)
    proc = run(
        [installed / "bin" / "python", "example.py", stack.kafka_bootstrap, topic_prefix],
        outside, clean_env() | creds,
    )  # fmt: skip
    assert json.loads(proc.stdout.splitlines()[-1]) == {
        "definition_key": "acme/standup",
        "definition_equal": True,
        "signed": True,
        "events": [["acme", "standup"]],
    }
