"""The paths that touch a topic beside the main ones, under the ACLs we ship: a planner and a
dispatcher, each a ``horae`` process logged in as its own role user (``role_env``).

- The breaker: a trigger whose every fire fails. After N consecutive failed fires the dispatcher
  writes a platform-signed ``pause`` command and ``schedule.failed``; the planner pauses the
  trigger (``schedule.paused`` with the breaker's cause); the dispatcher goes on committing other
  orders and stops within its drain deadline on SIGTERM.
- The planner's snapshots, the dispatcher's outcome callbacks, and ``horae dlq list`` /
  ``redrive`` run as the dispatcher user."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import replace
from datetime import UTC, datetime

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
    read_all,
)
from tests.net import free_ports, kill_all
from tests.waiting import wait_until

THRESHOLD = 3
#: what a SIGTERMed dispatcher may take: its drain deadline (the attempt deadline, 30 s by
#: default, here 5 s) and a few seconds to leave the group and close
STOP_WITHIN_S = 15.0


def refuse(path: str, n: int) -> web.Response | None:
    """``/broken``: a final refusal (the fire fails); ``/busy``: a retryable one (with one attempt
    allowed the fire is exhausted, and dead-lettered)."""
    return web.Response(status={"/broken": 410, "/busy": 503}[path]) if path != "/fine" else None


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


def planner(
    env: DispatchEnv, role_env: dict[str, dict[str, str]], **extra: str
) -> subprocess.Popen[bytes]:
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
        **extra,
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


def dispatcher_env(env: DispatchEnv, role_env: dict[str, dict[str, str]]) -> dict[str, str]:
    return dict(
        os.environ,
        HORAE_KAFKA_BOOTSTRAP=env.bootstrap,
        HORAE_TOPIC_PREFIX=env.prefix,
        HORAE_LOG_LEVEL="WARNING",
        **role_env["dispatcher"],
    )


def callback(port: int, token: str) -> int:
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/outcomes",
        data=json.dumps({"state": "succeeded"}).encode(),
        headers={"Content-Type": "application/json", "Horae-Callback-Token": token},
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        return int(resp.status)


def test_snapshots_callbacks_and_redrive_work_as_role_users(
    env: DispatchEnv, role_env: dict[str, dict[str, str]]
) -> None:
    receiver = Receiver(behaviour=refuse)
    receiver.start()
    (port,) = free_ports(1)
    try:
        fine = replace(definition(receiver.url("/fine")), trigger_id="fine")
        env.put_definition(signing.sign(fine, TENANT_KEY_ID, TENANT_KEY))
        planner(env, role_env, HORAE_PLANNER_SNAPSHOT_CHANGES="1")
        env.spawn("a", {**role_env["dispatcher"], "HORAE_DISPATCHER_CALLBACK_PORT": str(port)})
        broken = order(
            receiver.url("/busy"),
            int(time.time()) - 5,
            trigger="dead",
            retry=ev.RetryPolicy(max_attempts=1),
        )
        env.produce_orders([broken])
        wait_until(lambda: [h for h in receiver.hits if h.path == "/fine"], 60, 0.2, "no fire")
        token = next(h.attempt_token for h in receiver.hits if h.path == "/fine")
        assert callback(port, token) == 202  # the dispatcher user writes outcomes

        def by_callback() -> list[ev.WorkOutcome]:
            found = events(env.bootstrap, env.topic(Topic.OUTCOMES), ev.WorkOutcome)
            return [w for w in found if w.source == ev.OutcomeSource.CALLBACK]

        wait_until(by_callback, 30, 0.3, "the callback's outcome was not written")
        snapshots = f"{env.prefix}planner-snapshots"
        wait_until(lambda: read_all(env.bootstrap, snapshots), 60, 0.5, "no snapshot")
        wait_until(lambda: events(env.bootstrap, env.topic(Topic.DLQ), ev.DispatchOrder), 60, 0.3)
        cli = [sys.executable, "-m", "horae.cli.main", "dlq"]
        listed = subprocess.run(
            [*cli, "list", "--trigger", "dead"],
            env=dispatcher_env(env, role_env),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert listed.returncode == 0, listed.stderr
        assert json.loads(listed.stdout.splitlines()[0])["fire_key"] == broken.fire.fire_key
        redriven = subprocess.run(
            [*cli, "redrive", "--fire-key", broken.fire.fire_key],
            env=dispatcher_env(env, role_env),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert redriven.returncode == 0 and "redriven: 1" in redriven.stdout, redriven.stderr
        wait_until(
            lambda: len([h for h in receiver.hits if h.key == broken.fire.fire_key]) == 2,
            60, 0.2, "the redriven fire was not sent again",
        )  # fmt: skip
    finally:
        kill_all(env.processes)
        receiver.stop()
    audit = events(env.bootstrap, env.topic(Topic.AUDIT), ev.AuditEntry)
    assert [(a.action, a.principal) for a in audit] == [("dlq.redrive", "dispatcher")]
