"""Outcome callbacks: the target reports how the *work* ended, with its attempt's token.

``POST /v1/outcomes`` with the token of the attempt (header ``Horae-Callback-Token``, or
``Authorization: Bearer <token>``) and a JSON body ``{"state": "succeeded" | "failed",
"error": "..."}``. The token (issued per attempt, scoped to tenant, trigger, fire key and attempt,
HMAC with ``HORAE_CALLBACK_SECRET``) must be valid and unexpired (``HORAE_CALLBACK_TTL_S`` after
the attempt) and unused. Answers:

- 202: accepted; a :class:`~horae.contracts.events.WorkOutcome` (``attempts`` = the token's
  attempt) is durably on the outcomes topic (key = fire key, the trigger's partition);
- 400: the body is not such a JSON object; 401: no token, forged, malformed or expired
  (``{"refused": reason}``); 409: the token was used before (replay);
- 503: the outcome could not be written (the token is spent all the same).

Replay protection is per process (:class:`~horae.dispatch.ReplayGuard`): behind a load balancer,
route callbacks to one dispatcher or share the guard's store.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from aiohttp import web
from confluent_kafka import Producer

from horae.contracts import events as ev
from horae.contracts.codec import encode
from horae.contracts.topics import PRODUCER_DEFAULTS, Topic, fire_partition, topic_name
from horae.dispatch import TokenError, verify_token
from horae.dispatch.signing import CALLBACK_TOKEN_HEADER
from horae.domain.keys import FireKey

if TYPE_CHECKING:
    from horae.streams.dispatcher.worker import Dispatcher

PATH = "/v1/outcomes"
STATES = {"succeeded": ev.OutcomeState.SUCCEEDED, "failed": ev.OutcomeState.FAILED}


def _token(request: web.Request) -> str | None:
    token = request.headers.get(CALLBACK_TOKEN_HEADER)
    if token:
        return token.strip()
    auth = request.headers.get("Authorization", "")
    return auth[7:].strip() if auth.lower().startswith("bearer ") else None


class CallbackHandler:
    """The request handler; writes outcomes with its own idempotent producer."""

    def __init__(self, dispatcher: Dispatcher) -> None:
        self.d = dispatcher
        config = dispatcher.config
        self.topic = topic_name(Topic.OUTCOMES, config.prefix)
        self.producer = Producer(
            {**PRODUCER_DEFAULTS, "bootstrap.servers": config.bootstrap, "log_level": 4}
        )
        meta = self.producer.list_topics(self.topic, timeout=30)
        self.partitions = len(meta.topics[self.topic].partitions)

    def _refuse(self, status: int, reason: str) -> web.Response:
        self.d.metrics.callbacks.labels(reason).inc()
        return web.json_response({"refused": reason}, status=status)

    async def handle(self, request: web.Request) -> web.Response:
        token = _token(request)
        if not token:
            return self._refuse(401, "no_token")
        now = self.d.clock()
        try:
            claims = verify_token(token, now, self.d.config.callback_secret)
        except TokenError as exc:
            return self._refuse(401, exc.reason)
        try:
            body: Any = json.loads(await request.read())
        except ValueError:
            return self._refuse(400, "body_not_json")
        if not isinstance(body, dict) or body.get("state") not in STATES:
            return self._refuse(400, "bad_state")
        error = body.get("error")
        try:
            self.d.replay.use(claims, now)
        except TokenError as exc:
            return self._refuse(409, exc.reason)
        key = FireKey.parse(claims.fire_key)
        outcome = ev.WorkOutcome(
            fire_key=claims.fire_key,
            key_hash=key.short_hash(),
            tenant=claims.tenant,
            trigger_id=claims.trigger,
            state=STATES[body["state"]],
            attempts=claims.attempt,
            decided_at=datetime.fromtimestamp(now, UTC),
            error=str(error)[:2000] if error is not None else None,
        )
        partition = fire_partition(claims.tenant, claims.trigger, self.partitions)
        if not await self._write(claims.fire_key, encode(outcome), partition):
            return self._refuse(503, "not_written")
        self.d.metrics.callbacks.labels("accepted").inc()
        return web.json_response({"accepted": claims.fire_key}, status=202)

    async def _write(self, key: str, value: bytes, partition: int) -> bool:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[bool] = loop.create_future()

        def settle(ok: bool) -> None:
            if not done.done():
                done.set_result(ok)

        def delivered(err: object, _msg: object) -> None:
            loop.call_soon_threadsafe(settle, err is None)

        self.producer.produce(
            self.topic, key=key.encode(), value=value, partition=partition, on_delivery=delivered
        )
        await asyncio.to_thread(self.producer.flush, 30)
        return await done

    def close(self) -> None:
        self.producer.flush(10)


async def start_callback_server(
    dispatcher: Dispatcher, host: str, port: int
) -> tuple[web.AppRunner, int]:
    """Start the callback server; the runner (``cleanup()`` stops it) and the bound port."""
    handler = CallbackHandler(dispatcher)
    app = web.Application(client_max_size=1 << 16)
    app.router.add_post(PATH, handler.handle)

    async def close(_app: web.Application) -> None:
        await asyncio.to_thread(handler.close)

    app.on_cleanup.append(close)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = runner.addresses[0][1] if runner.addresses else port
    return runner, int(bound)
