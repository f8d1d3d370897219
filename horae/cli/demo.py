"""``horae demo``: every Horae process on the local stack, and a demo trigger you watch fire.

Starts ``horae planner``, ``horae projector``, ``horae dispatcher`` and ``horae api`` (the HTTP
API, on ``HORAE_API_PORT``; the demo prints a token and the three commands to try next) as child
processes and produces two signed demo triggers firing every 5 seconds: ``demo/heartbeat`` with
an event target (each ``schedule.triggered`` event is printed as it is committed to the demo
tenant's own topic ``<prefix>events.demo``, the only one its client reads) and
``demo/heartbeat-hook`` with a webhook target, delivered by the dispatcher to a local receiver
that checks the signature (allowlisted: loopback is otherwise refused).

It cleans up after itself. The two trigger ids are fixed and each run's versions are its start
in Unix milliseconds, so they always grow across runs (never read back from the read model,
which may not have projected the previous run's last deletion yet). On stop (Ctrl-C, SIGTERM,
SIGHUP, ``--seconds`` elapsed) both triggers are deleted (a signed ``deleted`` version) while
the planner still runs, and the demo waits up to ``CONFIRM_S`` for the read model to show it.
At start, triggers an earlier demo left live (ids ``heartbeat-<6 hex>`` and
``heartbeat-<6 hex>-hook``, made before the ids were fixed, as the read model shows them) are
deleted first, and the demo says so. The demo tenant's ingress key is ``demo/demo-1`` of
``HORAE_TENANT_KEYS`` when set (then a deletion the planner could not apply before it stopped is
applied by the next one), else a new one per run.

It supervises its processes as a deployment's supervisor would (:mod:`horae.cli.demo_supervisor`):
a planner, projector or dispatcher that exits (e.g. status 70, a transaction call that hung:
docs/guarantees.md) is started again, unless the demo is stopping or it exited ``MAX_RESTARTS``
times within a minute; the API is left stopped. Stopping is bounded: the processes get SIGTERM
and their drain deadline plus a few seconds, then what is left is killed. A second Ctrl-C kills
them at once. The stack keeps running: ``horae dev down`` stops it.
"""

from __future__ import annotations

import argparse
import base64
import json
import logging
import os
import re
import secrets
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import psycopg
from confluent_kafka import Consumer, KafkaException, Producer
from pydantic import SecretStr

from horae.api.auth import issue
from horae.cli.common import add_flags, drain_s, ensure_topics, require_services
from horae.cli.demo_receiver import DemoReceiver
from horae.cli.demo_supervisor import Supervisor
from horae.cli.projections import migrate_live
from horae.client import HoraeClient
from horae.contracts import events as ev
from horae.contracts.codec import Codec, DecodeError, default_codec
from horae.contracts.topics import PRODUCER_DEFAULTS, Topic, events_topic, topic_name
from horae.kafka.acls import provision_roles, tenant_group_prefix
from horae.kafka.config import client_config, settings_credentials
from horae.projections.queries import HistoryQueries
from horae.settings import IngressKey, Settings

TENANT = "demo"
KEY_ID = "demo-1"
EVENT_ID = "heartbeat"  # the event target's trigger
HOOK_ID = "heartbeat-hook"  # the webhook target's trigger
#: the ids earlier demos gave their triggers (a random suffix per run)
LEFTOVER_ID = re.compile(r"heartbeat-[0-9a-f]{6}(-hook)?")
MAX_RESTARTS = 5  # within a minute, per process; one more exit stops the demo
CONFIRM_S = 5.0  # how long a stop waits for the read model to show the deletions
CLOSE_S = 5.0  # how long a stop waits for the demo's own Kafka clients to close


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("demo", help="run every process and watch a demo trigger fire")
    add_flags(p, "demo")
    p.set_defaults(func=run)


