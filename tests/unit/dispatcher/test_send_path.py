"""One fire's way through the dispatcher's decision path, on the in-memory adapters and a virtual
clock: its order is consumed from a lane, signed and sent (:class:`RecordingSender`), concluded, and
the records are committed with the lane offset in one transaction (:class:`InMemoryLog`). A 503
becomes a retry order on the retry lane, due when the clock says; a failed transaction rewinds the
lane and the same order is consumed again; the retry's 200 ends the fire."""

from __future__ import annotations

import asyncio
import base64
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from horae.contracts import events as ev
from horae.contracts.codec import decode
from horae.contracts.routing import Router
from horae.contracts.topics import Topic, fire_partition, lane_topic
from horae.domain.keys import FireKey
from horae.outbound.results import AttemptResult, SendResult
from horae.ports import Emit, Record, TransactionFailed
from horae.streams.dispatcher.conclude import Conclusion, conclude
from horae.streams.dispatcher.config import DispatcherConfig
from horae.streams.dispatcher.deliver import attempt_once
from horae.streams.dispatcher.records import OrderHeaders, Verdict
from horae.testing import InMemoryLog, RecordingSender, VirtualClock
from tests.unit.dispatcher.builders import fire_record

PREFIX = "unit."
PARTITIONS = 4
ROUTER = Router(PREFIX)
CONFIG = DispatcherConfig(
    bootstrap="unused:9092",
    prefix=PREFIX,
    slot="a",
    webhook_secrets={
        "acme": {"main": "whsec_" + base64.b64encode(b"unit-webhook-secret-0123").decode()}
    },
    callback_secret=b"unit-callback-secret",
)
T0 = 1_800_000_000.0
KEY = FireKey("acme", "nightly", int(T0))
LANES = [ROUTER.names[lane_topic(lane)] for lane in ev.Lane]


def first_order() -> ev.DispatchOrder:
    at = datetime.fromtimestamp(T0, UTC)
    fire = fire_record(KEY, ev.Lane.ON_TIME)
    return ev.DispatchOrder(
        fire=fire,
        target=ev.Target(
            kind=ev.TargetKind.WEBHOOK, url="https://hooks.example/h", secret_refs=("main",)
        ),
        lane=ev.Lane.ON_TIME,
        attempt=1,
        not_before=at,
        retry=ev.RetryPolicy(max_attempts=5, base_s=1.0, max_s=60, jitter_ratio=0.0),
        payload=b'{"n": 1}',
    )


def new_log() -> InMemoryLog:
    log = InMemoryLog()
    for topic in Topic:
        log.create_topic(ROUTER.names[topic], PARTITIONS)
    log.create_topic(ROUTER.events_topic("acme"), PARTITIONS)  # the tenant's events topic
    log.subscribe(LANES, lambda _: None, lambda _: None)
    return log


def produce(log: InMemoryLog, e: Emit) -> None:
    log.produce(e.topic, e.key, e.value, e.partition, e.headers)


def attempt(
    log: InMemoryLog, sender: RecordingSender, clock: VirtualClock
) -> tuple[Record, Conclusion]:
    """Consume the one order waiting on the lanes, send it, conclude it (nothing committed)."""
    (record,) = log.consume(100, 0)
    order = decode(record.value() or b"", ev.DispatchOrder)
    sent = asyncio.run(attempt_once(order, CONFIG, sender, clock))
    carried = OrderHeaders.from_headers(record.headers())
    return record, conclude(order, carried, sent, ROUTER, record.partition())


def commit(log: InMemoryLog, record: Record, c: Conclusion) -> None:
    log.commit(c.emits, {(record.topic(), record.partition()): record.offset() + 1})


def events_on(log: InMemoryLog, topic: Topic) -> list[ev.Event]:
    name = ROUTER.events_topic("acme") if topic is Topic.SCHEDULE_EVENTS else ROUTER.names[topic]
    return [decode(r.value() or b"") for r in log.records(name)]


