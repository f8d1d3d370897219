"""Whether a failed attempt is worth another one. Pure; the *when* is not decided here.

Rules (:func:`classify`):

* ``ok`` (2xx): done, no retry.
* ``http_error``: 5xx, 408 (request timeout), 425 (too early) and 429 (too many requests) are
  retried; every other status (4xx: the target refuses this request as such; 1xx or a status
  outside 100..599: a broken target) is final.
* ``redirect_refused`` (3xx): final — redirects are never followed, and asking again gives the
  same redirect. The tenant has to fix the URL.
* ``refused_ssrf``: final — the address policy will refuse again.
* ``dns_error``, ``timeout_connect``, ``connection_error``, ``tls_error``: retried; nothing
  reached the target, so a retry cannot duplicate anything.
* ``timeout_read``, ``connection_lost``, ``protocol_error`` (outcome *unknown*: the target may
  have processed the request): retried too. This is deliberate: every attempt carries the same
  fire key as ``Idempotency-Key`` and ``webhook-id``, so a target that deduplicates on it sees one
  effect; delivery is at-least-once by design (docs/guarantees.md, dispatcher).

The backoff itself (exponential, jitter, Retry-After as a floor, attempt budget, truncation at the
next instant) belongs to the pure time core, :func:`horae.domain.retry.next_retry`;
:func:`plan_retry` feeds it the verdict and the ``Retry-After`` hint and never computes a delay.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from horae.domain.retry import BackoffPolicy, RetryDecision, next_retry
from horae.outbound.results import AttemptResult, Outcome, SendResult

RETRYABLE_STATUSES = frozenset({408, 425, 429})

_RETRYABLE_TRANSPORT = frozenset(
    {
        SendResult.DNS_ERROR,
        SendResult.TIMEOUT_CONNECT,
        SendResult.CONNECTION_ERROR,
        SendResult.TLS_ERROR,
        SendResult.TIMEOUT_READ,
        SendResult.CONNECTION_LOST,
        SendResult.PROTOCOL_ERROR,
    }
)


@dataclass(frozen=True, slots=True)
class AttemptVerdict:
    """``retry``: schedule another attempt (budget permitting). ``reason``: a stable code for the
    history (``delivered``, ``http_5xx``, ``http_4xx_final`` ...). ``retry_after_s``: the target's
    own hint, a floor for the delay. ``outcome``: what the target saw of this attempt."""

    retry: bool
    reason: str
    outcome: Outcome
    retry_after_s: float | None = None


def classify(result: AttemptResult) -> AttemptVerdict:
    """The retry decision for one attempt result; see the module docstring for the rules."""
    tr = result.send_result
    outcome = result.outcome
    hint = result.retry_after_s
    if tr is SendResult.OK:
        return AttemptVerdict(False, "delivered", outcome)
    if tr is SendResult.HTTP_ERROR and result.status is not None:
        status = result.status
        if 500 <= status <= 599:
            return AttemptVerdict(True, "http_5xx", outcome, hint)
        if status in RETRYABLE_STATUSES:
            return AttemptVerdict(True, f"http_{status}", outcome, hint)
        if 400 <= status <= 499:
            return AttemptVerdict(False, "http_4xx_final", outcome)
        return AttemptVerdict(False, "http_status_invalid", outcome)
    if tr in _RETRYABLE_TRANSPORT:
        return AttemptVerdict(True, tr.value, outcome, hint)
    return AttemptVerdict(False, tr.value, outcome)


@dataclass(frozen=True, slots=True)
class RetryPlan:
    """The verdict on an attempt and, from the domain's backoff, when (if ever) to try again.
    ``next.at_ms is None`` means no further attempt; ``next.cause`` says why (``final: <reason>``
    for a verdict that forbids a retry, else the domain's ``exhausted: ...`` causes)."""

    verdict: AttemptVerdict
    next: RetryDecision


def plan_retry(
    result: AttemptResult,
    *,
    policy: BackoffPolicy,
    fire_key: str,
    attempt: int,
    failed_at_ms: int,
    next_instant_ms: int | None = None,
    first_attempt_ms: int | None = None,
    origin_ms: int | None = None,
) -> RetryPlan:
    """Classify ``result`` (attempt ``attempt``, 1-based, ended at ``failed_at_ms``) and, if it may
    be retried, ask :func:`horae.domain.retry.next_retry` for the time, with the target's
    ``Retry-After`` (rounded up to the millisecond) as a floor. Pure."""
    verdict = classify(result)
    if not verdict.retry:
        return RetryPlan(verdict, RetryDecision(None, 0, f"final: {verdict.reason}"))
    hint_ms = None if verdict.retry_after_s is None else math.ceil(verdict.retry_after_s * 1000)
    decision = next_retry(
        policy,
        fire_key,
        attempt,
        failed_at_ms,
        hint_ms,
        next_instant_ms,
        first_attempt_ms,
        origin_ms,
    )
    return RetryPlan(verdict, decision)