def run(settings: Settings, args: argparse.Namespace) -> int:
    bootstrap, database_url = require_services(settings)
    # with the demo tenant's events topic (named once: a topic asked for twice is refused)
    ensure_topics(settings, bootstrap, () if TENANT in settings.tenant_keys else (TENANT,))
    migrate_live(settings, database_url)  # the projector role may not create its schema
    secret = _tenant_key(settings)
    whsec = "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()
    receiver = DemoReceiver(whsec)
    receiver.start()
    env = dict(
        os.environ,
        HORAE_KAFKA_BOOTSTRAP=bootstrap,
        HORAE_DATABASE_URL=database_url,
        HORAE_TENANT_KEYS=json.dumps({**_plain(settings.tenant_keys), TENANT: {KEY_ID: secret}}),
        HORAE_MIN_INTERVAL_S="1",
        HORAE_DISPATCHER_ALLOW=json.dumps(["127.0.0.1/32"]),
        HORAE_DISPATCHER_WEBHOOK_SECRETS=json.dumps({TENANT: {"demo": whsec}}),
        HORAE_DISPATCHER_CALLBACK_SECRET=secrets.token_hex(16),
        HORAE_LOG_LEVEL=settings.demo.log_level,
        **_api_env(settings),
    )
    known = _subcommands()
    names = [n for n in ("planner", "projector", "dispatcher", "api") if n in known]
    principals = _principals(settings, bootstrap)
    supervisor = Supervisor(
        names,
        lambda name: env | principals.get(name, {}),
        {name: drain_s(name, settings) for name in names},
        once=("api",),
        max_restarts=MAX_RESTARTS,
        show_kafka_logs=settings.demo.kafka_logs,
    )
    signals = 0

    def _stop(*_: object) -> None:
        nonlocal signals
        signals += 1
        if signals == 2:
            print("demo: stopping now (the processes are killed)", file=sys.stderr, flush=True)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _stop)
    stopping: Callable[[], bool] = lambda: signals > 0  # noqa: E731
    supervisor.start_all()
    print(f"demo: started {', '.join(names)} against {bootstrap}")
    if principals:
        print(f"demo: each runs as its own Kafka user ({', '.join(sorted(principals))})")
    kafka_log = _kafka_logger(settings.demo.kafka_logs)
    triggers = _Triggers(settings, bootstrap, database_url, secret, receiver.url, kafka_log)
    consumer: Consumer | None = None
    fired = 0
    try:
        triggers.delete_leftovers()
        triggers.put_live()
        print(
            f"demo: triggers {TENANT}/{EVENT_ID} (event) and {TENANT}/{HOOK_ID} "
            f"(webhook to {receiver.url}) are live, {settings.demo.expr!r} UTC:",
            flush=True,
        )
        if "api" in names:
            print(next_commands(settings, env), flush=True)
        consumer = _events_consumer(settings, bootstrap, kafka_log)
        codec = default_codec()
        deadline = time.monotonic() + settings.demo.seconds if settings.demo.seconds else None
        while not stopping() and (deadline is None or time.monotonic() < deadline):
            event = _next_event(consumer, codec, triggers.version)
            if event is not None:
                fired += 1
                print(_fired_line(event), flush=True)
            if not supervisor.check(stopping):
                break
    finally:
        if not signals > 1:
            triggers.delete_own(lambda: supervisor.alive("planner"), lambda: signals > 1)
        supervisor.stop(hurry=lambda: signals > 1)
        if consumer is not None:
            _bounded(consumer.close, CLOSE_S)
        triggers.close()
        receiver.stop()
    print(f"demo: {fired} fires seen; processes stopped (`horae dev down` stops the stack)")
    return 0 if fired else 1


