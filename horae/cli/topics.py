"""``horae topics apply | describe``: the topic catalogue on a Kafka cluster."""

from __future__ import annotations

import argparse
import json
import sys

from confluent_kafka.admin import AdminClient

from horae.contracts.admin import Plan, admin_client, apply, auto_replication_factor, drift, observe
from horae.settings import get_settings


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
    describe_p.add_argument("--json", action="store_true", help="machine-readable output")
    describe_p.set_defaults(func=_describe)
    settings = get_settings()
    for p in (apply_p, describe_p):
        p.add_argument(
            "--bootstrap",
            default=settings.kafka_bootstrap or f"127.0.0.1:{settings.dev_kafka_port}",
            help="Kafka bootstrap servers (env HORAE_KAFKA_BOOTSTRAP; default: the local stack)",
        )
        p.add_argument(
            "--prefix", default=settings.topic_prefix, help="topic prefix (HORAE_TOPIC_PREFIX)"
        )
        p.add_argument(
            "--partitions",
            type=int,
            default=settings.topic_partitions,
            help="partitions of trigger-partitioned topics (HORAE_TOPIC_PARTITIONS)",
        )
        p.add_argument(
            "--replication-factor",
            type=int,
            default=settings.topic_replication_factor,
            help="replication factor (HORAE_TOPIC_REPLICATION_FACTOR; default min(3, brokers))",
        )


def _plan(args: argparse.Namespace) -> tuple[Plan, AdminClient]:
    admin = admin_client(args.bootstrap)
    rf = args.replication_factor or auto_replication_factor(admin)
    return Plan(args.prefix, args.partitions, rf), admin


def _apply(args: argparse.Namespace) -> int:
    plan, admin = _plan(args)
    try:
        changes = apply(admin, plan)
    except Exception as exc:
        print(f"horae topics apply: {exc}", file=sys.stderr)
        return 1
    for line in changes:
        print(line)
    print(f"{len(changes)} change(s) under prefix {plan.prefix!r}")
    return 0


def _describe(args: argparse.Namespace) -> int:
    plan, admin = _plan(args)
    try:
        found = observe(admin, plan)
        drifts = drift(admin, plan)
    except Exception as exc:
        print(f"horae topics describe: {exc}", file=sys.stderr)
        return 1
    if args.json:
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
