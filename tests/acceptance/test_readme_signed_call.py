"""README's "Deliver a signed call": its shell block's variables configure a spawned planner and
dispatcher (under this test's topic prefix), and its Python block runs exactly as written: the
webhook call must arrive with a Standard Webhooks signature that verifies."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.net import kill_all
from tests.paths import REPO_ROOT

MARKER = "<!-- example: signed-call{} -->\n```{}\n(.*?)```"


def block(name: str, lang: str) -> str:
    """The fenced block of README.md that follows the marker ``<!-- example: signed-call…-->``."""
    readme = (REPO_ROOT / "README.md").read_text()
    found = re.search(MARKER.format(name, lang), readme, re.S)
    assert found is not None, f"README.md has no {lang} block marked signed-call{name}"
    return found.group(1)


def exported(script: str) -> dict[str, str]:
    """The variables the shell block's ``export`` sets."""
    words = shlex.split(script.replace("\\\n", " "), comments=True)
    start = words.index("export") + 1
    assigned = [w for w in words[start:] if re.fullmatch(r"[A-Z_]+=.*", w, re.S)]
    return dict(w.split("=", 1) for w in assigned)


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    kill_all(started)


def test_readme_signed_call(
    kafka_bootstrap: str, topic_prefix: str, processes: list[subprocess.Popen[bytes]]
) -> None:
    script = block(" env", "sh")
    assert "horae planner &" in script and "horae dispatcher &" in script
    env = {
        **os.environ,
        **exported(script),
        "HORAE_KAFKA_BOOTSTRAP": kafka_bootstrap,
        "HORAE_TOPIC_PREFIX": topic_prefix,  # isolated, instead of the README's hello.
        "HORAE_TOPIC_PARTITIONS": "3",
        "HORAE_PLANNER_SLOT": f"{topic_prefix}p",
        "HORAE_DISPATCHER_SLOT": f"{topic_prefix}d",
        "HORAE_LOG_LEVEL": "WARNING",
    }
    assert "HORAE_TENANT_KEYS" in env and "HORAE_DISPATCHER_WEBHOOK_SECRETS" in env
    for name in ("planner", "dispatcher"):
        processes.append(subprocess.Popen([sys.executable, "-m", "horae.cli.main", name], env=env))
    run = subprocess.run(
        [sys.executable, "-c", block("", "python")],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert run.returncode == 0, run.stderr
    assert "verified call: {'hello': 'horae'}" in run.stdout
    assert all(p.poll() is None for p in processes), "a process exited"
