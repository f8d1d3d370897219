"""Local resources of a test: TCP ports chosen free at run time (two runs on one machine do not
collide), and the processes it started, killed when it ends."""

from __future__ import annotations

import subprocess

from horae.devstack.private import free_ports as free_ports


def kill_all(processes: list[subprocess.Popen[bytes]]) -> None:
    """SIGKILL every process of ``processes`` still running (stopped ones too) and reap it."""
    for proc in processes:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