class _Triggers:
    """The demo's two triggers: made live, deleted at the end, and leftovers of earlier demos
    found in the read model and deleted. Produced, signed, to the ingress topic."""

    def __init__(
        self,
        settings: Settings,
        bootstrap: str,
        database_url: str,
        secret: str,
        url: str,
        kafka_log: logging.Logger | None,
    ) -> None:
        self.version = _now_ms()
        self.database_url = database_url
        self.schema = settings.projection_schema
        self.client = HoraeClient(
            bootstrap,
            tenant=TENANT,
            key_id=KEY_ID,
            key=secret.encode(),
            prefix=settings.topic_prefix,
        )
        extra: dict[str, Any] = dict(PRODUCER_DEFAULTS)
        if kafka_log is not None:
            extra["logger"] = kafka_log
        self.producer = Producer(client_config(bootstrap, extra))
        self.event = ev.TriggerDefinition(
            tenant=TENANT,
            trigger_id=EVENT_ID,
            version=self.version,
            state=ev.DefinitionState.LIVE,
            recurrence=ev.Recurrence(kind=ev.RecurrenceKind.CRON, expr=settings.demo.expr),
            target=ev.Target(kind=ev.TargetKind.EVENT, topic=self.client.events_topic),
            authored_at=ev_now(),
            author="horae-demo",
            payload=b'{"hello": "horae"}',
        )
        self.hook = replace(
            self.event,
            trigger_id=HOOK_ID,
            payload=b'{"hello": "webhook"}',
            target=ev.Target(kind=ev.TargetKind.WEBHOOK, url=url, secret_refs=("demo",)),
        )
        self.live = False
        self.deleted_at = 0

    def put_live(self) -> None:
        self._produce([self.event, self.hook])
        self.live = True

    def delete_leftovers(self) -> None:
        """Delete what earlier demos left live (as the read model shows it), and say so."""
        try:
            rows = self._live_rows()
        except psycopg.Error as exc:
            print(f"demo: could not look for an earlier demo's triggers ({exc})", file=sys.stderr)
            return
        found = sorted(
            (r["trigger_id"], int(r["version"]))
            for r in rows
            if LEFTOVER_ID.fullmatch(r["trigger_id"])
        )
        if not found:
            return
        version = _now_ms()
        gone = [
            self._deleted(self.hook if tid.endswith("-hook") else self.event, max(version, v + 1))
            for tid, v in found
        ]
        gone = [replace(d, trigger_id=tid) for d, (tid, _) in zip(gone, found, strict=True)]
        self._produce(gone)
        names = ", ".join(f"{TENANT}/{tid}" for tid, _ in found)
        print(f"demo: deleted {len(found)} trigger(s) an earlier demo left live: {names}")

    def delete_own(self, planner_alive: Callable[[], bool], hurry: Callable[[], bool]) -> None:
        """Delete the two triggers; wait (up to :data:`CONFIRM_S`, while the planner runs) for
        the read model to show both deleted."""
        if not self.live:
            return
        version = max(_now_ms(), self.version + 1)
        try:
            self._produce([self._deleted(self.event, version), self._deleted(self.hook, version)])
        except KafkaException as exc:
            print(f"demo: deleting the demo's triggers failed ({exc})", file=sys.stderr)
            return
        ids = f"{TENANT}/{EVENT_ID} and {TENANT}/{HOOK_ID}"
        deadline = time.monotonic() + CONFIRM_S
        while planner_alive() and not hurry() and time.monotonic() < deadline:
            if self._deleted_in_read_model(version):
                print(f"demo: triggers {ids} deleted")
                return
            time.sleep(0.2)
        print(f"demo: triggers {ids} deleted (version {version}; not in the read model yet)")

    def close(self) -> None:
        _bounded(lambda: self.producer.flush(CLOSE_S), CLOSE_S + 1)

    def _deleted(self, d: ev.TriggerDefinition, version: int) -> ev.TriggerDefinition:
        return replace(d, version=version, state=ev.DefinitionState.DELETED, authored_at=ev_now())

    def _produce(self, definitions: list[ev.TriggerDefinition]) -> None:
        errors: list[object] = []
        topic = topic_name(Topic.DEFINITIONS, self.client.prefix)
        for d in definitions:
            self.producer.produce(
                topic,
                key=ev.trigger_key(d.tenant, d.trigger_id).encode(),
                value=self.client.codec.encode(self.client.sign(d)),
                on_delivery=lambda err, _msg: errors.append(err) if err is not None else None,
            )
        if self.producer.flush(30) != 0:
            raise KafkaException("the demo's definitions were not acknowledged within 30 s")
        if errors:
            raise KafkaException(errors[0])

    def _live_rows(self) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        with psycopg.connect(self.database_url, autocommit=True, connect_timeout=5) as conn:
            queries = HistoryQueries(conn, self.schema)
            cursor = None
            while True:
                page = queries.triggers(TENANT, limit=500, cursor=cursor)
                rows += page.items
                cursor = page.next_cursor
                if cursor is None:
                    return rows

    def _deleted_in_read_model(self, version: int) -> bool:
        try:
            with psycopg.connect(self.database_url, autocommit=True, connect_timeout=2) as conn:
                queries = HistoryQueries(conn, self.schema)
                rows = [queries.trigger_row(TENANT, tid) for tid in (EVENT_ID, HOOK_ID)]
        except psycopg.Error:
            return False
        return all(
            r is not None and int(r["version"]) >= version and r["state"] == "deleted" for r in rows
        )


def _events_consumer(
    settings: Settings, bootstrap: str, kafka_log: logging.Logger | None
) -> Consumer:
    """A consumer of the demo tenant's events topic in the demo's own group (each run goes on
    from where the last one stopped; events of earlier runs are told apart by version)."""
    config: dict[str, Any] = {
        "group.id": tenant_group_prefix(TENANT, settings.topic_prefix) + "demo",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": True,
        "isolation.level": "read_committed",
    }
    if kafka_log is not None:
        config["logger"] = kafka_log
    consumer = Consumer(client_config(bootstrap, config))
    consumer.subscribe([settings.topic_prefix + events_topic(TENANT)])
    return consumer


def _next_event(consumer: Consumer, codec: Codec, version: int) -> ev.ScheduleEvent | None:
    """The next ``schedule.triggered`` of this run's event trigger within half a second."""
    msg = consumer.poll(0.5)
    if msg is None or msg.error() is not None:
        return None
    try:
        event = codec.decode(msg.value() or b"", ev.ScheduleEvent)
    except DecodeError:
        return None
    if (
        event.trigger_id == EVENT_ID
        and event.trigger_version == version
        and event.type == "schedule.triggered"
    ):
        return event
    return None


