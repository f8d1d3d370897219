"""How an outbound attempt ended: the values the HTTP sender returns (pure; no I/O library).

They live apart from :mod:`horae.outbound.http_sender` so that the decision cores that read them
(:mod:`horae.outbound.retry_decision`, the dispatcher's conclusion) never import ``aiohttp``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class SendResult(StrEnum):
    """How an attempt ended, as far as the transport can tell."""

    OK = "ok"  # 2xx
    HTTP_ERROR = "http_error"  # 4xx/5xx (and 1xx oddities)
    REDIRECT_REFUSED = "redirect_refused"  # 3xx, not followed
    REFUSED_SSRF = "refused_ssrf"  # the address policy said no; nothing sent
    DNS_ERROR = "dns_error"  # the name did not resolve (or not within the deadline)
    TIMEOUT_CONNECT = "timeout_connect"  # no connection within the limit; nothing sent
    CONNECTION_ERROR = "connection_error"  # could not connect (refused, unreachable)
    TLS_ERROR = "tls_error"  # handshake or certificate failure; nothing sent
    TIMEOUT_READ = "timeout_read"  # connected, sent (maybe), no answer in time
    CONNECTION_LOST = "connection_lost"  # connected, then dropped before an answer
    PROTOCOL_ERROR = "protocol_error"  # the answer was not valid HTTP


class Outcome(StrEnum):
    """What the target saw. ``unknown``: the request may or may not have been processed."""

    DELIVERED = "delivered"
    REJECTED = "rejected"
    NOT_SENT = "not_sent"
    UNKNOWN = "unknown"


_UNKNOWN_RESULTS = {
    SendResult.TIMEOUT_READ,
    SendResult.CONNECTION_LOST,
    SendResult.PROTOCOL_ERROR,
}


@dataclass(frozen=True, slots=True)
class AttemptResult:
    """The record of one attempt. ``duration_s`` spans resolution to the last byte read;
    ``peer`` is the address actually connected to (when known)."""

    send_result: SendResult
    status: int | None = None
    duration_s: float = 0.0
    retry_after_s: float | None = None
    body_excerpt: bytes = b""
    body_truncated: bool = False
    detail: str = ""
    peer: str | None = None

    @property
    def outcome(self) -> Outcome:
        """Delivered (2xx), rejected (any other answer), not sent, or unknown."""
        if self.send_result is SendResult.OK:
            return Outcome.DELIVERED
        if self.status is not None:
            return Outcome.REJECTED
        if self.send_result in _UNKNOWN_RESULTS:
            return Outcome.UNKNOWN
        return Outcome.NOT_SENT
