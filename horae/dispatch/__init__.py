"""The outbound edge of the dispatcher: address policy (SSRF), signing, the HTTP sender and the
retry classification. The Kafka lane loop builds on these; nothing here knows about Kafka.

Per attempt: ``headers = attempt_headers(...)`` → ``result = await sender.send(url, body,
headers)`` → ``decision = classify(result)`` → the domain's backoff decides when, if at all.
"""

from horae.dispatch.http_sender import (
    AttemptResult,
    HttpSender,
    Outcome,
    SenderConfig,
    TransportResult,
    parse_retry_after,
)
from horae.dispatch.retry_decision import RetryDecision, classify
from horae.dispatch.signing import (
    CallbackClaims,
    ReplayGuard,
    SigningKeys,
    TokenError,
    attempt_headers,
    issue_token,
    verify_token,
)
from horae.dispatch.ssrf import AddressPolicy, AddressRefused, CheckedTarget, ResolutionError

__all__ = [
    "AddressPolicy",
    "AddressRefused",
    "AttemptResult",
    "CallbackClaims",
    "CheckedTarget",
    "HttpSender",
    "Outcome",
    "ReplayGuard",
    "ResolutionError",
    "RetryDecision",
    "SenderConfig",
    "SigningKeys",
    "TokenError",
    "TransportResult",
    "attempt_headers",
    "classify",
    "issue_token",
    "parse_retry_after",
    "verify_token",
]
