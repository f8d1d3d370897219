"""The breaker: N consecutive failed fires of a trigger write a new, platform-signed version of
its definition with state paused and the cause, and ``schedule.failed``; a planner configured with
the settings' tenant keys (which hold the platform key) accepts it and pauses the trigger."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from aiohttp import web
from pydantic import SecretStr

from horae.contracts import events as ev
from horae.contracts import signing
from horae.contracts.topics import Topic
from horae.settings import Settings
from horae.streams.planner.clock import ensure_clock_topic
from horae.streams.planner.worker import Planner, PlannerConfig
from tests.integration.dispatcher.support import (
    PLATFORM_KEY,
    TENANT,
    TENANT_KEY,
    TENANT_KEY_ID,
    DispatchEnv,
    Receiver,
    events,
    order,
)
from tests.waiting import wait_until

THRESHOLD = 3


@pytest.fixture
def env(kafka_bootstrap: str, topic_prefix: str) -> Iterator[DispatchEnv]:
    e = DispatchEnv(kafka_bootstrap, topic_prefix)
    e.setup()
    ensure_clock_topic(kafka_bootstrap, e.prefix)
    try:
        yield e
    finally:
        e.close()


def refuse(path: str, n: int) -> web.Response | None:
    return web.Response(status=410) if path == "/broken" else None


def definition(url: str) -> ev.TriggerDefinition:
    d = ev.TriggerDefinition(
        tenant=TENANT,
        trigger_id="brk",
        version=1,
        state=ev.DefinitionState.LIVE,
        recurrence=ev.Recurrence(kind=ev.RecurrenceKind.CRON, expr="0 0 1 1 *"),
        target=ev.Target(kind=ev.TargetKind.WEBHOOK, url=url, secret_refs=("acme-hook",)),
        authored_at=datetime.now(UTC).replace(microsecond=0),
        author="tester",
    )
    return signing.sign(d, TENANT_KEY_ID, TENANT_KEY)


def test_consecutive_failed_fires_pause_the_trigger_and_the_planner_obeys(
    env: DispatchEnv,
) -> None:
    receiver = Receiver(behaviour=refuse)
    receiver.start()
    # the settings merge the platform key into every tenant's map: that is what planners get
    settings = Settings(
        tenant_keys={TENANT: {TENANT_KEY_ID: SecretStr(TENANT_KEY.decode())}},
        platform_key=SecretStr(PLATFORM_KEY.decode()),
    )
    planner = Planner(
        PlannerConfig(
            env.bootstrap,
            env.prefix,
            "p1",
            tick_s=0.2,
            session_timeout_ms=6000,
            tenant_keys=settings.tenant_key_bytes(),
            min_interval_s=1,
        )
    )
    stop = threading.Event()
    thread = threading.Thread(target=planner.run, args=(stop,), daemon=True)
    try:
        env.put_definition(definition(receiver.url("/broken")))
        thread.start()
        now = int(time.time())
        # a success first, then THRESHOLD failed fires in a row (fires of one trigger go in order)
        ok = order(receiver.url("/fine"), now - 100, trigger="brk")
        failing = [order(receiver.url("/broken"), now - 90 + i, trigger="brk") for i in range(3)]
        env.produce_orders([ok])
        env.start(breaker_threshold=THRESHOLD)
        wait_until(lambda: len(receiver.keys()) == 1)
        env.produce_orders(failing)
        defs_topic = env.topic(Topic.DEFINITIONS)

        def paused_version() -> ev.TriggerDefinition | None:
            found = [d for d in events(env.bootstrap, defs_topic, ev.TriggerDefinition)]
            return next((d for d in found if d.version == 2), None)

        wait_until(lambda: paused_version() is not None, 60, 0.5)
        events_topic = env.topic(Topic.SCHEDULE_EVENTS)

        def planner_paused() -> bool:
            found = events(env.bootstrap, events_topic, ev.ScheduleEvent)
            return any(e.type == "schedule.paused" and e.trigger_version == 2 for e in found)

        wait_until(planner_paused, 60, 0.5)
    finally:
        stop.set()
        thread.join(60)
        env.stop_all()
        receiver.stop()
    paused = paused_version()
    assert paused is not None
    assert paused.state is ev.DefinitionState.PAUSED and paused.role is ev.Role.PLATFORM
    assert paused.signature is not None and paused.signature.key_id == "horae-platform"
    assert signing.check(paused, {"horae-platform": PLATFORM_KEY}) is None
    assert paused.labels["horae.paused_by"] == "breaker"
    assert "3 consecutive failed fires" in paused.labels["horae.pause_cause"]
    assert paused.target == definition(receiver.url("/broken")).target
    published = events(env.bootstrap, events_topic, ev.ScheduleEvent)
    failed = [e for e in published if e.type == "schedule.failed" and e.fire_key is None]
    assert len(failed) == 1 and (failed[0].cause or "").startswith("breaker: 3 consecutive")
    assert planner_paused()
    assert len([d for d in events(env.bootstrap, defs_topic, ev.TriggerDefinition)]) == 2
