"""The records of one finished attempt (pure: times are arguments).

Every attempt yields an :class:`~horae.contracts.events.Attempt` (topic ``attempts``). Then
exactly one of:

- ``succeeded`` (2xx): a :class:`~horae.contracts.events.WorkOutcome` and ``schedule.succeeded``;
- retry: a new :class:`~horae.contracts.events.DispatchOrder` with attempt n+1, lane ``retry``
  (its class stays the origin lane, ``fire.lane``) and ``not_before`` = the retry time, the same
  fire key;
- ``failed`` (a final verdict: 4xx other than 408/425/429, redirect, refused address, no secret):
  outcome and ``schedule.failed``;
- ``exhausted`` (attempt budget, or the retry would not start before the trigger's next instant,
  ``order.deadline``): outcome, ``schedule.failed`` and the order on the DLQ;
- ``unknown`` (exhausted, and the last attempt may have reached the target: timed out after
  sending): like exhausted, but the outcome has ``unknown`` true (``state`` stays ``exhausted``
  for readers that predate the field, see ``docs/contracts.md``) and the read models show
  ``unknown``.

Every attempt, outcome and event carries the fire's tzdata version; every outcome here has
``source`` ``dispatcher`` (the callback's have ``callback``). An attempt that never ran (no
signing secret, no URL, a request no sender can send) has ``not_sent`` saying why, and fails the
fire; an unsendable one (``not_sent`` :data:`UNSENDABLE`) also puts its order on the DLQ, as
an exhausted fire does.

A fire the planner replaced (overlap ``replace``) whose first attempt the dispatcher still held
gets no attempt: only its outcome, ``cancelled`` (:func:`~.conclude.cancelled`).

Kafka headers carried from attempt to attempt (:class:`OrderHeaders`): the first attempt's start
(for the outcome), the attempt budget base (a redrive restarts the budget) and the DLQ record a
redrive came from (``horae-redrive-of``), so every later record links to it.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from enum import StrEnum

from horae.contracts import events as ev
from horae.contracts.ids import event_id
from horae.delivery.port import UNSENDABLE as _UNSENDABLE
from horae.outbound import AttemptResult, SendResult

H_FIRST = "horae-first-attempt-ms"
H_BASE = "horae-budget-base"
H_REDRIVE = "horae-redrive-of"

Headers = Sequence[tuple[str, str | bytes | None]]

#: ``Attempt.not_sent`` of an order no HTTP sender can send (a ``target.method`` that is not an
#: HTTP method, a header with a line break: :mod:`horae.outbound.sendable`) or its kind does not
#: dispatch (:meth:`horae.delivery.port.Deliverer.call`). A plain Avro string beside
#: :class:`~horae.contracts.events.NotSent`'s values.
UNSENDABLE = _UNSENDABLE


class Verdict(StrEnum):
    SUCCEEDED = "succeeded"
    RETRY = "retry"
    FAILED = "failed"
    EXHAUSTED = "exhausted"
    UNKNOWN = "unknown"
    CANCELLED = "cancelled"  # the planner replaced the fire, or its tenant cancelled it
    EXPIRED = "expired"  # not sent: older than policies.retry.max_event_age_s when it would go


TERMINAL_FAILURES = frozenset({Verdict.FAILED, Verdict.EXHAUSTED, Verdict.UNKNOWN})


@dataclass(frozen=True, slots=True)
class OrderHeaders:
    """What travels in the headers of a fire's orders (see the module docstring)."""

    first_attempt_ms: int | None = None
    budget_base: int = 0
    redrive_of: str | None = None

    @classmethod
    def from_headers(cls, headers: Headers | dict[str, str | bytes | None] | None) -> OrderHeaders:
        pairs = headers.items() if isinstance(headers, dict) else headers or ()
        found = {k: v for k, v in pairs if isinstance(v, bytes)}
        first = found.get(H_FIRST)
        base = found.get(H_BASE)
        redrive = found.get(H_REDRIVE)
        return cls(
            int(first) if first and first.isdigit() else None,
            int(base) if base and base.isdigit() else 0,
            redrive.decode(errors="replace") if redrive else None,
        )

    def to_headers(self) -> list[tuple[str, bytes]]:
        out = []
        if self.first_attempt_ms is not None:
            out.append((H_FIRST, str(self.first_attempt_ms).encode()))
        if self.budget_base:
            out.append((H_BASE, str(self.budget_base).encode()))
        if self.redrive_of is not None:
            out.append((H_REDRIVE, self.redrive_of.encode()))
        return out


_CONTRACT_RESULT = {
    SendResult.OK: ev.TransportResult.OK,
    SendResult.HTTP_ERROR: ev.TransportResult.HTTP_ERROR,
    SendResult.REDIRECT_REFUSED: ev.TransportResult.HTTP_ERROR,
    SendResult.REFUSED_SSRF: ev.TransportResult.REFUSED_ADDRESS,
    SendResult.DNS_ERROR: ev.TransportResult.CONNECT_ERROR,
    SendResult.TIMEOUT_CONNECT: ev.TransportResult.CONNECT_ERROR,
    SendResult.CONNECTION_ERROR: ev.TransportResult.CONNECT_ERROR,
    SendResult.TLS_ERROR: ev.TransportResult.TLS_ERROR,
    SendResult.TIMEOUT_READ: ev.TransportResult.TIMEOUT,
    SendResult.CONNECTION_LOST: ev.TransportResult.UNKNOWN,
    SendResult.PROTOCOL_ERROR: ev.TransportResult.UNKNOWN,
}


