"""One attempt of one order: sign, send, classify, and the records that conclude it.

:func:`attempt_once` (async) makes the call; :func:`conclude` (pure) turns its result into the
verdict and the records (see :mod:`.records`). Retry timing is the domain's
(:func:`horae.dispatch.plan_retry` → :func:`horae.domain.retry.next_retry`): exponential backoff
with jitter, ``Retry-After`` as a floor, the attempt budget (counted from the budget base a redrive
sets), and truncation at ``order.deadline`` (the trigger's next instant, when the planner sets it).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from horae.contracts import events as ev
from horae.contracts.domain_map import retry_to_domain
from horae.contracts.topics import Topic
from horae.dispatch import (
    AttemptResult,
    HttpSender,
    Outcome,
    TransportResult,
    attempt_headers,
    issue_token,
    plan_retry,
)
from horae.domain.errors import ValidationError
from horae.domain.retry import RetryPolicy
from horae.streams.dispatcher.config import DispatcherConfig
from horae.streams.dispatcher.records import (
    Carry,
    Verdict,
    attempt_record,
    fire_event,
    ms_of,
    outcome_record,
    retry_order,
)

H_DLQ_CAUSE = "horae-dlq-cause"
NO_SECRET = "no signing secret: none of the target's secret_refs is configured"


@dataclass(frozen=True, slots=True)
class Emit:
    """One record to produce on the fire's partition number."""

    topic: Topic
    key: str
    event: ev.Event
    headers: list[tuple[str, bytes]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Conclusion:
    verdict: Verdict
    emits: list[Emit]
    cause: str | None = None
    http_status: int | None = None


@dataclass(frozen=True, slots=True)
class Sent:
    """What :func:`attempt_once` did: ``result`` None means nothing was sent (``error``)."""

    result: AttemptResult | None
    started_ms: int
    ended_ms: int
    error: str | None = None


async def attempt_once(
    order: ev.DispatchOrder,
    config: DispatcherConfig,
    sender: HttpSender,
    clock: Callable[[], float] = time.time,
) -> Sent:
    """Sign and send attempt ``order.attempt``: the fire key is the ``Idempotency-Key`` and
    ``webhook-id`` of every attempt, and a callback token scoped to this attempt travels along.
    Tenant headers never override Horae's."""
    fire = order.fire
    now = clock()
    started_ms = int(now * 1000)
    keys = config.signing_keys(order.target.secret_refs)
    if keys is None or not order.target.url:
        error = NO_SECRET if keys is None else "the webhook target has no URL"
        return Sent(None, started_ms, started_ms, error)
    token = issue_token(
        tenant=fire.tenant,
        trigger=fire.trigger_id,
        fire_key=fire.fire_key,
        attempt=order.attempt,
        now=now,
        ttl_s=config.callback_ttl_s,
        secret=config.callback_secret,
    )
    headers = dict(order.target.headers)
    headers.update(
        attempt_headers(
            body=order.payload,
            fire_key=fire.fire_key,
            keys=keys,
            now=now,
            callback_token=token,
            content_type=order.content_type,
        )
    )
    result = await sender.send(
        order.target.url, order.payload, headers, method=order.target.method or "POST"
    )
    return Sent(result, started_ms, int(clock() * 1000))


def _policy(order: ev.DispatchOrder) -> RetryPolicy:
    try:
        return retry_to_domain(order.retry)
    except ValidationError:  # the planner validated it; an odd order falls back to defaults
        return RetryPolicy()


def conclude(order: ev.DispatchOrder, carry: Carry, sent: Sent) -> Conclusion:
    """The verdict on attempt ``order.attempt`` and every record it produces (pure)."""
    fire = order.fire
    result = sent.result
    first_ms = carry.first_attempt_ms or sent.started_ms
    next_ms: int | None = None
    status = result.status if result is not None else None
    cause: str | None
    if result is None:
        verdict, cause = Verdict.FAILED, f"final: {sent.error}"
    elif result.transport_result is TransportResult.OK:
        verdict, cause = Verdict.SUCCEEDED, None  # the common case: no retry planning
    else:
        plan = plan_retry(
            result,
            policy=_policy(order),
            fire_key=fire.fire_key,
            attempt=max(1, order.attempt - carry.budget_base),
            failed_at_ms=sent.ended_ms,
            next_instant_ms=ms_of(order.deadline) if order.deadline is not None else None,
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
            cause = f"{cause}; {result.transport_result.value}: {result.detail}"
        else:
            cause = f"{cause}; {result.transport_result.value} {status or ''}".rstrip()
    headers = carry.headers()
    key = fire.fire_key
    attempt = attempt_record(
        order,
        result,
        started_ms=sent.started_ms,
        ended_ms=sent.ended_ms,
        next_attempt_ms=next_ms,
        error=sent.error,
    )
    emits = [Emit(Topic.ATTEMPTS, key, attempt, headers)]
    if verdict is Verdict.RETRY:
        assert next_ms is not None
        follow = Carry(first_ms, carry.budget_base, carry.redrive_of)
        emits.append(Emit(Topic.LANE_RETRY, key, retry_order(order, next_ms), follow.headers()))
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
    emits.append(Emit(Topic.OUTCOMES, key, outcome, headers))
    event = fire_event(order, verdict, now_ms=now_ms, http_status=status, cause=cause)
    emits.append(Emit(Topic.SCHEDULE_EVENTS, ev.trigger_key(fire.tenant, fire.trigger_id), event))
    if verdict in (Verdict.EXHAUSTED, Verdict.UNKNOWN):
        dlq_headers = [*headers, (H_DLQ_CAUSE, f"{verdict.value}: {cause}"[:500].encode())]
        emits.append(Emit(Topic.DLQ, key, order, dlq_headers))
    return Conclusion(verdict, emits, cause, status)
