"""The supervisor of ``horae demo``'s processes, as a deployment's supervisor must behave.

- Each process runs in a process group of its own, with stdin closed and its output piped
  through the demo: a Ctrl-C in the terminal reaches the demo only, which stops the processes in
  its own order (its triggers deleted first, while the planner still runs) instead of every
  process at once. Each also gets SIGTERM if the demo itself dies (:mod:`horae.cli.demo_child`).
- The processes' output lines are printed on the demo's stderr, except librdkafka's own log
  lines (``%4|1718000000.123|GETPID|rdkafka#producer-1| ...``), unless ``show_kafka_logs``.
- :meth:`Supervisor.check`: a process that exited is started again, unless the demo is stopping
  (it exited because of the same stop) or it exited more than ``max_restarts`` times within a
  minute (then the demo stops); a process named in ``once`` (the API) is left stopped.
- :meth:`Supervisor.stop` is bounded: SIGTERM to every process, then each gets its drain
  deadline plus ``STOP_GRACE_S``; one still running after that gets SIGABRT (the processes run
  with ``PYTHONFAULTHANDLER=1``: every thread's stack is printed) and, a moment later, SIGKILL.
  No process is left behind.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from typing import IO

from horae.cli import common

#: a log line librdkafka prints itself: %<level>|<unix time>|<facility>|<client name>| ...
KAFKA_LOG_LINE = re.compile(rb"^%\d\|\d+\.\d+\|[A-Z0-9_]+\|")
#: after a process's drain deadline, before it is made to stop: longer than the process's own
#: bound (:func:`horae.cli.common.stop_on_signals`), which ends it with its threads' stacks first
STOP_GRACE_S = common.STOP_GRACE_S + 2.0
ABORT_WAIT_S = 2.0  # after SIGABRT (its stacks printed), before SIGKILL


@dataclass
class _Child:
    name: str
    proc: subprocess.Popen[bytes]
    forwarder: threading.Thread
    restarts: list[float] = field(default_factory=list)


class Supervisor:
    def __init__(
        self,
        names: Iterable[str],
        env: Callable[[str], Mapping[str, str]],
        drain_s: Mapping[str, float],
        *,
        once: Iterable[str] = (),
        max_restarts: int = 5,
        show_kafka_logs: bool = False,
        out: IO[str] | None = None,
    ) -> None:
        self.names = list(names)
        self.env = env
        self.drain_s = drain_s
        self.once = set(once)
        self.max_restarts = max_restarts
        self.show_kafka_logs = show_kafka_logs
        self.out = out or sys.stderr
        self.children: dict[str, _Child] = {}
        self._lock = threading.Lock()

    def say(self, text: str) -> None:
        with self._lock:
            self.out.write(text + "\n")
            self.out.flush()

    def start_all(self) -> None:
        for name in self.names:
            self.children[name] = self._start(name)

    def _start(self, name: str, restarts: list[float] | None = None) -> _Child:
        command = [sys.executable, "-m", "horae.cli.demo_child", str(os.getpid()), name]
        env = dict(self.env(name), PYTHONUNBUFFERED="1", PYTHONFAULTHANDLER="1")
        proc = subprocess.Popen(
            command,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            process_group=0,  # a terminal's Ctrl-C reaches the demo, not its processes
        )
        forwarder = threading.Thread(target=self._forward, args=(proc,), daemon=True)
        forwarder.start()
        return _Child(name, proc, forwarder, restarts or [])

    def _forward(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        with proc.stdout:
            for line in proc.stdout:
                if self.show_kafka_logs or not KAFKA_LOG_LINE.match(line):
                    self.say(line.decode(errors="replace").rstrip("\n"))

    def check(self, stopping: Callable[[], bool]) -> bool:
        """Start again each process that exited; False when one exited too often (the demo
        should stop). Nothing is started again while ``stopping()``."""
        for name, child in list(self.children.items()):
            code = child.proc.poll()
            if code is None:
                continue
            if stopping():  # e.g. it exited because of the signal that stops the demo
                return True
            self.say(f"demo: {name} exited with {code}")
            child.forwarder.join(1.0)
            if name in self.once:  # e.g. the API's port is taken: the fires go on without it
                del self.children[name]
                continue
            now = time.monotonic()
            restarts = [t for t in child.restarts if now - t < 60] + [now]
            if len(restarts) > self.max_restarts:
                del self.children[name]
                return False
            self.children[name] = self._start(name, restarts)
            self.say(f"demo: {name} started again")
        return True

    def alive(self, name: str) -> bool:
        child = self.children.get(name)
        return child is not None and child.proc.poll() is None

    def stop(self, hurry: Callable[[], bool] = lambda: False) -> None:
        """SIGTERM every process, wait for each up to its drain deadline plus
        :data:`STOP_GRACE_S` (none at all once ``hurry()``), then end what is left."""
        started = time.monotonic()
        for child in self.children.values():
            with suppress(ProcessLookupError):
                child.proc.send_signal(signal.SIGTERM)
        late: list[_Child] = []
        waiting = list(self.children.values())
        while waiting:
            now = time.monotonic()
            rest = []
            for child in waiting:
                if child.proc.poll() is not None:
                    continue
                if hurry() or now - started > self.drain_s.get(child.name, 0.0) + STOP_GRACE_S:
                    late.append(child)
                else:
                    rest.append(child)
            waiting = rest
            if waiting:
                time.sleep(0.05)
        for child in late:
            if not hurry():
                self.say(
                    f"demo: {child.name} (pid {child.proc.pid}) did not stop within "
                    f"{time.monotonic() - started:.0f} s of SIGTERM; its threads' stacks follow"
                )
            with suppress(ProcessLookupError):
                child.proc.send_signal(signal.SIGKILL if hurry() else signal.SIGABRT)
        for child in late:
            with suppress(subprocess.TimeoutExpired):
                child.proc.wait(ABORT_WAIT_S)
            if child.proc.poll() is None:
                with suppress(ProcessLookupError):
                    child.proc.kill()
                child.proc.wait()
        for child in self.children.values():
            child.forwarder.join(2.0)