@functools.lru_cache(maxsize=4096)
def utc_datetime_of_ms(ms: int) -> datetime:
    """The aware UTC datetime of an epoch in milliseconds (remembered: one attempt's records
    use its start and end several times, and sends a millisecond apart share them)."""
    return datetime.fromtimestamp(ms / 1000, UTC)


def ms_of(when: datetime) -> int:
    return round(when.timestamp() * 1000)


def attempt_record(
    order: ev.DispatchOrder,
    result: AttemptResult | None,
    *,
    started_ms: int,
    ended_ms: int,
    next_attempt_ms: int | None,
    error: str | None = None,
    not_sent: str | None = None,
) -> ev.Attempt:
    """The history record of attempt ``order.attempt``. ``result`` None: nothing was sent
    (``not_sent`` and ``error`` say why; ``transport_result`` is ``refused_address`` for readers
    before Attempt v4). ``error`` keeps the sender's precise result and detail."""
    fire = order.fire
    if result is None:
        transport, status, retry_after = ev.TransportResult.REFUSED_ADDRESS, None, None
    else:
        transport = _CONTRACT_RESULT[result.send_result]
        status, retry_after = result.status, result.retry_after_s
        detail = f"{result.send_result.value}: {result.detail}" if result.detail else None
        error = error or (None if transport is ev.TransportResult.OK else detail)
        if error is None and transport is not ev.TransportResult.OK:
            error = result.send_result.value
    return ev.Attempt(
        fire_key=fire.fire_key,
        key_hash=fire.key_hash,
        tenant=fire.tenant,
        trigger_id=fire.trigger_id,
        n=order.attempt,
        lane=order.lane,
        started_at=utc_datetime_of_ms(started_ms),
        ended_at=utc_datetime_of_ms(ended_ms),
        transport_result=transport,
        duration_ms=max(0, ended_ms - started_ms),
        http_status=status,
        error=error[:2000] if error else None,
        retry_after_s=retry_after,
        next_attempt_at=utc_datetime_of_ms(next_attempt_ms)
        if next_attempt_ms is not None
        else None,
        tzdata_version=fire.tzdata_version,
        not_sent=None if result is not None else not_sent,
    )


def retry_order(order: ev.DispatchOrder, not_before_ms: int) -> ev.DispatchOrder:
    """Attempt n+1 of the same fire on the retry lane (origin lane kept in ``fire.lane``)."""
    return replace(
        order,
        lane=ev.Lane.RETRY,
        attempt=order.attempt + 1,
        not_before=utc_datetime_of_ms(not_before_ms),
    )


def outcome_record(
    order: ev.DispatchOrder,
    verdict: Verdict,
    *,
    first_attempt_ms: int,
    last_attempt_ms: int,
    now_ms: int,
    http_status: int | None,
    error: str | None,
) -> ev.WorkOutcome:
    """The dispatcher's outcome of a fire (``unknown``: state ``exhausted`` with ``unknown``
    true, see above)."""
    state = {
        Verdict.SUCCEEDED: ev.OutcomeState.SUCCEEDED,
        Verdict.FAILED: ev.OutcomeState.FAILED,
        Verdict.EXHAUSTED: ev.OutcomeState.EXHAUSTED,
        Verdict.UNKNOWN: ev.OutcomeState.EXHAUSTED,
        Verdict.CANCELLED: ev.OutcomeState.CANCELLED,
    }[verdict]
    if verdict is Verdict.UNKNOWN:
        error = error or "the last attempt timed out after sending"
    fire = order.fire
    return ev.WorkOutcome(
        fire_key=fire.fire_key,
        key_hash=fire.key_hash,
        tenant=fire.tenant,
        trigger_id=fire.trigger_id,
        state=state,
        attempts=order.attempt,
        decided_at=utc_datetime_of_ms(now_ms),
        first_attempt_at=utc_datetime_of_ms(first_attempt_ms),
        last_attempt_at=utc_datetime_of_ms(last_attempt_ms),
        http_status=http_status,
        error=error[:2000] if error else None,
        unknown=verdict is Verdict.UNKNOWN,
        source=ev.OutcomeSource.DISPATCHER,
        tzdata_version=fire.tzdata_version,
    )


def fire_event(
    order: ev.DispatchOrder,
    verdict: Verdict,
    *,
    now_ms: int,
    http_status: int | None,
    cause: str | None,
) -> ev.ScheduleEvent:
    """``schedule.succeeded`` or ``schedule.failed`` about one fire (deterministic event id)."""
    if verdict is Verdict.SUCCEEDED:
        return schedule_event(order, ev.ScheduleEventType.SUCCEEDED, now_ms, None, http_status)
    failed = f"{verdict.value}: {cause or ''}"
    return schedule_event(order, ev.ScheduleEventType.FAILED, now_ms, failed, http_status)


def schedule_event(
    order: ev.DispatchOrder,
    kind: ev.ScheduleEventType,
    now_ms: int,
    cause: str | None,
    http_status: int | None = None,
) -> ev.ScheduleEvent:
    """The ``kind`` event about ``order``'s fire at its attempt (deterministic event id; the
    cause cut at 500 characters)."""
    fire = order.fire
    return ev.ScheduleEvent(
        event_id=event_id(kind.value, fire.fire_key, order.attempt),
        type=kind.value,
        tenant=fire.tenant,
        trigger_id=fire.trigger_id,
        emitted_at=utc_datetime_of_ms(now_ms),
        trigger_version=fire.trigger_version,
        fire_key=fire.fire_key,
        key_hash=fire.key_hash,
        origin=fire.origin,
        scheduled_at=fire.scheduled_at,
        due_at=fire.due_at,
        cause=None if cause is None else cause[:500],
        attempt=order.attempt,
        http_status=http_status,
        tzdata_version=fire.tzdata_version,
    )
