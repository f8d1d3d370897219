"""Process helpers for the local stack: ports, pid files, waiting, stopping."""

from __future__ import annotations

import os
import signal
import socket
import time
from collections.abc import Callable
from pathlib import Path

from horae.devstack import StackError


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    """True when something accepts TCP connections on host:port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def require_free(port: int, what: str, env_hint: str) -> None:
    """Fail with an actionable message if ``port`` is already taken by someone else."""
    if port_open(port):
        raise StackError(
            f"port {port} on 127.0.0.1 is already in use, so {what} cannot listen there. "
            f"Stop whatever holds it (`ss -ltnp 'sport = :{port}'`) or choose another port "
            f"with {env_hint}."
        )


def read_pid(pid_file: Path) -> int | None:
    """The pid recorded in ``pid_file`` if that process is still alive, else None."""
    try:
        pid = int(pid_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return pid if alive(pid) else None


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie child of ours counts as dead
        waited, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return waited == 0


def wait_until(check: Callable[[], bool], timeout_s: float, interval_s: float = 0.25) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(interval_s)
    return check()


def wait_while_progressing(
    check: Callable[[], bool],
    progress: Callable[[], object],
    idle_s: float,
    cap_s: float,
    *,
    interval_s: float = 0.25,
    monotonic: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> bool:
    """Like :func:`wait_until`, but the ``idle_s`` budget starts again whenever ``progress()``
    changes (a log that grows: a broker loading thousands of partitions is slow, not stuck);
    never longer than ``cap_s`` in all."""
    start = monotonic()
    last, deadline = progress(), start + idle_s
    while monotonic() < min(deadline, start + cap_s):
        if check():
            return True
        sleep(interval_s)
        now = progress()
        if now != last:
            last, deadline = now, monotonic() + idle_s
    return check()


def terminate(pid: int, grace_s: float = 20.0) -> None:
    """SIGTERM the process group of ``pid``, then SIGKILL it if it outlives ``grace_s``."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return
        except PermissionError:
            os.kill(pid, sig)
        if wait_until(lambda: not alive(pid), grace_s):
            return


def tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
