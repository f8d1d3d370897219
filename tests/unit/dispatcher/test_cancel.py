"""A tenant's cancel of one fire at the dispatcher (cancel markers, ``horae.domain.cancel``): a
held attempt of the fire — a retry waiting for its time included — is dropped and concluded
``cancelled`` with the actor's cause; an order of the fire read after the marker is too; an
attempt in flight finishes and its result is kept, but no retry follows it. Overlap
``replace`` markers still drop only a first attempt. The loop on a virtual clock, the Kafka side
left out (what it is handed is kept)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from horae.contracts import events as ev
from horae.contracts.topics import Topic, lane_topic
from horae.domain.cancel import cancel_cause
from horae.domain.overlap import CAUSE_REPLACED
from horae.outbound.results import AttemptResult, SendResult
from horae.streams.dispatcher import worker
from horae.streams.dispatcher.admission import lane_class
from horae.streams.dispatcher.cancels import Cancels
from horae.streams.dispatcher.conclude import Sent, conclude
from horae.streams.dispatcher.pump import Finished, Item
from horae.streams.dispatcher.records import OrderHeaders, Verdict
from horae.streams.dispatcher.worker import Dispatcher
from horae.testing import VirtualClock
from tests.unit.dispatcher.test_send_path import CONFIG, ROUTER, T0, first_order

CAUSE = cancel_cause("alice", "wrong payload")
FIRST_MS = int(T0 * 1000) + 5


class Held:
    """An HTTP sender whose answer waits until the test releases it."""

    def __init__(self, status: int) -> None:
        self.status = status
        self.calls = 0
        self.release = asyncio.Event()

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
        await self.release.wait()
        kind = SendResult.OK if self.status < 300 else SendResult.HTTP_ERROR
        return AttemptResult(kind, self.status, 0.01)

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None


class Pump:
    """The Kafka side, left out: every item is current, what the loop hands over is kept."""

    def __init__(self, *_: object, **__: object) -> None:
        self.finished: list[Finished] = []

    def finish(self, finished: Finished) -> None:
        self.finished.append(finished)

    def is_current(self, item: Item) -> bool:
        return True


def dispatcher(clock: VirtualClock) -> tuple[Dispatcher, Pump]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(worker, "Pump", Pump)
        d = Dispatcher(CONFIG, clock=clock)
    assert isinstance(d.pump, Pump)
    return d, d.pump


def item(order: ev.DispatchOrder, offset: int, first_ms: int | None = None) -> Item:
    topic = ROUTER.names[lane_topic(order.lane)]
    return Item(topic, 2, offset, 1, order, OrderHeaders(first_attempt_ms=first_ms))


def retry(attempt: int, wait_s: float) -> ev.DispatchOrder:
    o = first_order()
    at = datetime.fromtimestamp(T0 + wait_s, UTC)
    return replace(o, lane=ev.Lane.RETRY, attempt=attempt, not_before=at)


def marker(cause: str, lane: ev.Lane = ev.Lane.ON_TIME) -> ev.DispatchOrder:
    return replace(first_order(), lane=lane, cancel=cause)


def outcome_of(f: Finished) -> ev.WorkOutcome:
    (outcome,) = [e.event for e in f.conclusion.emits if e.topic == ROUTER.names[Topic.OUTCOMES]]
    assert isinstance(outcome, ev.WorkOutcome)
    return outcome


def topics(f: Finished) -> list[str]:
    return [e.topic for e in f.conclusion.emits]


def test_a_held_retry_and_every_later_order_of_the_fire_are_cancelled_unsent() -> None:
    clock = VirtualClock(T0)
    d, pump = dispatcher(clock)

    async def main() -> None:
        d._loop, d._wake = asyncio.get_running_loop(), asyncio.Event()
        d._hold([item(retry(3, 60), 10, FIRST_MS)])
        assert sum(d.admission.held.values()) == 1
        d._hold([item(marker(CAUSE, ev.Lane.RETRY), 11)])
        assert sum(d.admission.held.values()) == 0, "the held retry is dropped"
        clock.advance(1)
        d._hold([item(retry(4, 90), 12, FIRST_MS)])  # read after the marker (another lane's)

    asyncio.run(main())
    assert [f.item.offset for f in pump.finished] == [10, 12]
    for f, before in zip(pump.finished, (2, 3), strict=True):
        assert f.conclusion.verdict is Verdict.CANCELLED
        assert topics(f) == [ROUTER.names[Topic.OUTCOMES]], "no attempt, no event, no DLQ"
        outcome = outcome_of(f)
        assert (outcome.state, outcome.attempts, outcome.error) == (
            ev.OutcomeState.CANCELLED,
            before,
            "cancelled: by alice: wrong payload",
        )
        assert outcome.first_attempt_at is not None
        assert round(outcome.first_attempt_at.timestamp() * 1000) == FIRST_MS
        assert outcome.source == ev.OutcomeSource.DISPATCHER


def test_a_replace_marker_leaves_a_retrying_fire_alone() -> None:
    clock = VirtualClock(T0)
    d, pump = dispatcher(clock)

    async def main() -> None:
        d._loop, d._wake = asyncio.get_running_loop(), asyncio.Event()
        d._hold([item(retry(2, 60), 10, FIRST_MS)])
        d._hold([item(marker(CAUSE_REPLACED, ev.Lane.RETRY), 11)])

    asyncio.run(main())
    assert pump.finished == [] and sum(d.admission.held.values()) == 1
    assert len(d.cancels) == 0, "nothing remembered for a replace"


@pytest.mark.parametrize(
    ("status", "verdict", "attempts"), [(503, Verdict.CANCELLED, 1), (200, Verdict.SUCCEEDED, 1)]
)
def test_an_attempt_in_flight_finishes_and_no_retry_follows(
    status: int, verdict: Verdict, attempts: int
) -> None:
    clock = VirtualClock(T0)
    d, pump = dispatcher(clock)
    sender = Held(status)
    d.sender = sender

    async def main() -> None:
        d._loop, d._wake = asyncio.get_running_loop(), asyncio.Event()
        first = item(first_order(), 10)
        d.admission.add(first, "acme", lane_class(first_order()), T0, T0)
        got = d.admission.pop(clock.now())
        assert got is not None
        sending = asyncio.create_task(d._send(got[0], got[1]))
        while sender.calls == 0:
            await asyncio.sleep(0)
        d._hold([item(marker(CAUSE), 11)])  # the call is in flight: nothing held to drop
        assert pump.finished == []
        sender.release.set()
        await sending

    asyncio.run(main())
    (done,) = pump.finished
    assert done.conclusion.verdict is verdict
    names = topics(done)
    assert ROUTER.names[Topic.ATTEMPTS] in names, "the attempt in flight is kept"
    assert ROUTER.names[Topic.LANE_RETRY] not in names, "and no retry follows it"
    outcome = outcome_of(done)
    assert outcome.attempts == attempts
    if verdict is Verdict.CANCELLED:
        assert outcome.state is ev.OutcomeState.CANCELLED and outcome.http_status == 503
        assert outcome.error is not None and outcome.error.startswith(f"{CAUSE}; attempt 1:")
        assert ROUTER.names[Topic.DLQ] not in names
    else:
        assert outcome.state is ev.OutcomeState.SUCCEEDED, "a success is kept as it is"


def test_an_order_popped_before_the_marker_is_not_sent() -> None:
    clock = VirtualClock(T0)
    d, pump = dispatcher(clock)
    sender = Held(200)
    d.sender = sender

    async def main() -> None:
        d._loop, d._wake = asyncio.get_running_loop(), asyncio.Event()
        d.admission.add(item(first_order(), 10), "acme", lane_class(first_order()), T0, T0)
        got = d.admission.pop(clock.now())
        assert got is not None
        d._hold([item(marker(CAUSE), 11)])  # between the pop and the send's first step
        await d._send(got[0], got[1])

    asyncio.run(main())
    assert sender.calls == 0
    (done,) = pump.finished
    assert done.conclusion.verdict is Verdict.CANCELLED and outcome_of(done).attempts == 0
    assert d.admission.inflight == 0, "its slot is given back"


def test_the_memory_forgets_a_cancel_after_its_time() -> None:
    cancels = Cancels(keep_s=10)
    cancels.add("a", "cancelled: by x", 100.0)
    cancels.add("b", "cancelled: by y", 105.0)
    assert cancels.cause("a", 109.9) == "cancelled: by x"
    assert cancels.cause("a", 110.0) is None
    cancels.add("c", "cancelled: by z", 112.0)  # drops what expired meanwhile
    assert len(cancels) == 2 and cancels.cause("b", 112.0) == "cancelled: by y"
    cancels.add("b", "cancelled: by w", 116.0)  # again: from now, the latest cause
    assert cancels.cause("b", 125.0) == "cancelled: by w" and len(cancels) == 2


@pytest.mark.parametrize(
    ("status", "verdict"),
    [(503, Verdict.CANCELLED), (200, Verdict.SUCCEEDED), (404, Verdict.FAILED)],
)
def test_conclude_keeps_the_result_and_only_stops_a_retry(status: int, verdict: Verdict) -> None:
    kind = SendResult.OK if status < 300 else SendResult.HTTP_ERROR
    start = int(T0 * 1000) + 100
    sent = Sent(AttemptResult(kind, status, 0.01), start, start + 10)
    c = conclude(first_order(), OrderHeaders(), sent, ROUTER, 2, cancel=CAUSE)
    assert c.verdict is verdict
    by_topic = {e.topic: e.event for e in c.emits}
    attempt = by_topic[ROUTER.names[Topic.ATTEMPTS]]
    assert isinstance(attempt, ev.Attempt) and attempt.http_status == status
    assert attempt.next_attempt_at is None, "no retry is announced"
    assert ROUTER.names[Topic.LANE_RETRY] not in by_topic
    if verdict is Verdict.CANCELLED:
        assert set(by_topic) == {ROUTER.names[Topic.ATTEMPTS], ROUTER.names[Topic.OUTCOMES]}
