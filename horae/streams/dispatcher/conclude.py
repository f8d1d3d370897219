"""The dispatcher's decision core: the verdict on one attempt and the records that conclude it.

Pure: :func:`conclude` takes the order, what travelled with it in its headers
(:class:`~.records.OrderHeaders`), what the attempt did (:class:`Sent`, times included) and where
the fire lives (its partition, and a :class:`~horae.contracts.routing.Router` for topic names and
keys); it returns the :class:`~horae.ports.Emit` records to commit with the lane offset (see
:mod:`.records` for which). Retry timing is the domain's (:func:`horae.outbound.plan_retry` →
:func:`horae.domain.retry.next_retry`): exponential backoff with jitter, ``Retry-After`` as a
floor, the attempt budget (counted from the budget base a redrive sets), truncation at
``order.deadline`` (the trigger's next instant, when the planner sets it), and the bounded age of
``policies.retry`` (no retry after ``max_retry_duration_s`` from the first attempt's start, nor
past ``max_event_age_s`` of the fire's age). An order older than ``max_event_age_s`` when it
would be sent is concluded by :func:`expired` instead, never sent.

No I/O and no clock; it imports the contracts, the domain, the ports and the pure parts of the
outbound edge, never ``confluent_kafka``, ``psycopg`` or ``aiohttp``.
"""

from __future__ import annotations

from dataclasses import dataclass

from horae.contracts import events as ev
from horae.contracts.domain_map import retry_to_domain
from horae.contracts.routing import Router
from horae.contracts.topics import Topic
from horae.domain.errors import ValidationError
from horae.domain.retry import BackoffPolicy, age_origin_ms, expiry
from horae.outbound.results import AttemptResult, Outcome, SendResult
from horae.outbound.retry_decision import plan_retry
from horae.ports import Emit
from horae.streams.dispatcher.records import (
    UNSENDABLE,
    OrderHeaders,
    Verdict,
    attempt_record,
    fire_event,
    ms_of,
    outcome_record,
    retry_order,
    schedule_event,
    utc_datetime_of_ms,
)

H_DLQ_CAUSE = "horae-dlq-cause"


@dataclass(frozen=True, slots=True)
class Sent:
    """What an attempt did: ``result`` None means nothing was sent (``not_sent`` and
    ``error`` say why)."""

    result: AttemptResult | None
    started_ms: int
    ended_ms: int
    error: str | None = None
    not_sent: str | None = None  # a NotSent value, or records.UNSENDABLE


@dataclass(frozen=True, slots=True)
class Conclusion:
    """The verdict, the records to commit, and why (``cause``) for the logs and the breaker."""

    verdict: Verdict
    emits: list[Emit]
    cause: str | None = None
    http_status: int | None = None


def _policy(order: ev.DispatchOrder) -> BackoffPolicy:
    try:
        return retry_to_domain(order.retry)
    except ValidationError:  # the planner validated it; an odd order falls back to defaults
        return BackoffPolicy()


def origin_ms_of(order: ev.DispatchOrder) -> int:
    """Where the fire's age counts from (:func:`horae.domain.retry.age_origin_ms`)."""
    fire = order.fire
    return age_origin_ms(fire.origin.value, ms_of(fire.due_at), ms_of(fire.decided_at))


def expired(
    order: ev.DispatchOrder,
    carried: OrderHeaders,
    router: Router,
    partition: int,
    now_ms: int,
) -> Conclusion | None:
    """The conclusion of an order too old to send at ``now_ms`` (``policies.retry``'s
    ``max_event_age_s``), or ``None`` when it may go (pure). No attempt record: the outcome
    ``exhausted`` (the closest state readers before it know: terminal, not sent again) with
    ``attempts`` the attempts made before, its error the cause, and ``schedule.expired`` with
    the cause; no DLQ (the tenant's policy said so, not a failure)."""
    if order.retry.max_event_age_s is None:  # the common case: no bound, nothing to compute
        return None
    cause = expiry(_policy(order), origin_ms_of(order), now_ms)
    if cause is None:
        return None
    fire = order.fire
    age_s = (now_ms - origin_ms_of(order)) / 1000
    detail = f"{cause} ({age_s:.3f} s old, max_event_age_s {order.retry.max_event_age_s})"
    first = carried.first_attempt_ms
    outcome = ev.WorkOutcome(
        fire_key=fire.fire_key,
        key_hash=fire.key_hash,
        tenant=fire.tenant,
        trigger_id=fire.trigger_id,
        state=ev.OutcomeState.EXHAUSTED,
        attempts=order.attempt - 1,
        decided_at=utc_datetime_of_ms(now_ms),
        first_attempt_at=None if first is None else utc_datetime_of_ms(first),
        error=detail,
        source=ev.OutcomeSource.DISPATCHER,
        tzdata_version=fire.tzdata_version,
    )
    event = schedule_event(order, ev.ScheduleEventType.EXPIRED, now_ms, detail)
    headers = carried.to_headers()
    emits = [router.emit(outcome, partition, headers=headers), router.emit(event, partition)]
    return Conclusion(Verdict.EXPIRED, emits, detail)