def _fired_line(event: ev.ScheduleEvent) -> str:
    late = (event.emitted_at - event.scheduled_at).total_seconds() if event.scheduled_at else 0.0
    return (
        f"  fired {event.scheduled_at:%Y-%m-%dT%H:%M:%SZ}  key {event.key_hash}"
        f"  decided {late * 1000:.0f} ms after the instant"
    )


def _bounded(call: Callable[[], object], timeout_s: float) -> None:
    """Run ``call`` for at most ``timeout_s`` (in a daemon thread left behind after that)."""
    worker = threading.Thread(target=call, daemon=True)
    worker.start()
    worker.join(timeout_s)


def _kafka_logger(show: bool) -> logging.Logger | None:
    """None: librdkafka prints its own lines (``--kafka-logs``); else a logger that drops them."""
    if show:
        return None
    log = logging.getLogger("horae.demo.librdkafka")
    log.addHandler(logging.NullHandler())
    log.propagate = False
    return log


def _tenant_key(settings: Settings) -> str:
    """The demo tenant's ingress secret: ``demo/demo-1`` of HORAE_TENANT_KEYS, else a new one."""
    key = settings.tenant_keys.get(TENANT, {}).get(KEY_ID)
    if key is None:
        return secrets.token_hex(16)
    return key.get_secret_value() if isinstance(key, SecretStr) else key.secret.get_secret_value()


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _api_env(settings: Settings) -> dict[str, str]:
    """The platform key (the API signs with it; the planner accepts what it signs) and the API's
    token keys: the configured ones, else new ones for this demo."""
    platform = settings.platform_key
    keys = {k: v.get_secret_value() for k, v in settings.api.token_keys.items()}
    kid = settings.api.token_kid
    if not keys:
        keys, kid = {"demo": secrets.token_hex(32)}, "demo"
    env = {
        "HORAE_PLATFORM_KEY": platform.get_secret_value() if platform else secrets.token_hex(16),
        "HORAE_API_TOKEN_KEYS": json.dumps(keys),
    }
    if kid:
        env["HORAE_API_TOKEN_KID"] = kid
    return env


def next_commands(settings: Settings, env: dict[str, str]) -> str:
    """The three commands a newcomer types next: create a trigger through the API, read its
    history, open the API docs (with a token of the demo tenant to paste)."""
    keys = json.loads(env["HORAE_API_TOKEN_KEYS"])
    token = issue(
        keys,
        env.get("HORAE_API_TOKEN_KID"),
        tenant=TENANT,
        roles=[ev.Role.AUTHOR, ev.Role.POLICY],
        subject="demo-user",
        ttl_s=settings.api.token_ttl_s,
    )
    url = f"http://{settings.api.host}:{settings.api.port}"
    body = json.dumps(
        {
            "trigger_id": "hello",
            "recurrence": {"kind": "cron", "expr": "*/10 * * * * *"},
            "target": {"kind": "event", "topic": f"events.{TENANT}"},
        }
    )
    return "\n".join(
        [
            f"demo: the HTTP API listens on {url}. Next, in another terminal:",
            f"  export HORAE_API_URL={url} HORAE_API_TOKEN={token}",
            f'  curl -s -X POST $HORAE_API_URL/v1/schedules -H "Authorization: Bearer '
            f"$HORAE_API_TOKEN\" -H 'Content-Type: application/json' -d '{body}'",
            "  .venv/bin/horae history hello",
            f"  open {url}/console/login#token={token}   (the console, signed in with the token"
            f" above; the API reference: {url}/v1/docs)",
        ]
    )


def _principals(settings: Settings, bootstrap: str) -> dict[str, dict[str, str]]:
    """Each process's Kafka credentials as environment variables: its own role's user, made
    (with the ACLs) by this demo's user when that is the broker's admin; none otherwise (a broker
    without authentication, or a user that may not make users: the processes run as it)."""
    admin = settings_credentials()
    if admin is None:
        return {}
    try:
        roles = provision_roles(bootstrap, admin, settings.topic_prefix, (TENANT,))
    except KafkaException as exc:
        print(f"demo: processes run as {admin.username!r} ({exc})", file=sys.stderr)
        return {}
    return {
        role: {"HORAE_KAFKA_USERNAME": c.username, "HORAE_KAFKA_PASSWORD": c.password}
        for role, c in roles.items()
    }


def _plain(keys: dict[str, dict[str, SecretStr | IngressKey]]) -> dict[str, dict[str, object]]:
    return {t: {k: _plain_key(v) for k, v in ks.items()} for t, ks in keys.items()}


def _plain_key(key: SecretStr | IngressKey) -> object:
    if isinstance(key, SecretStr):
        return key.get_secret_value()
    return {"secret": key.secret.get_secret_value(), "roles": [r.value for r in key.roles]}


def ev_now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


def _subcommands() -> set[str]:
    from horae.cli.main import build_parser

    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            return set(action.choices)
    return set()
