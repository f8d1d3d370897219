"""`horae demo` (the README's run command, minus the stack it reuses): every process runs, the
event trigger fires and the webhook trigger is delivered, signed, to the local receiver."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator

import psycopg
import pytest

from horae.devstack.stack import Endpoints


@pytest.fixture
def demo_schema(stack: Endpoints, unique: str) -> Iterator[str]:
    """The demo's read-model schema, dropped when the test ends."""
    name = f"demo{unique}"
    yield name
    with psycopg.connect(stack.database_url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


@pytest.mark.timeout(180)
def test_demo_fires_and_delivers(stack: Endpoints, topic_prefix: str, demo_schema: str) -> None:
    env = dict(
        os.environ,
        HORAE_KAFKA_BOOTSTRAP=stack.kafka_bootstrap,
        HORAE_DATABASE_URL=stack.database_url,
        HORAE_TOPIC_PREFIX=topic_prefix,
        HORAE_PROJECTION_SCHEMA=demo_schema,
        HORAE_TOPIC_PARTITIONS="3",
    )
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
