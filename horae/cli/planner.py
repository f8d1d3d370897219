"""``horae planner``: run one planner worker (a member of the planner consumer group)."""

from __future__ import annotations

import argparse
import signal
import socket
import threading

from horae.cli.common import (
    ensure_topics,
    env_default,
    require_services,
    serve_metrics,
    setup_logging,
)
from horae.settings import get_settings
from horae.streams.planner.clock import ensure_clock_topic
from horae.streams.planner.decide import tenant_keys_from
from horae.streams.planner.worker import Planner, PlannerConfig


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("planner", help="run a planner worker (exactly-once fire decisions)")
    p.add_argument(
        "--slot",
        default=env_default("HORAE_PLANNER_SLOT", socket.gethostname()),
        help="stable worker slot; the transactional.id derives from it "
        "(env HORAE_PLANNER_SLOT, default: host name)",
    )
    p.add_argument(
        "--tick",
        type=float,
        default=float(env_default("HORAE_PLANNER_TICK_S", "1.0")),
        help="seconds between decision ticks (env HORAE_PLANNER_TICK_S)",
    )
    p.add_argument(
        "--epsilon",
        type=float,
        default=float(env_default("HORAE_PLANNER_EPSILON_S", "0")),
        help="decide instants due at now - epsilon (env HORAE_PLANNER_EPSILON_S)",
    )
    p.add_argument(
        "--max-skew",
        type=float,
        default=float(env_default("HORAE_PLANNER_MAX_SKEW_S", "2.0")),
        help="clock gate bound against the broker (env HORAE_PLANNER_MAX_SKEW_S)",
    )
    p.add_argument(
        "--session-timeout-ms",
        type=int,
        default=int(env_default("HORAE_PLANNER_SESSION_TIMEOUT_MS", "10000")),
        help="consumer group session timeout (env HORAE_PLANNER_SESSION_TIMEOUT_MS)",
    )
    p.add_argument(
        "--metrics-port",
        type=int,
        default=int(env_default("HORAE_PLANNER_METRICS_PORT", "0")),
        help="serve /metrics on this port; 0 = off (env HORAE_PLANNER_METRICS_PORT)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    setup_logging("planner")
    settings = get_settings()
    bootstrap, _ = require_services(settings, need_database=False)
    ensure_topics(settings, bootstrap)
    ensure_clock_topic(bootstrap, settings.topic_prefix)
    config = PlannerConfig(
        bootstrap=bootstrap,
        prefix=settings.topic_prefix,
        slot=args.slot,
        tick_s=args.tick,
        epsilon_s=args.epsilon,
        max_skew_s=args.max_skew,
        session_timeout_ms=args.session_timeout_ms,
        tenant_keys=tenant_keys_from(settings.tenant_keys),
        min_interval_s=settings.min_interval_s,
    )
    planner = Planner(config)
    if args.metrics_port:
        serve_metrics(args.metrics_port, planner.metrics.registry)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    planner.run(stop)
    return 0
