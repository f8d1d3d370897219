"""Local resources of a test: TCP ports chosen free at run time (two runs on one machine do not
collide), and the processes it started, killed when it ends."""

from __future__ import annotations

import contextlib
import socket
import subprocess


def free_ports(n: int) -> list[int]:
    """``n`` distinct TCP ports on 127.0.0.1 that nothing listens on right now."""
    with contextlib.ExitStack() as held:
        sockets = [held.enter_context(socket.socket()) for _ in range(n)]
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]


def kill_all(processes: list[subprocess.Popen[bytes]]) -> None:
    """SIGKILL every process of ``processes`` still running (stopped ones too) and reap it."""
    for proc in processes:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
