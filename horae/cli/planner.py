"""``horae planner``: run one planner worker (a member of the planner consumer group)."""

from __future__ import annotations

import argparse
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
from horae.streams.planner.clock import ensure_clock_topic
from horae.streams.planner.rebuild import FreezeAfterRebuild
from horae.streams.planner.worker import Planner, PlannerConfig


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("planner", help="run a planner worker (exactly-once fire decisions)")
    add_flags(p, "planner")
    p.set_defaults(func=run)


def run(settings: Settings, args: argparse.Namespace) -> int:
    setup_logging("planner", settings.log_level)
    bootstrap, _ = require_services(settings, need_database=False)
    ensure_topics(settings, bootstrap)
    ensure_clock_topic(bootstrap, settings.topic_prefix)
    mine = settings.planner
    config = PlannerConfig(
        bootstrap=bootstrap,
        prefix=settings.topic_prefix,
        slot=mine.slot,
        tick_s=mine.tick_s,
        epsilon_s=mine.epsilon_s,
        max_skew_s=mine.max_skew_s,
        session_timeout_ms=mine.session_timeout_ms,
        tenant_keys=settings.tenant_key_bytes(),
        grants=settings.grants(),
        min_interval_s=settings.min_interval_s,
        command_max_ttl_s=settings.command_max_ttl_s,
        overlap_attempt_s=mine.overlap_attempt_s,
        snapshot_changes=mine.snapshot_changes,
        txn_max_decisions=mine.txn_max_decisions,
        txn_max_s=mine.txn_max_ms / 1000.0,
    )
    planner = Planner(config, gc=FreezeAfterRebuild())
    serve_metrics(mine.metrics_port, planner.metrics.registry, mine.metrics_host)
    stop = threading.Event()
    stop_on_signals(stop, drain_s("planner", settings))
    planner.run(stop)
    return 0
