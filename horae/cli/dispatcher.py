"""``horae dispatcher`` (run a dispatcher worker) and ``horae dlq list|redrive``.

The dispatcher's settings are the ``dispatcher`` section of :class:`horae.settings.Settings`
(``HORAE_DISPATCHER_*``); the scalar ones and the allowlist are flags too (``horae dispatcher
--help``; ``HORAE_DISPATCHER_ALLOW`` or a repeated ``--allow``: CIDRs / ``host:port`` a target may
reach although not public, for local demos and tests); ``horae dlq``'s are the ``dlq`` section
(``HORAE_DLQ_*``). Set through the environment only: ``HORAE_DISPATCHER_WEBHOOK_SECRETS`` (JSON
``{tenant: {ref: "whsec_..."}}``: the secrets ``Target.secret_refs`` name, looked up under the
fire's own tenant),
``HORAE_TENANT_GRANTS`` (each tenant's dispatch rate, catch-up share and concurrency, shared by
every dispatcher of the group), ``HORAE_DISPATCHER_CALLBACK_SECRET``,
``HORAE_PLATFORM_KEY`` (+ ``_ID``; the breaker signs paused versions with it — the settings add it
to every tenant's key map, so planners given the same environment accept them),
``HORAE_TENANT_KEYS``.
"""

from __future__ import annotations

import argparse
import json
import threading

from horae.cli.common import (
    add_flags,
    drain_s,
    ensure_topics,
    require_services,
    serve_metrics,
    setup_logging,
    stop_on_signals,
)
from horae.settings import Settings


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("dispatcher", help="run a dispatcher worker (at-least-once delivery)")
    add_flags(p, "dispatcher")
    p.set_defaults(func=run)

    dlq = subparsers.add_parser("dlq", help="inspect and redrive the dead-letter queue")
    sub = dlq.add_subparsers(dest="dlq_command", metavar="ACTION", required=True)
    for name, helptext in (
        ("list", "print DLQ entries as JSON lines"),
        ("redrive", "send DLQ'd fires again under their original key"),
    ):
        a = sub.add_parser(name, help=helptext)
        flags = ["fire_key", "tenant", "trigger"]
        add_flags(a, "dlq", only=flags + (["all", "dry_run"] if name == "redrive" else []))
        a.set_defaults(func=run_dlq)


def run(settings: Settings, args: argparse.Namespace) -> int:
    from horae.streams.dispatcher.config import DispatcherConfig
    from horae.streams.dispatcher.worker import Dispatcher

    setup_logging("dispatcher", settings.log_level)
    bootstrap, _ = require_services(settings, need_database=False)
    ensure_topics(settings, bootstrap)
    mine = settings.dispatcher
    dispatcher = Dispatcher(
        DispatcherConfig.from_settings(settings, bootstrap),
        callback_port=mine.callback_port,
        callback_host=mine.callback_host,
    )
    serve_metrics(mine.metrics_port, dispatcher.metrics.registry, mine.metrics_host)
    stop = threading.Event()
    stop_on_signals(stop, drain_s("dispatcher", settings))
    dispatcher.run(stop)
    return 0


def run_dlq(settings: Settings, args: argparse.Namespace) -> int:
    from horae.streams.dispatcher.redrive import dlq_entries, redrive, select

    bootstrap, _ = require_services(settings, need_database=False)
    mine = settings.dlq
    entries = select(
        dlq_entries(bootstrap, settings.topic_prefix),
        fire_keys=mine.fire_key,
        tenant=mine.tenant,
        trigger_id=mine.trigger,
    )
    filtered = bool(mine.fire_key or mine.tenant or mine.trigger)
    for e in entries:
        fire = e.order.fire
        print(
            json.dumps(
                {
                    "fire_key": fire.fire_key,
                    "tenant": fire.tenant,
                    "trigger_id": fire.trigger_id,
                    "attempts": e.order.attempt,
                    "cause": e.cause,
                    "dlq": e.link,
                }
            )
        )
    if args.dlq_command == "list":
        return 0
    if not filtered and not mine.all:
        print("refusing to redrive everything: give --fire-key/--tenant/--trigger or --all")
        return 2
    if mine.dry_run:
        print(f"dry run: {len(entries)} fires would be redriven")
        return 0
    operator = settings.kafka_username or "admin"  # the principal the broker knows this CLI as
    n = redrive(bootstrap, settings.topic_prefix, entries, principal=operator)
    print(f"redriven: {n}")
    return 0
