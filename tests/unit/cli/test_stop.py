"""A stop is always bounded (:func:`horae.cli.common.stop_on_signals`): SIGTERM or SIGINT sets
the stop event, and a process still running its drain deadline plus grace later ends as hung
(status 70, every thread's stack on stderr) — whatever its threads wait on."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

# a process whose only thread never looks at its stop event
STUCK = """
import threading, time, sys
from horae.cli.common import stop_on_signals
stop = threading.Event()
stop_on_signals(stop, 0.2, grace_s=0.3)
print("ready", flush=True)
while True:
    time.sleep(0.05)
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_process_that_ignores_its_stop_ends_as_hung_after_its_deadline(
    sig: signal.Signals,
) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", STUCK], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        started = time.monotonic()
        proc.send_signal(sig)
        proc.send_signal(sig)  # a second signal changes nothing (a supervisor's after Ctrl-C)
        _, err = proc.communicate(timeout=20)
        took = time.monotonic() - started
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 70
    assert 0.5 <= took < 5.0
    assert f"stop on {sig.name} blocked for" in err
    assert "Thread 0x" in err or "Current thread" in err  # every thread's stack
