"""`horae demo` (the README's run command, minus the stack it reuses): every process runs, the
event trigger fires and the webhook trigger is delivered, signed, to the local receiver."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from horae.devstack.stack import Endpoints


@pytest.mark.timeout(180)
def test_demo_fires_and_delivers(stack: Endpoints, unique: str) -> None:
    env = dict(
        os.environ,
        HORAE_KAFKA_BOOTSTRAP=stack.kafka_bootstrap,
        HORAE_DATABASE_URL=stack.database_url,
        HORAE_TOPIC_PREFIX=f"demo{unique}.",
        HORAE_PROJECTION_SCHEMA=f"demo{unique}",
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
    assert len(re.findall(r"^  fired \S+Z", out, re.M)) >= 2
    delivered = re.findall(r"^  delivered (\S+)  signature (\w+)", out, re.M)
    assert len(delivered) >= 2 and all(ok == "ok" for _, ok in delivered)
    assert all(key.startswith("v1/demo/") for key, _ in delivered)
