"""The outbound edge of the dispatcher: address policy (SSRF), signing, the HTTP sender and the
retry classification. The Kafka lane loop builds on these; nothing here knows about Kafka.

Per attempt: ``headers = attempt_headers(...)`` → ``result = await sender.send(url, body,
headers)`` → ``plan = plan_retry(result, policy=..., fire_key=..., attempt=n, failed_at_ms=...)``
(classification here, backoff from ``horae.domain.retry``).
"""

from typing import TYPE_CHECKING, Any

from horae.outbound.results import AttemptResult, Outcome, SendResult
from horae.outbound.retry_decision import AttemptVerdict, RetryPlan, classify, plan_retry
from horae.outbound.signing import (
    CallbackClaims,
    ReplayGuard,
    SigningKeys,
    TokenError,
    attempt_headers,
    issue_token,
    verify_token,
)
from horae.outbound.ssrf import AddressPolicy, AddressRefused, CheckedTarget, ResolutionError

if TYPE_CHECKING:
    from horae.outbound.http_sender import HttpSender, SenderConfig, parse_retry_after

_SENDER_NAMES = frozenset({"HttpSender", "SenderConfig", "parse_retry_after"})


def __getattr__(name: str) -> Any:
    """The sender's names, imported on first use: importing the pure parts of this package
    (results, retry decision, signing) does not import ``aiohttp``."""
    if name in _SENDER_NAMES:
        from horae.outbound import http_sender

        return getattr(http_sender, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AddressPolicy",
    "AddressRefused",
    "AttemptResult",
    "AttemptVerdict",
    "CallbackClaims",
    "CheckedTarget",
    "HttpSender",
    "Outcome",
    "ReplayGuard",
    "ResolutionError",
    "RetryPlan",
    "SendResult",
    "SenderConfig",
    "SigningKeys",
    "TokenError",
    "attempt_headers",
    "classify",
    "issue_token",
    "parse_retry_after",
    "plan_retry",
    "verify_token",
]
