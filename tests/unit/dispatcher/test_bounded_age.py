"""The dispatcher's bounded age, pure: an order too old to send is concluded ``expired`` (outcome
``exhausted``, ``schedule.expired``, no attempt, no DLQ), retries stop at the age and the retry
duration, the breaker ignores an expiry, a redrive clears both bounds."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from horae.contracts import events as ev
from horae.contracts.codec import decode
from horae.contracts.topics import Topic
from horae.outbound.results import SendResult
from horae.streams.dispatcher.breaker import Breaker
from horae.streams.dispatcher.conclude import expired
from horae.streams.dispatcher.records import OrderHeaders, Verdict
from horae.streams.dispatcher.redrive import DlqEntry, redrive_order
from tests.unit.dispatcher.test_conclude import (
    PARTITION,
    ROUTER,
    T0,
    conclude_on,
    order,
    sent,
)


def aged(
    age_s: int | None = 60, duration_s: int | None = None, attempt: int = 1
) -> ev.DispatchOrder:
    o = order(attempt=attempt, max_attempts=50)
    retry = replace(o.retry, max_event_age_s=age_s, max_retry_duration_s=duration_s)
    return replace(o, retry=retry)


def test_an_order_older_than_its_max_age_is_expired_not_sent() -> None:
    o = aged()
    due_ms = int(o.fire.due_at.timestamp() * 1000)
    assert expired(o, OrderHeaders(), ROUTER, PARTITION, due_ms + 60_000) is None
    c = expired(o, OrderHeaders(), ROUTER, PARTITION, due_ms + 60_001)
    assert c is not None and c.verdict is Verdict.EXPIRED
    outcome, event = (e.event for e in c.emits)
    assert isinstance(outcome, ev.WorkOutcome) and outcome.state is ev.OutcomeState.EXHAUSTED
    assert outcome.attempts == 0 and outcome.first_attempt_at is None
    assert outcome.error == "expired: max event age (60.001 s old, max_event_age_s 60)"
    assert isinstance(event, ev.ScheduleEvent) and event.type == "schedule.expired"
    assert all(e.topic != ROUTER.names[Topic.DLQ] for e in c.emits)
    for e in c.emits:
        assert e.value is not None and decode(e.value) == e.event
    assert expired(aged(None), OrderHeaders(), ROUTER, PARTITION, due_ms + 10**9) is None


def test_a_retry_waiting_past_the_age_is_expired_with_its_attempts() -> None:
    o = aged(attempt=3)
    carried = OrderHeaders(first_attempt_ms=T0 * 1000)
    c = expired(o, carried, ROUTER, PARTITION, T0 * 1000 + 61_000)
    assert c is not None
    outcome = c.emits[0].event
    assert isinstance(outcome, ev.WorkOutcome) and outcome.attempts == 2
    assert outcome.first_attempt_at == datetime.fromtimestamp(T0, UTC)


def test_retries_stop_at_the_age_and_the_retry_duration() -> None:
    failed = sent(SendResult.HTTP_ERROR, 500)  # at T0 + 0.1 s; next retry ~1 s later
    c = conclude_on(aged(age_s=1), OrderHeaders(), failed)
    assert c.verdict is Verdict.EXHAUSTED and (c.cause or "").startswith("exhausted: max event age")
    c = conclude_on(aged(None, duration_s=1), OrderHeaders(first_attempt_ms=T0 * 1000), failed)
    assert c.verdict is Verdict.EXHAUSTED
    assert (c.cause or "").startswith("exhausted: max retry duration")
    c = conclude_on(aged(age_s=60, duration_s=60), OrderHeaders(), failed)
    assert c.verdict is Verdict.RETRY


def test_the_breaker_does_not_count_an_expiry() -> None:
    b = Breaker(2)
    assert b.observe("k", Verdict.FAILED) is None
    assert b.observe("k", Verdict.EXPIRED) is None  # neither a failure nor a success
    assert b.observe("k", Verdict.FAILED) == 2


def test_a_redrive_clears_the_bounds() -> None:
    entry = DlqEntry("p.dlq", 2, 41, aged(age_s=60, duration_s=60, attempt=5), "exhausted")
    again, _ = redrive_order(entry, datetime.fromtimestamp(T0 + 999, UTC))
    assert (again.retry.max_event_age_s, again.retry.max_retry_duration_s) == (None, None)
    assert again.retry.max_attempts == 50
