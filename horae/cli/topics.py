"""``horae topics apply | describe``: the topic catalogue on a Kafka cluster, with the events
topic of every tenant of ``HORAE_TENANT_KEYS``."""

from __future__ import annotations

import argparse
import json
import sys

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from horae.cli.common import add_flags
from horae.devstack.stack import LocalStack
from horae.kafka.acls import ROLES, all_bindings, apply_acls
from horae.kafka.admin import Plan, admin_client, apply, auto_replication_factor, drift, observe
from horae.settings import Settings


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    topics = subparsers.add_parser("topics", help="create, update and inspect Horae's topics")
    sub = topics.add_subparsers(dest="topics_command", metavar="ACTION", required=True)
    apply_p = sub.add_parser(
        "apply", help="create missing topics and fix config drift (idempotent)"
    )
    apply_p.set_defaults(func=_apply)
    describe_p = sub.add_parser(
        "describe", help="show every topic and its drift from the catalogue; exit 1 on drift"
    )
    add_flags(describe_p, "topics", only=["output"])
    describe_p.set_defaults(func=_describe)
    shared = ["kafka_bootstrap", "topic_prefix", "topic_partitions", "topic_replication_factor"]
    for p in (apply_p, describe_p):
        add_flags(p, None, only=shared)


def _plan(settings: Settings) -> tuple[Plan, AdminClient]:
    admin = admin_client(LocalStack.from_settings(settings).endpoints.kafka_bootstrap)
    rf = settings.topic_replication_factor or auto_replication_factor(admin)
    tenants = tuple(settings.tenant_keys)  # each tenant's events topic
    return Plan(settings.topic_prefix, settings.topic_partitions, rf, tenants), admin


def _apply(settings: Settings, args: argparse.Namespace) -> int:
    plan, admin = _plan(settings)
    try:
        changes = apply(admin, plan)
    except Exception as exc:
        print(f"horae topics apply: {exc}", file=sys.stderr)
        return 1
    for line in changes:
        print(line)
    print(f"{len(changes)} change(s) under prefix {plan.prefix!r}")
    try:
        count = apply_acls(admin, all_bindings(plan.prefix, plan.tenants))
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.SECURITY_DISABLED:
            print(f"horae topics apply: ACLs: {exc}", file=sys.stderr)
            return 1
        print("ACLs: none (the broker has no authorizer)")
        return 0
    print(f"ACLs: {count} in place for roles {', '.join(ROLES)} and {len(plan.tenants)} tenant(s)")
    return 0


def _describe(settings: Settings, args: argparse.Namespace) -> int:
    plan, admin = _plan(settings)
    try:
        found = observe(admin, plan)
        drifts = drift(admin, plan)
    except Exception as exc:
        print(f"horae topics describe: {exc}", file=sys.stderr)
        return 1
    if settings.topics.output == "json":
        rows = [
            {
                "topic": name,
                "exists": name in found,
                "partitions": found[name].partitions if name in found else None,
                "drift": [str(d) for d in drifts if d.topic == name],
            }
            for name, _ in plan.topics()
        ]
        print(json.dumps({"prefix": plan.prefix, "topics": rows}, indent=2))
    else:
        for name, spec in plan.topics():
            seen = found.get(name)
            mine = [d for d in drifts if d.topic == name]
            shape = "absent"
            if seen is not None:
                shape = f"p={seen.partitions} rf={seen.replication_factor}"
            policy = spec.config["cleanup.policy"]
            print(f"{name:40} {shape:12} {policy:8} key={spec.key:8} {'DRIFT' if mine else 'ok'}")
            for d in mine:
                print(f"    {d.what}: expected {d.expected}, found {d.actual}")
        print(f"{len(drifts)} drift(s)")
    return 1 if drifts else 0
