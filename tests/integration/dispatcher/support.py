"""Test support for the dispatcher: topics under a unique prefix, a local receiver (aiohttp on
127.0.0.1, in a thread), DispatchOrders produced straight to the lanes, dispatchers in threads or
subprocesses, and read_committed views of the output topics."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from aiohttp import web
from confluent_kafka import Producer

from horae.contracts import events as ev
from horae.contracts.codec import decode, encode
from horae.contracts.grants import Grants, TenantGrant
from horae.contracts.topics import (
    PRODUCER_DEFAULTS,
    Topic,
    events_topic,
    fire_partition,
    lane_topic,
    topic_name,
)
from horae.domain.keys import FireKey, Origin
from horae.kafka.admin import Plan, admin_client, apply
from horae.kafka.config import client_config
from horae.streams.dispatcher.config import DispatcherConfig
from horae.streams.dispatcher.worker import Dispatcher
from tests.integration.topic_reader import Record, read_committed
from tests.net import kill_all

PARTITIONS = 3
TENANT = "acme"
SECRET_REF = "acme-hook"
SECRET = "whsec_" + base64.b64encode(b"acme-webhook-secret-123").decode()
PLATFORM_KEY = b"platform-secret"
TENANT_KEY_ID, TENANT_KEY = "acme-1", b"acme-secret"
CALLBACK_SECRET = b"callback-secret"
# The loop the dispatchers under test send on (in-process and spawned alike): the settings'
# default, uvloop; HORAE_DISPATCHER_EVENT_LOOP=asyncio runs the same tests on asyncio's loop.
EVENT_LOOP = os.environ.get("HORAE_DISPATCHER_EVENT_LOOP", "uvloop")
# The HTTP client they send with: the default, lean; HORAE_DISPATCHER_HTTP_CLIENT=aiohttp runs the
# same tests with aiohttp's.
HTTP_CLIENT = os.environ.get("HORAE_DISPATCHER_HTTP_CLIENT", "lean")


@dataclass
class Hit:
    path: str
    key: str
    attempt_token: str
    at: float
    headers: dict[str, str]
    body: bytes


Behaviour = Callable[[str, int], web.Response | None]
"""``(path, n-th hit of this key) -> response`` (None: 200)."""


@dataclass
class Receiver:
    """A local webhook target. ``behaviour`` decides each answer; ``delay_s`` slows every one."""

    behaviour: Behaviour | None = None
    delay_s: float = 0.0
    hits: list[Hit] = field(default_factory=list)
    port: int = 0
    active: int = 0  # calls being answered now
    peak: int = 0  # most calls answered at once
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None
    _stopped: asyncio.Event | None = None

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    async def _handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        key = request.headers.get("Idempotency-Key", "")
        with self._lock:
            self.active += 1
            self.peak = max(self.peak, self.active)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        with self._lock:
            self.active -= 1
            n = sum(1 for h in self.hits if h.key == key) + 1
            self.hits.append(
                Hit(
                    request.path,
                    key,
                    request.headers.get("Horae-Callback-Token", ""),
                    time.time(),
                    dict(request.headers),
                    body,
                )
            )
        answer = self.behaviour(request.path, n) if self.behaviour else None
        return answer or web.Response(text="ok")

    def start(self) -> None:
        ready = threading.Event()

        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._stopped = asyncio.Event()
            app = web.Application()
            app.router.add_route("*", "/{tail:.*}", self._handle)
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0, backlog=1024)
            await site.start()
            self.port = runner.addresses[0][1]
            ready.set()
            await self._stopped.wait()
            await runner.cleanup()

        self._thread = threading.Thread(target=lambda: asyncio.run(main()), daemon=True)
        self._thread.start()
        assert ready.wait(30)

    def stop(self) -> None:
        if self._loop is not None and self._stopped is not None:
            self._loop.call_soon_threadsafe(self._stopped.set)
        if self._thread is not None:
            self._thread.join(30)

    def keys(self) -> list[str]:
        with self._lock:
            return [h.key for h in self.hits]

    def distinct(self) -> set[str]:
        return set(self.keys())


def order(
    url: str,
    instant: int,
    *,
    trigger: str = "t1",
    lane: ev.Lane = ev.Lane.ON_TIME,
    retry: ev.RetryPolicy | None = None,
    deadline: datetime | None = None,
    not_before: datetime | None = None,
    origin: Origin = Origin.SCHEDULED,
    version: int = 1,
) -> ev.DispatchOrder:
    key = FireKey(TENANT, trigger, instant, 0, origin)
    scheduled = datetime.fromtimestamp(instant, UTC)
    fire = ev.FireRecord(
        fire_key=key.canonical(),
        key_hash=key.short_hash(),
        tenant=TENANT,
        trigger_id=trigger,
        origin=origin,
        scheduled_at=scheduled,
        sequence=0,
        jitter_ms=0,
        due_at=scheduled,
        decided_at=scheduled,
        state=ev.FireState.FIRED,
        trigger_version=version,
        tzdata_version="2025a",
        target_kind=ev.TargetKind.WEBHOOK,
        lane=lane,
    )
    target = ev.Target(kind=ev.TargetKind.WEBHOOK, url=url, secret_refs=(SECRET_REF,))
    return ev.DispatchOrder(
        fire=fire,
        target=target,
        lane=lane,
        attempt=1,
        not_before=not_before or scheduled,
        retry=retry or ev.RetryPolicy(max_attempts=3, base_s=0.05, max_s=0.2),
        payload=json.dumps({"instant": instant, "trigger": trigger}).encode(),
        deadline=deadline,
    )


@dataclass
class DispatchEnv:
    bootstrap: str
    prefix: str
    producer: Producer | None = None
    workers: list[tuple[Dispatcher, threading.Event, threading.Thread]] = field(
        default_factory=list
    )
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def setup(self) -> None:
        apply(admin_client(self.bootstrap), Plan(self.prefix, PARTITIONS, 1, (TENANT,)))
        self.producer = Producer(client_config(self.bootstrap, PRODUCER_DEFAULTS))

    def topic(self, t: Topic) -> str:
        if t is Topic.SCHEDULE_EVENTS:  # the tenant's own events topic
            return events_topic(TENANT, self.prefix)
        return topic_name(t, self.prefix)

    def produce_orders(self, orders: list[ev.DispatchOrder]) -> None:
        assert self.producer is not None
        for o in orders:
            p = fire_partition(o.fire.tenant, o.fire.trigger_id, PARTITIONS)
            self.producer.produce(
                self.topic(lane_topic(o.lane)),
                key=o.fire.fire_key.encode(),
                value=encode(o),
                partition=p,
            )
            self.producer.poll(0)
        assert self.producer.flush(30) == 0

    def put_definition(self, d: ev.TriggerDefinition) -> None:
        assert self.producer is not None
        key = ev.trigger_key(d.tenant, d.trigger_id)
        p = fire_partition(d.tenant, d.trigger_id, PARTITIONS)
        self.producer.produce(
            self.topic(Topic.DEFINITIONS), key=key.encode(), value=encode(d), partition=p
        )
        assert self.producer.flush(30) == 0

    def config(self, slot: str = "a", **overrides: Any) -> DispatcherConfig:
        base = DispatcherConfig(
            bootstrap=self.bootstrap,
            prefix=self.prefix,
            slot=slot,
            allow=("127.0.0.1/32",),
            grants=Grants(default=TenantGrant(dispatch_per_s=10_000, max_concurrency=128)),
            webhook_secrets={TENANT: {SECRET_REF: SECRET}},
            callback_secret=CALLBACK_SECRET,
            platform_key=PLATFORM_KEY,
            session_timeout_ms=6000,
            event_loop=EVENT_LOOP,
            http_client=HTTP_CLIENT,
        )
        return replace(base, **overrides)

    def start(
        self, slot: str = "a", callback_port: int | None = None, **overrides: Any
    ) -> Dispatcher:
        d = Dispatcher(self.config(slot, **overrides), callback_port=callback_port)
        stop = threading.Event()
        thread = threading.Thread(target=d.run, args=(stop,), daemon=True)
        thread.start()
        assert d.ready.wait(60)
        self.workers.append((d, stop, thread))
        return d

    def stop_all(self) -> None:
        for _, stop, _ in self.workers:
            stop.set()
        for _, _, thread in self.workers:
            thread.join(90)
            assert not thread.is_alive()
        self.workers.clear()

    def spawn(self, slot: str, extra_env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        env = dict(
            os.environ,
            HORAE_KAFKA_BOOTSTRAP=self.bootstrap,
            HORAE_TOPIC_PREFIX=self.prefix,
            HORAE_TOPIC_PARTITIONS=str(PARTITIONS),
            HORAE_DISPATCHER_ALLOW=json.dumps(["127.0.0.1/32"]),
            HORAE_DISPATCHER_WEBHOOK_SECRETS=json.dumps({TENANT: {SECRET_REF: SECRET}}),
            HORAE_TENANT_GRANTS=json.dumps(
                {TENANT: {"dispatch_per_s": 10_000, "max_concurrency": 128}}
            ),
            HORAE_DISPATCHER_CALLBACK_SECRET=CALLBACK_SECRET.decode(),
            HORAE_DISPATCHER_SLOT=slot,
            HORAE_DISPATCHER_SESSION_TIMEOUT_MS="6000",
            HORAE_LOG_LEVEL="WARNING",
        )
        env.update(extra_env or {})
        proc = subprocess.Popen([sys.executable, "-m", "horae.cli.main", "dispatcher"], env=env)
        self.processes.append(proc)
        return proc

    def close(self) -> None:
        """Stop the workers and kill the processes still running (a failed test leaves them)."""
        kill_all(self.processes)
        self.stop_all()
        if self.producer is not None:
            self.producer.flush(10)


def events(bootstrap: str, topic: str, t: type[Any]) -> list[Any]:
    return [decode(v, t) for _, v, _ in read_all(bootstrap, topic) if v is not None]


def instants(n: int, start: int | None = None) -> Iterator[int]:
    base = start if start is not None else int(time.time()) - 3600
    return iter(range(base - n, base))


def in_past(seconds: float) -> datetime:
    return datetime.now(UTC) - timedelta(seconds=seconds)


def read_all(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> list[Record]:
    return read_committed(bootstrap, topic, partitions)


@contextmanager
def dispatching(dispatcher: Dispatcher) -> Iterator[Dispatcher]:
    """Run ``dispatcher`` in a thread for the duration of the block."""
    halt = threading.Event()
    thread = threading.Thread(target=dispatcher.run, args=(halt,), daemon=True)
    thread.start()
    try:
        assert dispatcher.ready.wait(60)
        yield dispatcher
    finally:
        halt.set()
        thread.join(60)
        assert not thread.is_alive(), "dispatcher did not stop"
