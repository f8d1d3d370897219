"""The deploy tools, installed by ``scripts/deploy-tools`` (pinned, cached under the user's
cache directory) and found through its ``KEY=VALUE`` output."""

from __future__ import annotations

import functools
import os
import subprocess
from pathlib import Path

from tests.paths import REPO_ROOT as REPO

DEPLOY = REPO / "deploy"
CONTAINERS_CONF = DEPLOY / "containers.conf"


@functools.cache
def deploy_tools(containers: bool = False) -> dict[str, str]:
    """What ``scripts/deploy-tools`` installed (helm, kubeconform, podman-compose, schemas;
    with ``containers``, podman, runc and debootstrap too), by name."""
    args = [str(REPO / "scripts" / "deploy-tools"), *(["--containers"] if containers else [])]
    done = subprocess.run(args, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, f"scripts/deploy-tools failed:\n{done.stdout}{done.stderr}"
    return dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)


def container_env(**extra: str) -> dict[str, str]:
    """The environment of podman and podman-compose: the project's containers config."""
    return {**os.environ, "CONTAINERS_CONF": str(CONTAINERS_CONF), **extra}


def run(args: list[str | Path], timeout: float = 600, **kwargs: object) -> str:
    """Run a command; its stdout, or an assertion naming it with its output."""
    done = subprocess.run(
        [str(a) for a in args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        **kwargs,  # type: ignore[arg-type]
    )
    assert done.returncode == 0, (
        f"{' '.join(map(str, args))}: exit {done.returncode}\n"
        + (done.stdout + done.stderr)[-4000:]
    )
    return done.stdout
