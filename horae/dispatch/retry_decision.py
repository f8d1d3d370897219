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
  effect; delivery is at-least-once by design (DESIGN.md, dispatcher row).

The backoff itself (exponential, jitter, Retry-After as a floor, attempt budget, truncation at the
next instant) belongs to the pure time core in ``horae.domain``; this module hands it
``retry_after_s`` from the result and never computes a delay.
"""

from __future__ import annotations

from dataclasses import dataclass

from horae.dispatch.http_sender import AttemptResult, Outcome, TransportResult

RETRYABLE_STATUSES = frozenset({408, 425, 429})

_RETRYABLE_TRANSPORT = frozenset(
    {
        TransportResult.DNS_ERROR,
        TransportResult.TIMEOUT_CONNECT,
        TransportResult.CONNECTION_ERROR,
        TransportResult.TLS_ERROR,
        TransportResult.TIMEOUT_READ,
        TransportResult.CONNECTION_LOST,
        TransportResult.PROTOCOL_ERROR,
    }
)


@dataclass(frozen=True, slots=True)
class RetryDecision:
    """``retry``: schedule another attempt (budget permitting). ``reason``: a stable code for the
    history (``delivered``, ``http_5xx``, ``http_4xx_final`` ...). ``retry_after_s``: the target's
    own hint, a floor for the delay. ``outcome``: what the target saw of this attempt."""

    retry: bool
    reason: str
    outcome: Outcome
    retry_after_s: float | None = None


def classify(result: AttemptResult) -> RetryDecision:
    """The retry decision for one attempt result; see the module docstring for the rules."""
    tr = result.transport_result
    outcome = result.outcome
    hint = result.retry_after_s
    if tr is TransportResult.OK:
        return RetryDecision(False, "delivered", outcome)
    if tr is TransportResult.HTTP_ERROR and result.status is not None:
        status = result.status
        if 500 <= status <= 599:
            return RetryDecision(True, "http_5xx", outcome, hint)
        if status in RETRYABLE_STATUSES:
            return RetryDecision(True, f"http_{status}", outcome, hint)
        if 400 <= status <= 499:
            return RetryDecision(False, "http_4xx_final", outcome)
        return RetryDecision(False, "http_status_invalid", outcome)
    if tr in _RETRYABLE_TRANSPORT:
        return RetryDecision(True, tr.value, outcome, hint)
    return RetryDecision(False, tr.value, outcome)
