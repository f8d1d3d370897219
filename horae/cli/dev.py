"""``horae dev up | down | status``: the local stack (Kafka 4 + PostgreSQL) on loopback.

``--brokers 3`` makes Kafka a 3-node KRaft cluster, ``--tls`` runs both parts on TLS with a
throwaway CA (:mod:`horae.devstack.tls`); ``up`` prints the ``export`` line clients need.
"""

from __future__ import annotations

import argparse
import sys
import time

from confluent_kafka import KafkaException

from horae.cli.common import add_flags
from horae.devstack import StackError
from horae.devstack.stack import LocalStack
from horae.kafka.acls import provision_roles
from horae.kafka.connection import use_connection
from horae.settings import Settings


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    dev = subparsers.add_parser("dev", help="manage the local stack (Kafka + PostgreSQL)")
    sub = dev.add_subparsers(dest="dev_command", metavar="ACTION", required=True)
    for name, func, text in (
        ("up", _up, "start Kafka and PostgreSQL (idempotent) and print where they listen"),
        ("down", _down, "stop both; leaves no java or postgres process behind"),
        ("status", _status, "print each part's endpoint and health; exit 1 if one is down"),
    ):
        action = sub.add_parser(name, help=text, description=text)
        add_flags(action, "dev")
        add_flags(action, None, only=["state_dir", "cache_dir"])
        action.set_defaults(func=func)


def _print_endpoints(stack: LocalStack, health: dict[str, bool] | None = None) -> None:
    rows = [
        ("kafka", stack.endpoints.kafka_bootstrap, stack.kafka is None),
        ("postgres", stack.endpoints.database_url, stack.postgres is None),
    ]
    for name, where, external in rows:
        state = "" if health is None else ("healthy" if health[name] else "DOWN")
        origin = "external" if external else "local"
        print(f"{name:9} {where:45} {origin:8} {state}".rstrip())


def _up(settings: Settings, args: argparse.Namespace) -> int:
    stack = LocalStack.from_settings(settings)
    started = time.monotonic()
    try:
        stack.up()
    except StackError as exc:
        print(f"horae dev up: {exc}", file=sys.stderr)
        return 1
    health = stack.status()
    _print_endpoints(stack, health)
    exports = " ".join(f"{name}={value}" for name, value in stack.client_env().items())
    print(f"local stack up in {time.monotonic() - started:.1f} s (export {exports})")
    if stack.tls is not None:
        print(
            f"tls: Kafka on SASL_SSL and PostgreSQL with ssl=on, both certified by the local "
            f"CA {stack.tls.ca} (made by this stack, removed by `horae dev down`)"
        )
    admin = stack.kafka.admin if stack.kafka is not None else None
    connection = stack.kafka_connection()
    if admin is not None and connection is not None:  # Horae on this machine uses its admin
        use_connection(connection)  # the stack's transport (TLS or not) for what follows
        try:
            roles = provision_roles(
                stack.endpoints.kafka_bootstrap,
                admin,
                settings.topic_prefix,
                tuple(settings.tenant_keys),
            )
        except KafkaException as exc:
            print(f"horae dev up: making the Kafka users and ACLs: {exc}", file=sys.stderr)
            return 1
        print(
            f"kafka users {', '.join(roles)} (one per process role, with their ACLs under "
            f"{settings.topic_prefix!r}; horae demo runs each process as its own)"
        )
        print(
            "kafka clients log in with SASL/SCRAM-SHA-512 (this stack's admin, which Horae on "
            "this machine finds by itself unless HORAE_KAFKA_BOOTSTRAP names another broker): "
            f"export HORAE_KAFKA_USERNAME={admin.username} HORAE_KAFKA_PASSWORD={admin.password}"
        )
    elif stack.kafka is not None:
        print(
            "kafka: this broker was started before authentication (plaintext, no ACLs); "
            "`horae dev down && horae dev up` restarts it authenticating"
        )
    return 0 if all(health.values()) else 1


def _down(settings: Settings, args: argparse.Namespace) -> int:
    stack = LocalStack.from_settings(settings)
    try:
        stack.down()
    except StackError as exc:
        print(f"horae dev down: {exc}", file=sys.stderr)
        return 1
    print("local stack stopped")
    return 0


def _status(settings: Settings, args: argparse.Namespace) -> int:
    stack = LocalStack.from_settings(settings)
    health = stack.status()
    _print_endpoints(stack, health)
    return 0 if all(health.values()) else 1