def cancelled(
    order: ev.DispatchOrder,
    carried: OrderHeaders,
    cause: str,
    router: Router,
    partition: int,
    now_ms: int,
) -> Conclusion:
    """A held attempt the dispatcher drops, never sent (a cancel marker said ``cause``): no
    attempt record, the outcome ``cancelled`` with ``attempts`` the attempts made before (0 for
    a first attempt) and ``error`` the cause (pure)."""
    fire = order.fire
    first = carried.first_attempt_ms
    outcome = ev.WorkOutcome(
        fire_key=fire.fire_key,
        key_hash=fire.key_hash,
        tenant=fire.tenant,
        trigger_id=fire.trigger_id,
        state=ev.OutcomeState.CANCELLED,
        attempts=order.attempt - 1,
        decided_at=utc_datetime_of_ms(now_ms),
        first_attempt_at=None if first is None else utc_datetime_of_ms(first),
        error=cause,
        source=ev.OutcomeSource.DISPATCHER,
        tzdata_version=fire.tzdata_version,
    )
    emits = [router.emit(outcome, partition, headers=carried.to_headers())]
    return Conclusion(Verdict.CANCELLED, emits, cause)


def conclude(
    order: ev.DispatchOrder,
    carried: OrderHeaders,
    sent: Sent,
    router: Router,
    partition: int,
    cancel: str | None = None,
) -> Conclusion:
    """The verdict on attempt ``order.attempt`` and every record it produces, on the fire's
    ``partition`` (pure). ``cancel``: the cause of a tenant's cancel of the fire that arrived
    while the attempt ran: its result is kept (its attempt record, and a final verdict as
    ever), but where it would retry, the fire is concluded ``cancelled`` instead (the attempt
    record, then the outcome with ``attempts`` counting it; no event, no dead letter)."""
    fire = order.fire
    result = sent.result
    first_ms = carried.first_attempt_ms or sent.started_ms
    next_ms: int | None = None
    status = result.status if result is not None else None
    cause: str | None
    if result is None:
        verdict, cause = Verdict.FAILED, f"final: {sent.error}"
    elif result.send_result is SendResult.OK:
        verdict, cause = Verdict.SUCCEEDED, None  # the common case: no retry planning
    else:
        plan = plan_retry(
            result,
            policy=_policy(order),
            fire_key=fire.fire_key,
            attempt=max(1, order.attempt - carried.budget_base),
            failed_at_ms=sent.ended_ms,
            next_instant_ms=ms_of(order.deadline) if order.deadline is not None else None,
            first_attempt_ms=first_ms,
            origin_ms=origin_ms_of(order),
        )
        cause = plan.next.cause
        if plan.next.at_ms is not None:
            verdict, next_ms = Verdict.RETRY, plan.next.at_ms
        elif (cause or "").startswith("final"):
            verdict = Verdict.FAILED
        elif result.outcome is Outcome.UNKNOWN:
            verdict = Verdict.UNKNOWN
        else:
            verdict = Verdict.EXHAUSTED
        if result.detail:
            cause = f"{cause}; {result.send_result.value}: {result.detail}"
        else:
            cause = f"{cause}; {result.send_result.value} {status or ''}".rstrip()
    stopped = verdict is Verdict.RETRY and cancel is not None  # no retry after a cancel
    if stopped:
        next_ms = None
    headers = carried.to_headers()
    attempt = attempt_record(
        order,
        result,
        started_ms=sent.started_ms,
        ended_ms=sent.ended_ms,
        next_attempt_ms=next_ms,
        error=sent.error,
        not_sent=sent.not_sent,
    )
    emits = [router.emit(attempt, partition, headers=headers)]
    if stopped:
        error = f"{cancel}; attempt {order.attempt}: {cause}"
        ended = outcome_record(
            order,
            Verdict.CANCELLED,
            first_attempt_ms=first_ms,
            last_attempt_ms=sent.started_ms,
            now_ms=sent.ended_ms,
            http_status=status,
            error=error,
        )
        emits.append(router.emit(ended, partition, headers=headers))
        return Conclusion(Verdict.CANCELLED, emits, error, status)
    if verdict is Verdict.RETRY:
        assert next_ms is not None
        follow = OrderHeaders(first_ms, carried.budget_base, carried.redrive_of)
        retry = retry_order(order, next_ms)
        emits.append(router.emit(retry, partition, headers=follow.to_headers()))
        return Conclusion(verdict, emits, cause, status)
    now_ms = sent.ended_ms
    outcome = outcome_record(
        order,
        verdict,
        first_attempt_ms=first_ms,
        last_attempt_ms=sent.started_ms,
        now_ms=now_ms,
        http_status=status,
        error=None if verdict is Verdict.SUCCEEDED else cause,
    )
    emits.append(router.emit(outcome, partition, headers=headers))
    event = fire_event(order, verdict, now_ms=now_ms, http_status=status, cause=cause)
    emits.append(router.emit(event, partition))
    if verdict in (Verdict.EXHAUSTED, Verdict.UNKNOWN) or sent.not_sent == UNSENDABLE:
        dlq_headers = [*headers, (H_DLQ_CAUSE, f"{verdict.value}: {cause}"[:500].encode())]
        emits.append(router.emit(order, partition, topic=Topic.DLQ, headers=dlq_headers))
    return Conclusion(verdict, emits, cause, status)