def test_a_503_is_retried_after_a_rewind_and_the_retry_ends_the_fire() -> None:
    log, clock = new_log(), VirtualClock(T0)
    partition = fire_partition("acme", "nightly", PARTITIONS)
    produce(log, ROUTER.emit(first_order(), partition))
    unavailable = AttemptResult(SendResult.HTTP_ERROR, status=503)
    sender = RecordingSender([unavailable])

    record, c = attempt(log, sender, clock)
    assert c.verdict is Verdict.RETRY
    log.fail_next_commit()
    with pytest.raises(TransactionFailed):  # nothing written, the lane rewound
        commit(log, record, c)
    assert events_on(log, Topic.ATTEMPTS) == []

    clock.advance(0.5)
    again, c = attempt(log, sender, clock)  # the same order, sent again, same fire key
    assert (again.topic(), again.offset()) == (record.topic(), record.offset())
    commit(log, again, c)
    assert [r.headers["Idempotency-Key"] for r in sender.sent] == [KEY.canonical()] * 2

    (retry_record,) = log.records(ROUTER.names[Topic.LANE_RETRY])
    assert retry_record.partition() == partition
    retry = decode(retry_record.value() or b"", ev.DispatchOrder)
    assert retry.attempt == 2 and retry.fire == first_order().fire
    assert retry.not_before == datetime.fromtimestamp(T0 + 0.5 + 1.0, UTC)  # base_s after it

    clock.advance(1.0)
    sender.results[:] = [AttemptResult(SendResult.OK, status=200)]
    last, c = attempt(log, sender, clock)
    assert last.topic() == ROUTER.names[Topic.LANE_RETRY] and c.verdict is Verdict.SUCCEEDED
    commit(log, last, c)

    (outcome,) = events_on(log, Topic.OUTCOMES)
    assert isinstance(outcome, ev.WorkOutcome)
    assert outcome.state is ev.OutcomeState.SUCCEEDED and outcome.attempts == 2
    assert outcome.first_attempt_at == datetime.fromtimestamp(T0 + 0.5, UTC)
    attempts = [
        decode(r.value() or b"", ev.Attempt) for r in log.records(ROUTER.names[Topic.ATTEMPTS])
    ]
    assert [(a.n, a.http_status) for a in attempts] == [(1, 503), (2, 200)]
    (done,) = events_on(log, Topic.SCHEDULE_EVENTS)
    assert isinstance(done, ev.ScheduleEvent) and done.type == "schedule.succeeded"
    assert log.committed == {
        (record.topic(), partition): record.offset() + 1,
        (last.topic(), partition): last.offset() + 1,
    }
    assert log.consume(100, 0) == []


WEBHOOK, NO_SECRET = ev.TargetKind.WEBHOOK, ev.NotSent.NO_SECRET


@pytest.mark.parametrize(
    ("target", "cause"),
    [
        (ev.Target(kind=WEBHOOK, url="https://h.example/h", secret_refs=("x",)), NO_SECRET),
        (ev.Target(kind=WEBHOOK, url=None, secret_refs=("main",)), ev.NotSent.NO_URL),
    ],
)
def test_an_attempt_that_never_ran_says_why_and_nothing_is_sent(
    target: ev.Target, cause: ev.NotSent
) -> None:
    sender = RecordingSender([AttemptResult(SendResult.OK, 200, 0.01)])
    order = first_order()
    order = ev.DispatchOrder(
        fire=order.fire, target=target, lane=order.lane, attempt=1, not_before=order.not_before
    )
    sent = asyncio.run(attempt_once(order, CONFIG, sender, VirtualClock(T0)))
    assert sender.sent == [] and sent.result is None and sent.not_sent is cause
    c = conclude(order, OrderHeaders(), sent, ROUTER, 0)
    record = c.emits[0].event
    assert isinstance(record, ev.Attempt) and record.not_sent == cause
    assert c.verdict is Verdict.FAILED


def test_the_targets_timeout_bounds_the_attempt() -> None:
    sender = RecordingSender([AttemptResult(SendResult.OK, 200, 0.01)])
    order = first_order()
    target = replace(order.target, timeout_ms=2_500)
    order = ev.DispatchOrder(
        fire=order.fire, target=target, lane=order.lane, attempt=1, not_before=order.not_before
    )
    asyncio.run(attempt_once(order, CONFIG, sender, VirtualClock(T0)))
    assert [r.timeout_s for r in sender.sent] == [2.5]
