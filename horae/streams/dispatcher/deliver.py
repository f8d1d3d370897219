"""One attempt of one order: sign and send it (the I/O around :func:`.conclude.conclude`).

:func:`attempt_once` makes the call through an :class:`~horae.ports.HttpSender` and reports what
it did as a :class:`~.conclude.Sent`; the verdict and the records are the pure core's.

An order the sender cannot send — it raises :class:`~horae.outbound.sendable.Unsendable` (a
``target.method`` that is not an HTTP method, a tenant header with a line break or a NUL), or any
other ``ValueError`` refusing the request itself — is no transport failure and would fail the
same way on every attempt: it is reported as not sent (``not_sent`` ``unsendable``, the cause
naming the part and why), which concludes the fire ``failed`` with its attempt record, outcome,
``schedule.failed`` event and a DLQ entry, and the lane partition moves on.

An attempt that crashes inside the dispatcher (any other exception out of the send path) is
tried again by the worker a few times; the last time, :func:`crashed` reports it the same way,
its cause naming the exception (``unsendable: dispatcher error on 3 tries: ...``).
"""

from __future__ import annotations

import logging

from horae.contracts import events as ev
from horae.contracts.ingress import forbidden_header
from horae.outbound import attempt_headers, issue_token
from horae.outbound.envelope import webhook_body
from horae.outbound.sendable import Unsendable
from horae.ports import SYSTEM_CLOCK, Clock, HttpSender
from horae.streams.dispatcher.conclude import Sent
from horae.streams.dispatcher.config import DispatcherConfig
from horae.streams.dispatcher.records import UNSENDABLE

log = logging.getLogger(__name__)

NO_SECRET = "no signing secret: none of the target's secret_refs is configured"
NO_URL = "the webhook target has no URL"


async def attempt_once(
    order: ev.DispatchOrder,
    config: DispatcherConfig,
    sender: HttpSender,
    clock: Clock = SYSTEM_CLOCK,
) -> Sent:
    """Sign and send attempt ``order.attempt``: the fire key is the ``Idempotency-Key`` and
    ``webhook-id`` of every attempt, and a callback token scoped to this attempt travels along.
    The body is :func:`~horae.outbound.envelope.webhook_body`'s (the JSON envelope, or the raw
    payload). The signing secrets are the fire's own tenant's; tenant headers that ingress refuses
    (:func:`~horae.contracts.ingress.forbidden_header`) are dropped here too."""
    fire = order.fire
    now = clock.now()
    started_ms = int(now * 1000)
    keys = config.signing_keys(fire.tenant, order.target.secret_refs)
    if keys is None:
        return Sent(None, started_ms, started_ms, NO_SECRET, ev.NotSent.NO_SECRET)
    if not order.target.url:
        return Sent(None, started_ms, started_ms, NO_URL, ev.NotSent.NO_URL)
    token = issue_token(
        tenant=fire.tenant,
        trigger=fire.trigger_id,
        fire_key=fire.fire_key,
        attempt=order.attempt,
        now=now,
        ttl_s=config.callback_ttl_s,
        secret=config.callback_secret,
        tzdata=fire.tzdata_version,
    )
    body, content_type = webhook_body(order)
    headers = {k: v for k, v in order.target.headers.items() if not forbidden_header(k)}
    headers.update(
        attempt_headers(
            body=body,
            fire_key=fire.fire_key,
            keys=keys,
            now=now,
            callback_token=token,
            content_type=content_type,
        )
    )
    try:
        result = await sender.send(
            order.target.url,
            body,
            headers,
            method=order.target.method or "POST",
            timeout_s=order.target.timeout_ms / 1000,
        )
    except ValueError as exc:  # the request itself is refused: see the module docstring
        cause = unsendable_cause(exc)
        log.warning("%s cannot be sent, failing the fire: %s", fire.fire_key, cause)
        return Sent(None, started_ms, int(clock.now() * 1000), cause, UNSENDABLE)
    return Sent(result, started_ms, int(clock.now() * 1000))


def crashed(exc: Exception, tries: int, started_ms: int, ended_ms: int) -> Sent:
    """What an attempt that crashed inside the dispatcher on its ``tries``-th try reports: not
    sent, ``unsendable``, the exception as its cause (it would fail the same way again)."""
    cause = f"unsendable: dispatcher error on {tries} tries: {type(exc).__name__}: {exc}"
    return Sent(None, started_ms, max(started_ms, ended_ms), cause[:2000], UNSENDABLE)


def unsendable_cause(exc: ValueError) -> str:
    """The cause an unsendable order's attempt and outcome carry."""
    if isinstance(exc, Unsendable):
        return f"unsendable: target.{exc.part}: {exc.reason}"
    return f"unsendable: {type(exc).__name__}: {exc}"
