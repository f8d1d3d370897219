"""An order no HTTP sender can send (pure and in memory): the senders refuse it before resolving
or connecting, and the dispatcher concludes it at once as a failed fire, with its attempt record
(``not_sent`` ``unsendable``, the part and the reason), outcome, event and DLQ entry."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import replace

import pytest

from horae.contracts import events as ev
from horae.contracts.topics import Topic
from horae.outbound import AddressPolicy
from horae.outbound.http_sender import HttpSender, SenderConfig
from horae.outbound.lean_http import LeanHttpSender
from horae.outbound.results import AttemptResult
from horae.outbound.sendable import Unsendable, check_sendable
from horae.streams.dispatcher.conclude import H_DLQ_CAUSE, conclude
from horae.streams.dispatcher.deliver import attempt_once
from horae.streams.dispatcher.records import UNSENDABLE, OrderHeaders, Verdict
from horae.testing import StaticResolver, VirtualClock
from tests.unit.dispatcher.test_send_path import CONFIG, ROUTER, T0, first_order

BAD = [
    ("GE T", {}, "method"),
    ("", {}, "method"),
    ("POST\r\nX-Injected: 1", {}, "method"),
    ("POST", {"X-Evil": "a\r\nInjected: 1"}, "headers['X-Evil']"),
    ("POST", {"X-Evil": "a\x00b"}, "headers['X-Evil']"),
    ("POST", {"X Evil": "a"}, "headers['X Evil']"),
    ("POST", {"": "a"}, "headers['']"),
]


@pytest.mark.parametrize(("method", "headers", "part"), BAD)
def test_what_is_not_http_is_unsendable(method: str, headers: dict[str, str], part: str) -> None:
    with pytest.raises(Unsendable) as refused:
        check_sendable(method, headers)
    assert refused.value.part == part


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE", "GET", "PROPFIND"])
def test_methods_and_values_http_allows_are_sendable(method: str) -> None:
    check_sendable(method, {"X-Tab": "a\tb", "X-Obs": "café", "Content-Type": "text/plain"})


class Refusing:
    """An HTTP sender that refuses every request as unsendable."""

    def __init__(self, error: ValueError) -> None:
        self.error = error
        self.calls = 0

    async def send(
        self,
        url: str,
        body: bytes,
        headers: Mapping[str, str],
        *,
        method: str = "POST",
        timeout_s: float | None = None,
    ) -> AttemptResult:
        self.calls += 1
        raise self.error


@pytest.mark.parametrize(
    ("error", "cause"),
    [
        (Unsendable("method", "'GE T' is not an HTTP method"), "unsendable: target.method: "),
        (ValueError("a line break in an HTTP header"), "unsendable: ValueError: a line break"),
    ],
)
def test_an_unsendable_order_concludes_failed_with_its_records_and_a_dead_letter(
    error: ValueError, cause: str
) -> None:
    order = first_order()
    sender = Refusing(error)
    sent = asyncio.run(attempt_once(order, CONFIG, sender, VirtualClock(T0)))
    assert sender.calls == 1 and sent.result is None and sent.not_sent == UNSENDABLE
    assert sent.error is not None and sent.error.startswith(cause)
    c = conclude(order, OrderHeaders(), sent, ROUTER, 2)
    assert c.verdict is Verdict.FAILED
    by_topic = {e.topic: e for e in c.emits}
    attempt = by_topic[ROUTER.names[Topic.ATTEMPTS]].event
    assert isinstance(attempt, ev.Attempt)
    assert attempt.not_sent == UNSENDABLE and attempt.error is not None
    assert attempt.error.startswith(cause) and attempt.http_status is None
    outcome = by_topic[ROUTER.names[Topic.OUTCOMES]].event
    assert isinstance(outcome, ev.WorkOutcome) and outcome.state is ev.OutcomeState.FAILED
    assert outcome.error is not None and cause in outcome.error
    event = by_topic[ROUTER.events_topic("acme")].event
    assert isinstance(event, ev.ScheduleEvent) and event.type == "schedule.failed"
    dead = by_topic[ROUTER.names[Topic.DLQ]]
    assert dead.event == order and dead.partition == 2
    assert dict(dead.headers or [])[H_DLQ_CAUSE].startswith(b"failed: final: " + cause.encode())
    assert ROUTER.names[Topic.LANE_RETRY] not in by_topic  # never retried


def test_the_other_not_sent_causes_put_nothing_on_the_dlq() -> None:
    order = first_order()
    order = replace(order, target=replace(order.target, url=None))
    sent = asyncio.run(attempt_once(order, CONFIG, Refusing(ValueError()), VirtualClock(T0)))
    assert sent.not_sent == ev.NotSent.NO_URL
    c = conclude(order, OrderHeaders(), sent, ROUTER, 0)
    assert ROUTER.names[Topic.DLQ] not in {e.topic for e in c.emits}


@pytest.mark.parametrize("kind", ["lean", "aiohttp"])
@pytest.mark.parametrize(("method", "headers", "part"), BAD[:4])
def test_both_senders_refuse_before_resolving_anything(
    kind: str, method: str, headers: dict[str, str], part: str
) -> None:
    resolver = StaticResolver({"hooks.example": ["127.0.0.1"]})
    policy = AddressPolicy(("127.0.0.1/32",), resolver)

    async def main() -> None:
        sender = (
            LeanHttpSender(policy, SenderConfig())
            if kind == "lean"
            else HttpSender(policy, SenderConfig())
        )
        await sender.start()
        try:
            with pytest.raises(Unsendable) as refused:
                await sender.send("http://hooks.example/h", b"{}", headers, method=method)
            assert refused.value.part == part
        finally:
            await sender.close()

    asyncio.run(main())
    assert resolver.asked == []
