"""Retry classification and Retry-After parsing (pure)."""

from __future__ import annotations

from email.utils import formatdate

import pytest

from horae.domain.retry import BackoffPolicy, RetryDecision, next_retry
from horae.outbound.http_sender import AttemptResult, Outcome, SendResult, parse_retry_after
from horae.outbound.retry_decision import classify, plan_retry

T = SendResult


@pytest.mark.parametrize(
    ("result", "retry", "reason", "outcome"),
    [
        (AttemptResult(T.OK, 200), False, "delivered", Outcome.DELIVERED),
        (AttemptResult(T.OK, 204), False, "delivered", Outcome.DELIVERED),
        (AttemptResult(T.REDIRECT_REFUSED, 302), False, "redirect_refused", Outcome.REJECTED),
        (AttemptResult(T.HTTP_ERROR, 400), False, "http_4xx_final", Outcome.REJECTED),
        (AttemptResult(T.HTTP_ERROR, 401), False, "http_4xx_final", Outcome.REJECTED),
        (AttemptResult(T.HTTP_ERROR, 404), False, "http_4xx_final", Outcome.REJECTED),
        (AttemptResult(T.HTTP_ERROR, 410), False, "http_4xx_final", Outcome.REJECTED),
        (AttemptResult(T.HTTP_ERROR, 408), True, "http_408", Outcome.REJECTED),
        (AttemptResult(T.HTTP_ERROR, 425), True, "http_425", Outcome.REJECTED),
        (AttemptResult(T.HTTP_ERROR, 429), True, "http_429", Outcome.REJECTED),
        (AttemptResult(T.HTTP_ERROR, 500), True, "http_5xx", Outcome.REJECTED),
        (AttemptResult(T.HTTP_ERROR, 503), True, "http_5xx", Outcome.REJECTED),
        (AttemptResult(T.HTTP_ERROR, 199), False, "http_status_invalid", Outcome.REJECTED),
        (AttemptResult(T.HTTP_ERROR, 600), False, "http_status_invalid", Outcome.REJECTED),
        (AttemptResult(T.REFUSED_SSRF), False, "refused_ssrf", Outcome.NOT_SENT),
        (AttemptResult(T.DNS_ERROR), True, "dns_error", Outcome.NOT_SENT),
        (AttemptResult(T.TIMEOUT_CONNECT), True, "timeout_connect", Outcome.NOT_SENT),
        (AttemptResult(T.CONNECTION_ERROR), True, "connection_error", Outcome.NOT_SENT),
        (AttemptResult(T.TLS_ERROR), True, "tls_error", Outcome.NOT_SENT),
        (AttemptResult(T.TIMEOUT_READ), True, "timeout_read", Outcome.UNKNOWN),
        (AttemptResult(T.CONNECTION_LOST), True, "connection_lost", Outcome.UNKNOWN),
        (AttemptResult(T.PROTOCOL_ERROR), True, "protocol_error", Outcome.UNKNOWN),
    ],
    ids=lambda v: str(v) if not isinstance(v, AttemptResult) else f"{v.send_result}",
)
def test_classification(result: AttemptResult, retry: bool, reason: str, outcome: Outcome) -> None:
    decision = classify(result)
    assert (decision.retry, decision.reason, decision.outcome) == (retry, reason, outcome)


def test_every_send_result_is_classified() -> None:
    for tr in SendResult:
        status = 500 if tr is T.HTTP_ERROR else None
        assert classify(AttemptResult(tr, status)).reason


def test_retry_after_hint_travels_with_retryable_answers_only() -> None:
    assert classify(AttemptResult(T.HTTP_ERROR, 429, retry_after_s=30.0)).retry_after_s == 30.0
    assert classify(AttemptResult(T.HTTP_ERROR, 503, retry_after_s=5.0)).retry_after_s == 5.0
    assert classify(AttemptResult(T.HTTP_ERROR, 400, retry_after_s=5.0)).retry_after_s is None


NOW = 1_700_000_000.0


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        ("120", 120.0),
        (" 0 ", 0.0),
        ("-5", None),
        ("1.5", None),
        ("soon", None),
        ("", None),
        (formatdate(NOW + 90, usegmt=True), 90.0),
        (formatdate(NOW - 90, usegmt=True), 0.0),
        ("Tue, 14 Nov 2023 22:14:20 GMT", 60.0),  # NOW is 2023-11-14 22:13:20 UTC
        ("Tuesday, 14-Nov-23 22:14:20 GMT", 60.0),  # RFC 850 form
        ("Tue Nov 14 22:14:20 2023", 60.0),  # asctime form: GMT by definition
    ],
)
def test_parse_retry_after(value: str | None, expected: float | None) -> None:
    assert parse_retry_after(value, NOW) == expected


POLICY = BackoffPolicy(max_attempts=3, initial_ms=1_000, jitter_ratio=0.0)


def test_plan_final_verdicts_never_reach_the_backoff() -> None:
    plan = plan_retry(
        AttemptResult(T.HTTP_ERROR, 404), policy=POLICY, fire_key="k", attempt=1, failed_at_ms=0
    )
    assert not plan.verdict.retry
    assert (plan.next.at_ms, plan.next.cause) == (None, "final: http_4xx_final")


def test_plan_uses_the_domain_backoff_with_retry_after_as_a_floor() -> None:
    def plan(result: AttemptResult, attempt: int = 1, next_ms: int | None = None) -> RetryDecision:
        return plan_retry(
            result,
            policy=POLICY,
            fire_key="k",
            attempt=attempt,
            failed_at_ms=10_000,
            next_instant_ms=next_ms,
        ).next

    assert plan(AttemptResult(T.TIMEOUT_READ)) == next_retry(POLICY, "k", 1, 10_000)
    assert plan(AttemptResult(T.HTTP_ERROR, 429, retry_after_s=2.0001)).at_ms == 10_000 + 2_001
    assert plan(AttemptResult(T.HTTP_ERROR, 503, retry_after_s=0.0)).at_ms == 11_000
    assert plan(AttemptResult(T.CONNECTION_ERROR), attempt=3).cause == "exhausted: attempt budget"
    assert plan(AttemptResult(T.DNS_ERROR), next_ms=10_500).cause == "exhausted: next instant"
