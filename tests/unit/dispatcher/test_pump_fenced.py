"""A dispatcher fenced by a newer dispatcher of its slot stops: its committer's transaction
raises :class:`~horae.ports.Fenced`, and the pump records why and stops both threads (the worker
then raises it: the process exits for its supervisor) instead of trying again for ever."""

from __future__ import annotations

import queue
import threading
from collections.abc import Sequence

from horae.ports import Emit, Fenced, Offsets
from horae.streams.dispatcher.offsets import PartitionWindow
from horae.streams.dispatcher.pump import Pump


class FencedLog:
    def __init__(self) -> None:
        self.tries = 0

    def commit(self, records: Sequence[Emit], next_offsets: Offsets) -> None:
        self.tries += 1
        raise Fenced("a newer member has this transactional id")


def test_a_fenced_commit_stops_the_pump_with_the_fence() -> None:
    pump = Pump.__new__(Pump)  # the committer's state alone: no Kafka clients
    pump._finished = queue.SimpleQueue()
    pump._lock = threading.Lock()
    pump._pending = [Emit("t.quarantine", b"k", b"v")]
    pump._windows = {("t.lane", 0): PartitionWindow()}
    pump._epochs = {("t.lane", 0): 1}
    log = FencedLog()
    pump.txn = log  # type: ignore[assignment]
    pump.stop = threading.Event()
    pump.failed = None
    pump._commit()
    assert log.tries == 1
    assert isinstance(pump.failed, Fenced) and pump.stop.is_set()
