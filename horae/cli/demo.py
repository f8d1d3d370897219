"""``horae demo``: every Horae process on the local stack, and a demo trigger you watch fire.

Starts ``horae planner``, ``horae projector``, ``horae dispatcher`` and ``horae api`` (the HTTP
API, on ``HORAE_API_PORT``; the demo prints a token and the three commands to try next) as child
processes and
produces two signed demo triggers firing every 5 seconds: one with an event target (each
``schedule.triggered`` event is printed as it is committed to the demo tenant's own topic
``<prefix>events.demo``, the only one its client reads) and one with a webhook target, delivered
by the dispatcher to a local receiver that checks the signature (allowlisted: loopback is otherwise
refused).
It supervises them as a deployment's supervisor would: a planner, projector or dispatcher that
exits (e.g. status 70, a transaction call that hung: docs/guarantees.md) is started again, unless
it exited ``MAX_RESTARTS`` times within a minute; the API is left stopped.
Ctrl-C stops the processes (the stack keeps running: ``horae dev down`` stops it).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from contextlib import suppress
from dataclasses import replace
from datetime import UTC, datetime

from confluent_kafka import KafkaException
from pydantic import SecretStr

from horae.api.auth import issue
from horae.cli.common import add_flags, ensure_topics, require_services
from horae.cli.demo_receiver import DemoReceiver
from horae.cli.projections import migrate_live
from horae.client import HoraeClient
from horae.contracts import events as ev
from horae.kafka.acls import provision_roles
from horae.kafka.config import settings_credentials
from horae.settings import IngressKey, Settings

TENANT = "demo"
KEY_ID = "demo-1"
MAX_RESTARTS = 5  # within a minute, per process; one more exit stops the demo


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("demo", help="run every process and watch a demo trigger fire")
    add_flags(p, "demo")
    p.set_defaults(func=run)


def run(settings: Settings, args: argparse.Namespace) -> int:
    bootstrap, database_url = require_services(settings)
    ensure_topics(settings, bootstrap, (TENANT,))  # with the demo tenant's events topic
    migrate_live(settings, database_url)  # the projector role may not create its schema
    secret = secrets.token_hex(16)
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

    def start(name: str) -> subprocess.Popen[bytes]:
        command = [sys.executable, "-m", "horae.cli.main", name]
        return subprocess.Popen(command, env=env | principals.get(name, {}))

    children = {name: start(name) for name in names}
    restarts: dict[str, list[float]] = {name: [] for name in names}
    print(f"demo: started {', '.join(names)} against {bootstrap}")
    if principals:
        print(f"demo: each runs as its own Kafka user ({', '.join(sorted(principals))})")
    stop = False

    def _stop(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    client = HoraeClient(
        bootstrap,
        tenant=TENANT,
        key_id=KEY_ID,
        key=secret.encode(),
        prefix=settings.topic_prefix,
    )
    trigger_id = f"heartbeat-{secrets.token_hex(3)}"
    definition = ev.TriggerDefinition(
        tenant=TENANT,
        trigger_id=trigger_id,
        version=1,
        state=ev.DefinitionState.LIVE,
        recurrence=ev.Recurrence(kind=ev.RecurrenceKind.CRON, expr=settings.demo.expr),
        target=ev.Target(kind=ev.TargetKind.EVENT, topic=client.events_topic),  # events.demo
        authored_at=ev_now(),
        author="horae-demo",
        payload=b'{"hello": "horae"}',
    )
    client.put(definition)
    webhook = replace(
        definition,
        trigger_id=f"{trigger_id}-hook",
        payload=b'{"hello": "webhook"}',
        target=ev.Target(kind=ev.TargetKind.WEBHOOK, url=receiver.url, secret_refs=("demo",)),
    )
    client.put(webhook)
    print(
        f"demo: triggers {TENANT}/{trigger_id} (event) and {TENANT}/{webhook.trigger_id} "
        f"(webhook to {receiver.url}) are live, {settings.demo.expr!r} UTC:"
    )
    if "api" in children:
        print(next_commands(settings, env), flush=True)
    deadline = time.monotonic() + settings.demo.seconds if settings.demo.seconds else float("inf")
    fired = 0
    try:
        while not stop and time.monotonic() < deadline:
            for event in client.schedule_events(
                timeout_s=1.0, from_beginning=True, group_id=f"demo-{trigger_id}"
            ):
                if event.trigger_id == trigger_id and event.type == "schedule.triggered":
                    fired += 1
                    late = (
                        (event.emitted_at - event.scheduled_at).total_seconds()
                        if event.scheduled_at
                        else 0.0
                    )
                    print(
                        f"  fired {event.scheduled_at:%Y-%m-%dT%H:%M:%SZ}  key {event.key_hash}"
                        f"  decided {late * 1000:.0f} ms after the instant",
                        flush=True,
                    )
                if stop or time.monotonic() >= deadline:
                    break
            for name, child in list(children.items()):
                if child.poll() is not None:
                    print(f"demo: {name} exited with {child.returncode}", file=sys.stderr)
                    if name == "api":  # e.g. its port is taken: the fires go on without it
                        del children[name]
                        continue
                    now = time.monotonic()
                    restarts[name] = [t for t in restarts[name] if now - t < 60] + [now]
                    if len(restarts[name]) > MAX_RESTARTS:
                        stop = True
                        continue
                    children[name] = start(name)
                    print(f"demo: {name} started again", file=sys.stderr, flush=True)
    finally:
        client.close()
        receiver.stop()
        for child in children.values():
            with suppress(ProcessLookupError):
                child.send_signal(signal.SIGTERM)
        for child in children.values():
            with suppress(subprocess.TimeoutExpired):
                child.wait(30)
    print(f"demo: {fired} fires seen; processes stopped (`horae dev down` stops the stack)")
    return 0 if fired else 1


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
            f"  open {url}/v1/docs   (the API reference; the token above authorizes it)",
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
