"""The verdict and records of one attempt (pure): retry, truncation at the next instant, budget,
final 4xx, unknown, missing secret, redrive budget base; headers carried; the breaker's count."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from horae.contracts import events as ev
from horae.contracts.codec import decode
from horae.contracts.routing import Router
from horae.contracts.topics import Topic
from horae.domain.keys import FireKey
from horae.outbound.results import AttemptResult, SendResult
from horae.streams.dispatcher.breaker import Breaker
from horae.streams.dispatcher.conclude import H_DLQ_CAUSE, Conclusion, Sent, cancelled, conclude
from horae.streams.dispatcher.records import OrderHeaders, Verdict
from horae.streams.dispatcher.redrive import DlqEntry, redrive_order
from tests.unit.dispatcher.builders import fire_record

T0 = 1_750_000_000
KEY = FireKey("acme", "g", T0)
ROUTER = Router("unit.")
PARTITION = 7


def order(
    attempt: int = 1, deadline: datetime | None = None, max_attempts: int = 5
) -> ev.DispatchOrder:
    at = datetime.fromtimestamp(T0, UTC)
    fire = fire_record(KEY, ev.Lane.CATCH_UP)
    return ev.DispatchOrder(
        fire=fire,
        target=ev.Target(kind=ev.TargetKind.WEBHOOK, url="https://x.example/h"),
        lane=ev.Lane.CATCH_UP if attempt == 1 else ev.Lane.RETRY,
        attempt=attempt,
        not_before=at,
        retry=ev.RetryPolicy(max_attempts=max_attempts, base_s=1.0, max_s=60, jitter_ratio=0.0),
        deadline=deadline,
    )


def sent(tr: SendResult, status: int | None = None, retry_after: float | None = None) -> Sent:
    start = T0 * 1000 + 100
    return Sent(AttemptResult(tr, status, 0.01, retry_after), start, start + 10)


def conclude_on(order: ev.DispatchOrder, carried: OrderHeaders, sent: Sent) -> Conclusion:
    c = conclude(order, carried, sent, ROUTER, PARTITION)
    for e in c.emits:  # every record lands on the fire's partition, encoded from its event
        assert e.partition == PARTITION and e.value is not None
        assert decode(e.value) == e.event
    return c


def topics(c: Conclusion) -> list[str]:
    return [e.topic for e in c.emits]


def names(*ts: Topic) -> list[str]:
    """Full names; schedule events: the fire's tenant's own topic."""
    return [
        ROUTER.events_topic("acme") if t is Topic.SCHEDULE_EVENTS else ROUTER.names[t] for t in ts
    ]


def test_success_records_attempt_outcome_and_event() -> None:
    c = conclude_on(order(), OrderHeaders(), sent(SendResult.OK, 200))
    assert c.verdict is Verdict.SUCCEEDED
    assert topics(c) == names(Topic.ATTEMPTS, Topic.OUTCOMES, Topic.SCHEDULE_EVENTS)


def test_5xx_retries_on_the_retry_lane_with_the_same_key_and_origin() -> None:
    c = conclude_on(order(), OrderHeaders(), sent(SendResult.HTTP_ERROR, 503))
    assert c.verdict is Verdict.RETRY
    retry = c.emits[1]
    assert retry.topic == ROUTER.names[Topic.LANE_RETRY] and retry.key == KEY.canonical().encode()
    assert isinstance(retry.event, ev.DispatchOrder)
    assert retry.event.attempt == 2 and retry.event.lane is ev.Lane.RETRY
    assert retry.event.fire.lane is ev.Lane.CATCH_UP
    assert retry.event.not_before == datetime.fromtimestamp(T0, UTC) + timedelta(seconds=1.11)
    assert OrderHeaders.from_headers(retry.headers).first_attempt_ms == T0 * 1000 + 100
    attempt = c.emits[0].event
    assert isinstance(attempt, ev.Attempt) and attempt.next_attempt_at == retry.event.not_before


def test_retry_after_is_a_floor() -> None:
    c = conclude_on(order(), OrderHeaders(), sent(SendResult.HTTP_ERROR, 429, retry_after=30))
    retry = c.emits[1].event
    assert isinstance(retry, ev.DispatchOrder)
    assert retry.not_before >= datetime.fromtimestamp(T0, UTC) + timedelta(seconds=30)


def test_truncated_at_the_next_instant_is_exhausted_into_the_dlq() -> None:
    deadline = datetime.fromtimestamp(T0 + 1, UTC)  # the retry would start at T0 + 1.11 s
    c = conclude_on(order(deadline=deadline), OrderHeaders(), sent(SendResult.HTTP_ERROR, 500))
    assert c.verdict is Verdict.EXHAUSTED and "next instant" in (c.cause or "")
    assert topics(c) == names(Topic.ATTEMPTS, Topic.OUTCOMES, Topic.SCHEDULE_EVENTS, Topic.DLQ)
    dlq = c.emits[3]
    assert dlq.event == order(deadline=deadline) and dlq.key == KEY.canonical().encode()
    assert (H_DLQ_CAUSE, f"exhausted: {c.cause}".encode()) in (dlq.headers or [])
    event = c.emits[2]
    assert event.key == ev.trigger_key("acme", "g").encode()


def test_budget_and_final_4xx() -> None:
    last = conclude_on(order(attempt=5), OrderHeaders(), sent(SendResult.HTTP_ERROR, 500))
    assert last.verdict is Verdict.EXHAUSTED and "attempt budget" in (last.cause or "")
    final = conclude_on(order(), OrderHeaders(), sent(SendResult.HTTP_ERROR, 404))
    assert final.verdict is Verdict.FAILED
    assert ROUTER.names[Topic.DLQ] not in topics(final)


def test_timed_out_after_sending_on_the_last_attempt_is_unknown() -> None:
    c = conclude_on(order(attempt=5), OrderHeaders(), sent(SendResult.TIMEOUT_READ))
    assert c.verdict is Verdict.UNKNOWN
    outcome = c.emits[1].event
    assert isinstance(outcome, ev.WorkOutcome)
    assert outcome.unknown, "unknown is visible"
    assert outcome.state is ev.OutcomeState.EXHAUSTED, "what readers before WorkOutcome v4 see"
    assert outcome.source == ev.OutcomeSource.DISPATCHER
    assert outcome.tzdata_version == order().fire.tzdata_version
    assert ROUTER.names[Topic.DLQ] in topics(c)
    plain = conclude_on(order(attempt=5), OrderHeaders(), sent(SendResult.HTTP_ERROR, 500))
    exhausted = plain.emits[1].event
    assert isinstance(exhausted, ev.WorkOutcome) and not exhausted.unknown


def test_nothing_sent_without_a_secret_is_a_final_failure_with_its_own_cause() -> None:
    not_sent = Sent(None, T0 * 1000, T0 * 1000, "no signing secret", ev.NotSent.NO_SECRET)
    c = conclude_on(order(), OrderHeaders(), not_sent)
    assert c.verdict is Verdict.FAILED and "no signing secret" in (c.cause or "")
    attempt = c.emits[0].event
    assert isinstance(attempt, ev.Attempt)
    assert attempt.not_sent == ev.NotSent.NO_SECRET
    assert attempt.transport_result is ev.TransportResult.REFUSED_ADDRESS  # readers before v4
    assert attempt.tzdata_version == order().fire.tzdata_version
    event = c.emits[2].event
    assert isinstance(event, ev.ScheduleEvent)
    assert event.tzdata_version == order().fire.tzdata_version


def test_a_sent_attempt_has_no_not_sent_cause() -> None:
    c = conclude_on(order(), OrderHeaders(), sent(SendResult.OK, 200))
    attempt = c.emits[0].event
    assert isinstance(attempt, ev.Attempt) and attempt.not_sent is None


def test_redrive_restarts_the_budget_and_links_to_the_dlq_record() -> None:
    dlq = order(attempt=5)
    entry = DlqEntry("p.dlq", 2, 41, dlq, "exhausted")
    again, carried = redrive_order(entry, datetime.fromtimestamp(T0 + 999, UTC))
    assert again.attempt == 6 and again.deadline is None and again.fire == dlq.fire
    assert carried.redrive_of == "p.dlq:2:41" and carried.budget_base == 5
    c = conclude_on(again, carried, sent(SendResult.HTTP_ERROR, 500))
    assert c.verdict is Verdict.RETRY  # attempt 1 of a fresh budget
    assert all(OrderHeaders.from_headers(e.headers).redrive_of == "p.dlq:2:41" for e in c.emits)


def test_breaker_counts_consecutive_failed_fires_only() -> None:
    b = Breaker(3)
    assert b.observe("k", Verdict.FAILED) is None
    assert b.observe("k", Verdict.RETRY) is None
    assert b.observe("k", Verdict.EXHAUSTED) is None
    assert b.observe("k", Verdict.SUCCEEDED) is None  # resets
    for _ in range(2):
        assert b.observe("k", Verdict.UNKNOWN) is None
    assert b.observe("k", Verdict.FAILED) == 3
    assert b.observe("k", Verdict.FAILED) is None  # starts again after a trip
    assert Breaker(0).observe("k", Verdict.FAILED) is None


def test_a_cancelled_order_has_only_its_outcome_and_leaves_the_breaker_alone() -> None:
    c = cancelled(order(), OrderHeaders(), "cancelled: replaced", ROUTER, PARTITION, T0 * 1000)
    assert c.verdict is Verdict.CANCELLED
    assert topics(c) == names(Topic.OUTCOMES), "no attempt: nothing was sent"
    outcome = c.emits[0].event
    assert isinstance(outcome, ev.WorkOutcome) and c.emits[0].partition == PARTITION
    assert (outcome.fire_key, outcome.state, outcome.attempts, outcome.error) == (
        KEY.canonical(),
        ev.OutcomeState.CANCELLED,
        0,
        "cancelled: replaced",
    )
    assert decode(c.emits[0].value or b"") == outcome
    b = Breaker(2)
    assert b.observe("k", Verdict.FAILED) is None
    assert b.observe("k", Verdict.CANCELLED) is None  # neither a failure nor a success
    assert b.observe("k", Verdict.FAILED) == 2
