"""The consumer thread never holds an order back to fill a batch: librdkafka's batch consume waits
its whole timeout unless the batch fills (docs/local-stack.md), so the pump takes what is there
at once, and when nothing is, waits for the first order only."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import cast

from horae.streams.dispatcher.pump import BATCH, FIRST_BATCH, IDLE_WAIT_S, Pump


@dataclass
class FakeConsumer:
    """librdkafka's queue as a list; ``arrive`` is what lands while a call waits."""

    queued: list[str] = field(default_factory=list)
    arrive: list[str] = field(default_factory=list)
    calls: list[tuple[int, float]] = field(default_factory=list)

    def consume(self, num_messages: int, timeout: float) -> list[str]:
        self.calls.append((num_messages, timeout))
        if not self.queued and timeout > 0:
            self.queued, self.arrive = self.arrive, []
        taken, self.queued = self.queued[:num_messages], self.queued[num_messages:]
        return taken


def consume(consumer: FakeConsumer) -> list[str]:
    return cast(list[str], Pump._consume(cast(Pump, SimpleNamespace(consumer=consumer))))


def test_what_is_queued_is_taken_without_waiting() -> None:
    consumer = FakeConsumer(queued=["a", "b", "c"])
    assert consume(consumer) == ["a", "b", "c"]
    assert consumer.calls == [(BATCH, 0)]


def test_when_nothing_is_queued_the_first_order_ends_the_wait_and_its_batch_follows() -> None:
    consumer = FakeConsumer(arrive=["a", "b", "c"])
    assert consume(consumer) == ["a", "b", "c"]
    # a small first batch: its sends start while the rest of a burst is decoded
    assert consumer.calls == [(BATCH, 0), (1, IDLE_WAIT_S), (FIRST_BATCH - 1, 0)]


def test_an_idle_wait_ends_empty() -> None:
    consumer = FakeConsumer()
    assert consume(consumer) == []
    assert consumer.calls == [(BATCH, 0), (1, IDLE_WAIT_S)]
