"""``horae tenants add | suspend | resume NAME``: the platform adds a tenant, suspends it, or lifts
a suspension.

Usage::

    horae tenants add NAME                  # password: HORAE_TENANTS_PASSWORD, else a new one
    horae tenants suspend NAME [--reason TEXT]
    horae tenants resume NAME [--reason TEXT]

``add`` (run as the Kafka admin) creates the tenant's Kafka principal (SCRAM-SHA-512 user
``tenant.<token>``, password from ``HORAE_TENANTS_PASSWORD`` — a secret, so not a flag — or
generated), the catalogue's missing topics with
the tenant's events topic, and the tenant's ACLs (:mod:`horae.kafka.acls`: write ``definitions``
and ``commands``, read its own events topics, consumer groups ``<prefix>tenant.<token>.*``); it
prints the password and a new ingress key (granting ``author``) once, to be added to
``HORAE_TENANT_KEYS``. Exit code 0, or 1 when the broker refused a step.

``suspend`` / ``resume``:
Signs one command with the platform key (``HORAE_PLATFORM_KEY``, key id
``HORAE_PLATFORM_KEY_ID``): kind ``pause`` (suspend) or ``resume`` (lift), trigger id ``*`` (the
whole tenant), role ``platform``, a fresh command id, ``expires_at`` = now +
``HORAE_COMMAND_MAX_TTL_S``. A tenant's triggers span every partition, so the same signed bytes go
to EVERY partition of ``<prefix>commands`` (idempotent producer, flushed); each planner partition
applies it once to its triggers. Prints one line per partition; exit code 0 when every partition
has it, 1 when one did not, 2 when the platform key is unset.
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
from datetime import UTC, datetime

from confluent_kafka import KafkaError, Message, Producer

from horae.cli.common import add_flags
from horae.contracts import events as ev
from horae.contracts import signing
from horae.contracts.codec import encode
from horae.contracts.ingress import NAME
from horae.contracts.topics import PRODUCER_DEFAULTS, Topic, events_topic, topic_name
from horae.devstack.stack import LocalStack
from horae.kafka.acls import apply_acls, tenant_bindings, tenant_group_prefix, tenant_principal
from horae.kafka.admin import Plan, admin_client, apply, auto_replication_factor
from horae.kafka.config import client_config
from horae.kafka.scram import new_password, upsert_scram_users
from horae.settings import Settings

ACTIONS = {"suspend": ev.CommandKind.PAUSE, "resume": ev.CommandKind.RESUME}


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    tenants = subparsers.add_parser("tenants", help="add, suspend or resume a tenant (platform)")
    sub = tenants.add_subparsers(dest="tenants_command", metavar="ACTION", required=True)
    text = "create a tenant's Kafka principal, ACLs, events topic and an ingress key"
    add = sub.add_parser("add", help=text, description=text)
    add.add_argument("tenant", nargs="?", metavar="NAME", help="the tenant (required)")
    add_flags(
        add,
        None,
        only=["kafka_bootstrap", "topic_prefix", "topic_partitions", "topic_replication_factor"],
    )
    add.set_defaults(func=_add)
    helps = {
        "suspend": "stop every trigger of a tenant (each instant recorded 'tenant suspended')",
        "resume": "lift a suspension (triggers resume under their misfire policy)",
    }
    for action, text in helps.items():
        p = sub.add_parser(action, help=text, description=text)
        p.add_argument("tenant", nargs="?", metavar="NAME", help="the tenant (required)")
        add_flags(p, "tenants", only=["reason"])
        add_flags(
            p,
            None,
            only=["kafka_bootstrap", "topic_prefix", "platform_key_id", "command_max_ttl_s"],
        )
        p.set_defaults(func=_run)


def tenant_command(
    settings: Settings, tenant: str, kind: ev.CommandKind, reason: str | None, now: datetime
) -> ev.Command:
    """The platform-signed tenant-wide command (:func:`horae.contracts.signing.tenant_command`
    with the settings' platform key); ValueError when the platform key is unset."""
    key_id, key = settings.platform_signer()
    return signing.tenant_command(
        tenant, kind, reason, now, key_id=key_id, key=key, ttl_s=settings.command_max_ttl_s
    )


def _add(settings: Settings, args: argparse.Namespace) -> int:
    if not args.tenant:
        print("horae tenants add: NAME (the tenant) is required", file=sys.stderr)
        return 2
    tenant: str = args.tenant
    if not NAME.match(tenant):
        print(f"horae tenants add: {tenant!r} is not a tenant id", file=sys.stderr)
        return 2
    bootstrap = LocalStack.from_settings(settings).endpoints.kafka_bootstrap
    given = settings.tenants.password
    password = given.get_secret_value() if given else new_password()
    user = tenant_principal(tenant)
    admin = admin_client(bootstrap)
    try:
        upsert_scram_users(bootstrap, None, {user: password})
        rf = settings.topic_replication_factor or auto_replication_factor(admin)
        plan = Plan(settings.topic_prefix, settings.topic_partitions, rf, (tenant,))
        changes = apply(admin, plan)
        apply_acls(admin, tenant_bindings(tenant, settings.topic_prefix))
    except Exception as exc:
        print(f"horae tenants add: {exc}", file=sys.stderr)
        return 1
    for line in changes:
        print(line)
    key_id = f"{tenant}-{secrets.token_hex(3)}"
    key = {tenant: {key_id: {"secret": secrets.token_urlsafe(32), "roles": ["author"]}}}
    print(f"tenant {tenant!r}: Kafka user {user!r} (SASL/SCRAM-SHA-512), password {password}")
    print(f"events topic {events_topic(tenant, settings.topic_prefix)}; consumer groups "
          f"{tenant_group_prefix(tenant, settings.topic_prefix)}*")  # fmt: skip
    print(f"ingress key (add to HORAE_TENANT_KEYS; shown once): {json.dumps(key)}")
    return 0


def _run(settings: Settings, args: argparse.Namespace) -> int:
    name = f"horae tenants {args.tenants_command}"
    if not args.tenant:
        print(f"{name}: NAME (the tenant) is required", file=sys.stderr)
        return 2
    try:
        command = tenant_command(
            settings,
            args.tenant,
            ACTIONS[args.tenants_command],
            settings.tenants.reason,
            datetime.now(UTC),
        )
    except ValueError as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        return 2
    if settings.tenant_keys and args.tenant not in settings.tenant_keys:
        print(
            f"{name}: warning: tenant {args.tenant!r} is not in HORAE_TENANT_KEYS", file=sys.stderr
        )
    bootstrap = LocalStack.from_settings(settings).endpoints.kafka_bootstrap
    topic = topic_name(Topic.COMMANDS, settings.topic_prefix)
    producer = Producer(client_config(bootstrap, PRODUCER_DEFAULTS))
    metadata = producer.list_topics(topic, timeout=30).topics.get(topic)
    if metadata is None or metadata.error is not None or not metadata.partitions:
        print(f"{name}: topic {topic!r} not found (run `horae topics apply`)", file=sys.stderr)
        return 1
    results: dict[int, str] = {}

    def delivered(err: KafkaError | None, msg: Message) -> None:
        results[msg.partition() or 0] = f"offset {msg.offset()}" if err is None else f"FAILED {err}"

    key, value = ev.trigger_key(command.tenant, command.trigger_id), encode(command)
    partitions = sorted(metadata.partitions)
    for partition in partitions:
        producer.produce(topic, value, key, partition=partition, on_delivery=delivered)
    left = producer.flush(30)
    for partition in partitions:
        print(f"{topic}[{partition}]: {results.get(partition, 'not delivered')}")
    done = sum(1 for r in results.values() if r.startswith("offset"))
    verb = "suspended" if command.kind is ev.CommandKind.PAUSE else "resumed"
    print(
        f"tenant {command.tenant!r} {verb} by command {command.command_id} "
        f"(expires {command.expires_at.isoformat() if command.expires_at else '-'}): "
        f"{done}/{len(partitions)} partitions"
    )
    return 0 if left == 0 and done == len(partitions) else 1
