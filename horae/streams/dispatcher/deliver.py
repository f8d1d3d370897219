"""One attempt of one order: sign and send it (the I/O around :func:`.conclude.conclude`).

:func:`attempt_once` asks the order's target kind (:mod:`horae.delivery.table`) what the attempt
calls, makes the call through an :class:`~horae.ports.HttpSender` and reports what it did as a
:class:`~.conclude.Sent`; the verdict and the records are the pure core's. An order its kind
does not send (no URL; a kind that is not dispatched, e.g. a newer planner's read as ``event``)
is not sent, with its kind's reason.

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
from horae.delivery.port import NotCalled
from horae.delivery.table import deliverer
from horae.outbound import attempt_headers, issue_token
from horae.outbound.oidc import default_audience
from horae.outbound.sendable import Unsendable
from horae.ports import SYSTEM_CLOCK, Clock, HttpSender
from horae.streams.dispatcher.conclude import Sent
from horae.streams.dispatcher.config import DispatcherConfig
from horae.streams.dispatcher.records import UNSENDABLE

log = logging.getLogger(__name__)

NO_SECRET = "no signing secret: none of the target's secret_refs is configured"
NO_OIDC_KEY = (
    "no OIDC signing key: the target asks for an identity token (target.oidc) and this "
    "dispatcher has no issuer, or no key that signs now (HORAE_OIDC_ISSUER, HORAE_OIDC_KEYS_DIR)"
)
UNSIGNED = "unsendable: the target's kind is dispatched unsigned, and nothing unsigned is sent"


async def attempt_once(
    order: ev.DispatchOrder,
    config: DispatcherConfig,
    sender: HttpSender,
    clock: Clock = SYSTEM_CLOCK,
) -> Sent:
    """Sign and send attempt ``order.attempt``: what it calls (URL, method, body, timeout) is its
    target kind's :meth:`~horae.delivery.port.Deliverer.call`; the fire key is the
    ``Idempotency-Key`` and ``webhook-id`` of every attempt, and a callback token scoped to this
    attempt travels along. The signing secrets are the fire's own tenant's (every dispatched kind
    is signed); tenant headers that ingress refuses
    (:func:`~horae.contracts.ingress.forbidden_header`) are dropped here too. A target with
    ``target.oidc`` also gets ``Authorization: Bearer <identity token>``, minted for this attempt
    (:mod:`horae.outbound.oidc`), or the attempt is not sent (``no_oidc_key``)."""
    fire = order.fire
    now = clock.now()
    started_ms = int(now * 1000)
    kind = deliverer(order.target.kind)
    keys = config.signing_keys(fire.tenant, order.target.secret_refs)
    if keys is None and kind.signed:
        return Sent(None, started_ms, started_ms, NO_SECRET, ev.NotSent.NO_SECRET)
    call = kind.call(order)
    if isinstance(call, NotCalled):
        if call.not_sent == UNSENDABLE:
            log.warning("%s cannot be sent, failing the fire: %s", fire.fire_key, call.cause)
        return Sent(None, started_ms, started_ms, call.cause, call.not_sent)
    if keys is None:  # a kind's row says it is unsigned, but nothing unsigned leaves
        return Sent(None, started_ms, started_ms, UNSIGNED, UNSENDABLE)
    bearer: str | None = None
    if order.target.oidc is not None and config.oidc is not None:
        bearer = config.oidc.token(
            tenant=fire.tenant,
            trigger_id=fire.trigger_id,
            fire_key=fire.fire_key,
            attempt=order.attempt,
            audience=order.target.oidc.audience or default_audience(call.url),
            now=now,
            timeout_s=min(call.timeout_s, config.sender.deadline_s),
        )
    if order.target.oidc is not None and bearer is None:
        return Sent(None, started_ms, started_ms, NO_OIDC_KEY, ev.NotSent.NO_OIDC_KEY)
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
    headers = {k: v for k, v in order.target.headers.items() if not forbidden_header(k)}
    headers.update(
        attempt_headers(
            body=call.body,
            fire_key=fire.fire_key,
            keys=keys,
            now=now,
            callback_token=token,
            content_type=call.content_type,
        )
    )
    if bearer is not None:  # replaces any Authorization of the tenant's (ingress refuses one)
        for name in [h for h in headers if h.lower() == "authorization"]:
            del headers[name]
        headers["Authorization"] = f"Bearer {bearer}"
    try:
        result = await sender.send(
            call.url, call.body, headers, method=call.method, timeout_s=call.timeout_s
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
