"""``horae dispatcher`` (run a dispatcher worker) and ``horae dlq list|redrive``.

Configuration beyond the flags comes from the settings (``HORAE_*``, see ``horae/settings.py``):
``HORAE_WEBHOOK_SECRETS`` (JSON ``{ref: "whsec_..."}``: the secrets ``Target.secret_refs`` name),
``HORAE_DISPATCH_ALLOW`` (JSON list of CIDRs / ``host:port`` a target may reach although not
public; for local demos and tests), ``HORAE_DISPATCH_TENANT_RATE`` / ``_TENANT_INFLIGHT`` /
``_TENANT_LIMITS`` (quotas), ``HORAE_DISPATCH_CATCHUP_SHARE``, ``HORAE_DISPATCH_BREAKER_THRESHOLD``,
``HORAE_CALLBACK_SECRET`` / ``_TTL_S``, ``HORAE_PLATFORM_KEY`` (+ ``_ID``; the breaker signs paused
versions with it — the settings add it to every tenant's key map, so planners given the same
environment accept them), ``HORAE_TENANT_KEYS``.
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import threading
from dataclasses import replace

from horae.cli.common import (
    ensure_topics,
    env_default,
    require_services,
    serve_metrics,
    setup_logging,
)
from horae.settings import get_settings


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("dispatcher", help="run a dispatcher worker (at-least-once delivery)")
    p.add_argument(
        "--slot",
        default=env_default("HORAE_DISPATCHER_SLOT", socket.gethostname()),
        help="stable worker slot; group instance and transactional.id derive from it "
        "(env HORAE_DISPATCHER_SLOT, default: host name)",
    )
    p.add_argument(
        "--callback-port",
        type=int,
        default=int(env_default("HORAE_DISPATCHER_CALLBACK_PORT", "-1")),
        help="serve outcome callbacks (POST /v1/outcomes) on this port; -1 = off "
        "(env HORAE_DISPATCHER_CALLBACK_PORT)",
    )
    p.add_argument(
        "--callback-host",
        default=env_default("HORAE_DISPATCHER_CALLBACK_HOST", "127.0.0.1"),
        help="address of the callback server (env HORAE_DISPATCHER_CALLBACK_HOST)",
    )
    settings_port = get_settings().dispatcher_metrics_port
    p.add_argument(
        "--metrics-port",
        type=int,
        default=int(env_default("HORAE_DISPATCHER_METRICS_PORT", str(settings_port or 0))),
        help="serve /metrics on this port; 0 = off (env HORAE_DISPATCHER_METRICS_PORT)",
    )
    p.add_argument(
        "--max-inflight",
        type=int,
        default=int(
            env_default("HORAE_DISPATCH_MAX_INFLIGHT", str(get_settings().dispatch_max_inflight))
        ),
        help="concurrent sends of this process (env HORAE_DISPATCH_MAX_INFLIGHT)",
    )
    p.add_argument(
        "--session-timeout-ms",
        type=int,
        default=int(env_default("HORAE_DISPATCHER_SESSION_TIMEOUT_MS", "10000")),
        help="consumer group session timeout (env HORAE_DISPATCHER_SESSION_TIMEOUT_MS)",
    )
    p.set_defaults(func=run)

    dlq = subparsers.add_parser("dlq", help="inspect and redrive the dead-letter queue")
    sub = dlq.add_subparsers(dest="dlq_command", metavar="ACTION", required=True)
    for name, helptext in (
        ("list", "print DLQ entries as JSON lines"),
        ("redrive", "send DLQ'd fires again under their original key"),
    ):
        a = sub.add_parser(name, help=helptext)
        a.add_argument("--fire-key", action="append", default=[], help="only this fire (repeat)")
        a.add_argument("--tenant", default=None, help="only this tenant's fires")
        a.add_argument("--trigger", default=None, help="only this trigger's fires")
        if name == "redrive":
            a.add_argument(
                "--all", action="store_true", help="redrive every entry (no filter needed)"
            )
            a.add_argument("--dry-run", action="store_true", help="print, produce nothing")
        a.set_defaults(func=run_dlq)


def _logging() -> None:
    setup_logging("dispatcher")


def run(args: argparse.Namespace) -> int:
    from horae.streams.dispatcher.config import DispatcherConfig
    from horae.streams.dispatcher.worker import Dispatcher

    _logging()
    settings = get_settings()
    bootstrap, _ = require_services(settings, need_database=False)
    ensure_topics(settings, bootstrap)
    config = DispatcherConfig.from_settings(settings, bootstrap, args.slot)
    config = replace(
        config,
        max_inflight=args.max_inflight,
        sender=replace(config.sender, pool_size=max(args.max_inflight, 1)),
        session_timeout_ms=args.session_timeout_ms,
    )
    dispatcher = Dispatcher(
        config,
        callback_port=args.callback_port if args.callback_port >= 0 else None,
        callback_host=args.callback_host,
    )
    if args.metrics_port:
        serve_metrics(args.metrics_port, dispatcher.metrics.registry)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    dispatcher.run(stop)
    return 0


def run_dlq(args: argparse.Namespace) -> int:
    from horae.streams.dispatcher.redrive import dlq_entries, redrive, select

    settings = get_settings()
    bootstrap, _ = require_services(settings, need_database=False)
    entries = select(
        dlq_entries(bootstrap, settings.topic_prefix),
        fire_keys=args.fire_key,
        tenant=args.tenant,
        trigger_id=args.trigger,
    )
    filtered = bool(args.fire_key or args.tenant or args.trigger)
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
    if not filtered and not args.all:
        print("refusing to redrive everything: give --fire-key/--tenant/--trigger or --all")
        return 2
    if args.dry_run:
        print(f"dry run: {len(entries)} fires would be redriven")
        return 0
    n = redrive(bootstrap, settings.topic_prefix, entries)
    print(f"redriven: {n}")
    return 0
