"""The breaker under the ACLs we ship: a planner and a dispatcher, each a ``horae`` process logged
in as its own role user (``role_env``), a trigger whose every fire fails. After N consecutive
failed fires the dispatcher writes a platform-signed ``pause`` command and ``schedule.failed``;
the planner pauses the trigger (``schedule.paused`` with the breaker's cause, no more fires); the
dispatcher goes on committing other orders and stops within its drain deadline on SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from aiohttp import web

from horae.contracts import events as ev
from horae.contracts import signing
from horae.contracts.topics import Topic
from tests.integration.dispatcher.support import (
    PLATFORM_KEY,
    SECRET,
    SECRET_REF,
    TENANT,
    TENANT_KEY,
    TENANT_KEY_ID,
    DispatchEnv,
    Receiver,
    events,
    order,
)
from tests.net import kill_all
from tests.waiting import wait_until

THRESHOLD = 3
#: what a SIGTERMed dispatcher may take: its drain deadline (the attempt deadline, 30 s by
#: default, here 5 s) and a few seconds to leave the group and close
STOP_WITHIN_S = 15.0


@pytest.fixture
def env(kafka_bootstrap: str, topic_prefix: str) -> Iterator[DispatchEnv]:
    e = DispatchEnv(kafka_bootstrap, topic_prefix)
    e.setup()
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
        recurrence=ev.Recurrence(kind=ev.RecurrenceKind.CRON, expr="* * * * * *"),
        target=ev.Target(kind=ev.TargetKind.WEBHOOK, url=url, secret_refs=(SECRET_REF,)),
        authored_at=datetime.now(UTC).replace(microsecond=0),
        author="tester",
    )
    return signing.sign(d, TENANT_KEY_ID, TENANT_KEY)


def planner(env: DispatchEnv, role_env: dict[str, dict[str, str]]) -> subprocess.Popen[bytes]:
    process_env = dict(
        os.environ,
        HORAE_KAFKA_BOOTSTRAP=env.bootstrap,
        HORAE_TOPIC_PREFIX=env.prefix,
        HORAE_TENANT_KEYS=json.dumps({TENANT: {TENANT_KEY_ID: TENANT_KEY.decode()}}),
        HORAE_PLATFORM_KEY=PLATFORM_KEY.decode(),
        HORAE_DISPATCHER_WEBHOOK_SECRETS=json.dumps({TENANT: {SECRET_REF: SECRET}}),
        HORAE_MIN_INTERVAL_S="1",
        HORAE_PLANNER_TICK_S="0.2",
        HORAE_PLANNER_SLOT="p1",
        HORAE_PLANNER_SESSION_TIMEOUT_MS="6000",
        HORAE_LOG_LEVEL="WARNING",
        **role_env["planner"],
    )
    proc = subprocess.Popen([sys.executable, "-m", "horae.cli.main", "planner"], env=process_env)
    env.processes.append(proc)
    return proc


def test_a_trip_pauses_the_trigger_and_the_dispatcher_goes_on_under_role_users(
    env: DispatchEnv, role_env: dict[str, dict[str, str]]
) -> None:
    receiver = Receiver(behaviour=refuse)
    receiver.start()
    try:
        env.put_definition(definition(receiver.url("/broken")))
        planner(env, role_env)
        dispatcher = env.spawn(
            "a",
            {
                **role_env["dispatcher"],
                "HORAE_PLATFORM_KEY": PLATFORM_KEY.decode(),
                "HORAE_DISPATCHER_BREAKER_THRESHOLD": str(THRESHOLD),
                "HORAE_DISPATCHER_DEADLINE_S": "5",
            },
        )
        events_topic = env.topic(Topic.SCHEDULE_EVENTS)

        def published(kind: str) -> list[ev.ScheduleEvent]:
            found = events(env.bootstrap, events_topic, ev.ScheduleEvent)
            return [e for e in found if e.type == kind and e.fire_key is None]

        def why() -> str:
            found = events(env.bootstrap, env.topic(Topic.QUARANTINE), ev.Quarantined)
            return f"not paused; {len(receiver.keys())} calls received, quarantined: {found}"

        wait_until(lambda: published("schedule.paused"), 90, 0.5, why)
        # every fire of the trigger failed: no more than the ones decided before the pause
        broken = len(receiver.keys())
        assert broken >= THRESHOLD
        # the dispatcher still commits: an order of another trigger is delivered and recorded
        fine = order(receiver.url("/fine"), int(time.time()) - 5, trigger="other")
        env.produce_orders([fine])
        attempts = env.topic(Topic.ATTEMPTS)

        def recorded() -> bool:
            return any(
                a.fire_key == fine.fire.fire_key
                for a in events(env.bootstrap, attempts, ev.Attempt)
            )

        wait_until(recorded, 30, 0.3, "the dispatcher stopped committing after the trip")
        started = time.monotonic()
        dispatcher.send_signal(signal.SIGTERM)
        dispatcher.wait(STOP_WITHIN_S + 30)
        took = time.monotonic() - started
        assert took < STOP_WITHIN_S, f"the dispatcher took {took:.1f} s to stop"
        assert dispatcher.returncode == 0
    finally:
        kill_all(env.processes)
        receiver.stop()
    paused = published("schedule.paused")
    assert len(paused) == 1 and "breaker: 3 consecutive failed fires" in (paused[0].cause or "")
    failed = published("schedule.failed")
    assert len(failed) == 1 and (failed[0].cause or "").startswith("breaker: 3 consecutive")
    # the pause is a platform-signed command on `commands`; the ingress topic holds only the
    # tenant's own version
    commands = events(env.bootstrap, env.topic(Topic.COMMANDS), ev.Command)
    assert [c.kind for c in commands] == [ev.CommandKind.PAUSE]
    assert commands[0].role is ev.Role.PLATFORM
    assert signing.check(commands[0], {"horae-platform": PLATFORM_KEY}) is None
    assert len(events(env.bootstrap, env.topic(Topic.DEFINITIONS), ev.TriggerDefinition)) == 1
