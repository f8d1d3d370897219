"""An attempt that crashes inside the dispatcher (an exception out of the send path that is no
delivery failure) is tried again a bounded number of times, ``RETRY_INTERNAL_S`` apart on the
virtual clock, then fails its fire as an unsendable order does: an attempt record (``not_sent``
``unsendable``, the exception as the cause), a ``failed`` outcome, ``schedule.failed`` and a DLQ
entry, handed to the pump to commit with the lane offset. One crash that passes costs nothing."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import pytest

from horae.contracts import events as ev
from horae.contracts.topics import Topic, lane_topic
from horae.outbound.results import AttemptResult, SendResult
from horae.streams.dispatcher import worker
from horae.streams.dispatcher.conclude import H_DLQ_CAUSE
from horae.streams.dispatcher.pump import Finished, Item
from horae.streams.dispatcher.records import UNSENDABLE, OrderHeaders, Verdict
from horae.streams.dispatcher.worker import INTERNAL_TRIES, RETRY_INTERNAL_S, Dispatcher
from horae.testing import VirtualClock
from tests.unit.dispatcher.test_send_path import CONFIG, ROUTER, T0, first_order


class Crashing:
    """An HTTP sender that raises what no sender should (``crashes`` times, None: always), then
    answers 200."""

    def __init__(self, crashes: int | None = None) -> None:
        self.crashes = crashes
        self.calls = 0

    async def send(
        self,
        url: str,
        body: bytes,
        headers: Mapping[str, str],
        *,
        method: str = "POST",
        timeout_s: float | None = None,
    ) -> AttemptResult:
        self.calls += 1
        if self.crashes is None or self.calls <= self.crashes:
            raise RuntimeError("a bug in the sender")
        return AttemptResult(SendResult.OK, 200)

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None


class Pump:
    """The Kafka side, left out: what the loop hands over is kept."""

    def __init__(self, *_: object, **__: object) -> None:
        self.finished: list[Finished] = []

    def finish(self, finished: Finished) -> None:
        self.finished.append(finished)


def run(sender: Crashing, rounds: int) -> tuple[list[Finished], VirtualClock, Dispatcher]:
    """Send one order through the dispatcher's send path; each time it is held again, move the
    virtual clock to its retry and send what admission hands out (``rounds`` times at most)."""
    clock = VirtualClock(T0)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(worker, "Pump", Pump)
        dispatcher = Dispatcher(CONFIG, clock=clock)
    dispatcher.sender = sender
    pump = dispatcher.pump
    assert isinstance(pump, Pump)
    order = first_order()
    item = Item(ROUTER.names[lane_topic(ev.Lane.ON_TIME)], 2, 7, 1, order, OrderHeaders())

    async def main() -> None:
        dispatcher._loop = asyncio.get_running_loop()
        dispatcher._wake = asyncio.Event()
        admission = dispatcher.admission
        admission.add(item, "acme", ev.Lane.ON_TIME, T0, T0)
        for _ in range(rounds):
            got = admission.pop(clock.now())
            if got is None:
                assert admission.pop(clock.now() + RETRY_INTERNAL_S - 0.01) is None
                clock.advance(RETRY_INTERNAL_S)
                got = admission.pop(clock.now())
                if got is None:
                    return
            await dispatcher._send(got[0], got[1])

    asyncio.run(main())
    return pump.finished, clock, dispatcher


def test_a_crashing_attempt_is_tried_again_then_fails_its_fire_with_the_cause() -> None:
    sender = Crashing()
    finished, clock, dispatcher = run(sender, rounds=10)
    assert sender.calls == INTERNAL_TRIES == 3, "a bounded number of tries"
    (done,) = finished
    assert done.item.offset == 7, "the lane offset is finished with the records"
    c = done.conclusion
    assert c.verdict is Verdict.FAILED
    cause = "unsendable: dispatcher error on 3 tries: RuntimeError: a bug in the sender"
    by_topic = {e.topic: e for e in c.emits}
    attempt = by_topic[ROUTER.names[Topic.ATTEMPTS]].event
    assert isinstance(attempt, ev.Attempt)
    assert (attempt.not_sent, attempt.error, attempt.n) == (UNSENDABLE, cause, 1)
    outcome = by_topic[ROUTER.names[Topic.OUTCOMES]].event
    assert isinstance(outcome, ev.WorkOutcome) and outcome.state is ev.OutcomeState.FAILED
    assert outcome.error is not None and cause in outcome.error
    event = by_topic[ROUTER.events_topic("acme")].event
    assert isinstance(event, ev.ScheduleEvent) and event.type == "schedule.failed"
    dead = by_topic[ROUTER.names[Topic.DLQ]]
    assert dead.partition == 2
    assert cause.encode() in dict(dead.headers or [])[H_DLQ_CAUSE]
    assert ROUTER.names[Topic.LANE_RETRY] not in by_topic
    assert dispatcher._crashes == {}, "nothing kept for a fire that ended"
    assert dispatcher.admission.pop(clock.now() + 3600) is None, "never tried again"


def test_a_crash_that_passes_is_tried_again_and_the_fire_succeeds() -> None:
    sender = Crashing(crashes=INTERNAL_TRIES - 1)
    finished, _, dispatcher = run(sender, rounds=10)
    (done,) = finished
    assert sender.calls == INTERNAL_TRIES and done.conclusion.verdict is Verdict.SUCCEEDED
    assert dispatcher._crashes == {}
