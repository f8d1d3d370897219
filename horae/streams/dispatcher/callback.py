"""Outcome callbacks: the target reports how the *work* ended, with its attempt's token.

``POST /v1/outcomes`` with the token of the attempt (header ``Horae-Callback-Token``, or
``Authorization: Bearer <token>``) and a JSON body ``{"state": "succeeded" | "failed",
"error": "..."}``. The token (issued per attempt, scoped to tenant, trigger, fire key and attempt,
HMAC with ``HORAE_DISPATCHER_CALLBACK_SECRET``) must be valid and unexpired
(``HORAE_DISPATCHER_CALLBACK_TTL_S`` after the attempt) and unused. Answers:

- 202: accepted; a :class:`~horae.contracts.events.WorkOutcome` (``attempts`` = the token's
  attempt, ``source`` ``callback``, the fire's tzdata version from the token) is durably on the
  outcomes topic (key = fire key, the trigger's partition); the read models show it as the
  fire's outcome over the dispatcher's own (``docs/design.md``);
- 400: the body is not such a JSON object; 401: no token, forged, malformed or expired
  (``{"refused": reason}``); 409: the token was used before (replay);
- 503: the outcome could not be written (the token is spent all the same).

Replay protection is per process (:class:`~horae.outbound.ReplayGuard`): behind a load balancer,
route callbacks to one dispatcher or share the guard's store.

The handler gets everything it uses passed in (secret, clock, replay guard, metrics and an
:class:`OutcomeSink`); :class:`OutcomeWriter` is the Kafka sink. Nothing here blocks the event
loop: the writer asks for the topic's metadata when it is built (build it off the loop, e.g.
``asyncio.to_thread``), and a write awaits its delivery report, served on the writer's own thread.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol

from aiohttp import web
from confluent_kafka import KafkaException, Producer

from horae.contracts import events as ev
from horae.contracts.codec import encode
from horae.contracts.topics import PRODUCER_DEFAULTS, fire_partition
from horae.domain.keys import FireKey
from horae.kafka.config import client_config
from horae.outbound import ReplayGuard, TokenError, verify_token
from horae.outbound.signing import CALLBACK_TOKEN_HEADER
from horae.streams.dispatcher.metrics import DispatcherMetrics

log = logging.getLogger(__name__)
PATH = "/v1/outcomes"
STATES = {"succeeded": ev.OutcomeState.SUCCEEDED, "failed": ev.OutcomeState.FAILED}
WRITE_TIMEOUT_S = 30.0


class OutcomeSink(Protocol):
    """Where accepted outcomes go: a topic of ``partitions`` partitions."""

    @property
    def partitions(self) -> int: ...

    async def write(self, key: bytes, value: bytes, partition: int) -> bool:
        """Write one record; True once it is durably written, False if it could not be."""
        ...


class OutcomeWriter:
    """An idempotent producer on the outcomes topic. Building it blocks (the topic's metadata is
    asked, up to ``timeout_s``); :meth:`write` does not: it produces and awaits the record's
    delivery report, which a poller thread of the writer serves. :meth:`close` blocks."""

    def __init__(self, bootstrap: str, topic: str, timeout_s: float = WRITE_TIMEOUT_S) -> None:
        self.topic = topic
        self.timeout_s = timeout_s
        self._producer = Producer(client_config(bootstrap, {**PRODUCER_DEFAULTS, "log_level": 4}))
        meta = self._producer.list_topics(topic, timeout=timeout_s)
        self._partitions = len(meta.topics[topic].partitions)
        self._closed = threading.Event()
        self._poller = threading.Thread(target=self._poll, name="callback-writer", daemon=True)
        self._poller.start()

    @property
    def partitions(self) -> int:
        return self._partitions

    def _poll(self) -> None:
        while not self._closed.is_set():
            self._producer.poll(0.1)

    async def write(self, key: bytes, value: bytes, partition: int) -> bool:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[bool] = loop.create_future()

        def settle(ok: bool) -> None:
            if not done.done():
                done.set_result(ok)

        def delivered(err: object, _msg: object) -> None:
            if err is not None:
                log.warning("outcome %r not written: %s", key, err)
            loop.call_soon_threadsafe(settle, err is None)

        try:
            self._producer.produce(self.topic, value, key, partition, on_delivery=delivered)
        except (BufferError, KafkaException) as exc:
            log.warning("outcome %r not produced: %s", key, exc)
            return False
        try:
            return await asyncio.wait_for(done, self.timeout_s)
        except TimeoutError:
            return False

    def close(self) -> None:
        """Stop the poller and deliver what is still queued (up to 10 s)."""
        self._closed.set()
        self._poller.join()
        self._producer.flush(10)


def _token(request: web.Request) -> str | None:
    token = request.headers.get(CALLBACK_TOKEN_HEADER)
    if token:
        return token.strip()
    auth = request.headers.get("Authorization", "")
    return auth[7:].strip() if auth.lower().startswith("bearer ") else None


class CallbackHandler:
    """The request handler of ``POST /v1/outcomes`` (see the module docstring)."""

    def __init__(
        self,
        *,
        secret: bytes,
        clock: Callable[[], float],
        replay: ReplayGuard,
        metrics: DispatcherMetrics,
        sink: OutcomeSink,
    ) -> None:
        self.secret = secret
        self.clock = clock
        self.replay = replay
        self.metrics = metrics
        self.sink = sink

    def _refuse(self, status: int, reason: str) -> web.Response:
        self.metrics.callbacks.labels(reason).inc()
        return web.json_response({"refused": reason}, status=status)

    async def handle(self, request: web.Request) -> web.Response:
        token = _token(request)
        if not token:
            return self._refuse(401, "no_token")
        now = self.clock()
        try:
            claims = verify_token(token, now, self.secret)
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
            self.replay.use(claims, now)
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
            source=ev.OutcomeSource.CALLBACK,
            tzdata_version=claims.tzdata,
        )
        partition = fire_partition(claims.tenant, claims.trigger, self.sink.partitions)
        if not await self.sink.write(claims.fire_key.encode(), encode(outcome), partition):
            return self._refuse(503, "not_written")
        self.metrics.callbacks.labels("accepted").inc()
        return web.json_response({"accepted": claims.fire_key}, status=202)


async def start_callback_server(
    handler: CallbackHandler, host: str, port: int
) -> tuple[web.AppRunner, int]:
    """Serve ``handler`` on ``host:port`` (0 picks a free port); the runner (``cleanup()`` stops
    it) and the bound port. Closing the handler's sink is the caller's."""
    app = web.Application(client_max_size=1 << 16)
    app.router.add_post(PATH, handler.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = runner.addresses[0][1] if runner.addresses else port
    return runner, int(bound)
