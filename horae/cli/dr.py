"""``horae dr up | down | status | promote``: two local regions (a and b, each a Kafka and a
PostgreSQL of its own), MirrorMaker 2 from the writing region to the standby, and the promotion
of the standby (the runbook: ``docs/dr.md``)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable

from confluent_kafka import KafkaException

from horae.cli.common import add_flags
from horae.devstack import StackError
from horae.dr.failback import reset_standby
from horae.dr.metrics import exposition
from horae.dr.mirror import MirrorMaker, flow
from horae.dr.promote import promote, provision_standby, status
from horae.dr.regions import REGIONS, Region, dr_home, other, provision, read_state, region
from horae.settings import Settings


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    dr = subparsers.add_parser("dr", help="disaster recovery between two local regions")
    sub = dr.add_subparsers(dest="dr_command", metavar="ACTION", required=True)
    Action = tuple[str, Callable[[Settings, argparse.Namespace], int], str, list[str]]
    actions: tuple[Action, ...] = (
        ("up", _up, "start regions a and b (idempotent), their users and ACLs, and MirrorMaker 2 "
         "from the writing region to the standby", ["exactly_once", "tenant_events"]),
        ("down", _down, "stop MirrorMaker 2 and both regions", []),
        ("status", _status, "which region writes, whether each answers, the replication lag "
         "per topic, the last decision the standby holds", ["tenant_events"]),
        ("metrics", _metrics, "the status as Prometheus metrics (text format, on stdout): the "
         "lag per topic, how late the standby would be if promoted now", ["tenant_events"]),
        ("promote", _promote, "fence (or declare lost) the writing region, stop MirrorMaker 2, "
         "audit, and make --to the writing region",
         ["to", "declare_lost", "lag_timeout_s", "tenant_events"]),
        ("reset-standby", _reset, "fail-back, first step: wipe the standby (the former writer: "
         "its topics and consumer groups) and provision it again, so that `horae dr up` mirrors "
         "the writer into it", []),
    )  # fmt: skip
    for name, func, text, flags in actions:
        action = sub.add_parser(name, help=text, description=text)
        if flags:
            add_flags(action, "dr", only=flags)
        add_flags(action, None, only=["state_dir", "cache_dir"])
        action.set_defaults(func=func)


def _regions(settings: Settings) -> dict[str, Region]:
    return {name: region(settings, name) for name in REGIONS}


def _flow(settings: Settings, regions: dict[str, Region], source: str) -> MirrorMaker:
    return flow(
        regions[source],
        regions[other(source)],
        dr_home(settings),
        settings.cache_dir,
        settings.dr.exactly_once,
    )


def _up(settings: Settings, args: argparse.Namespace) -> int:
    started = time.monotonic()
    regions = _regions(settings)
    active = read_state(dr_home(settings)).active
    try:
        for r in regions.values():
            r.stack.up()
            roles = provision(r) if r.name == active else provision_standby(r)
            exports = " ".join(f"{k}={v}" for k, v in r.env().items())
            role = "writes" if r.name == active else "standby"
            where = f"kafka {r.bootstrap}, postgres {r.stack.endpoints.database_url}"
            print(f"region {r.name} ({role}): {where}")
            print(f"  export {exports}")
            print(f"  kafka users {', '.join(roles)}; admin {r.admin.username} "
                  f"(password in {r.kafka.password_file})")  # fmt: skip
        state = read_state(dr_home(settings))
        if state.promotions and state.fresh != other(active):
            print(
                f"horae dr up: the regions are up, but MirrorMaker 2 is not started: region "
                f"{other(active)} wrote before a promotion and holds decisions region {active} "
                f"never saw; wipe it first (`horae dr reset-standby`, docs/dr.md, fail-back)",
                file=sys.stderr,
            )
            return 1
        mirror = _flow(settings, regions, active)
        mirror.start()
    except (StackError, KafkaException) as exc:
        print(f"horae dr up: {exc}", file=sys.stderr)
        return 1
    print(
        f"mirrormaker 2: {active} -> {other(active)} (config {mirror.config}, log "
        f"{mirror.log_file}); up in {time.monotonic() - started:.1f} s"
    )
    return 0


def _down(settings: Settings, args: argparse.Namespace) -> int:
    regions = _regions(settings)
    for source in REGIONS:
        _flow(settings, regions, source).stop()
    for r in regions.values():
        r.stack.down()
    print("mirrormaker 2 and both regions stopped")
    return 0


def _status(settings: Settings, args: argparse.Namespace) -> int:
    regions = _regions(settings)
    active = read_state(dr_home(settings)).active
    try:
        st = status(_flow(settings, regions, active), dr_home(settings))
    except (StackError, KafkaException) as exc:
        print(f"horae dr status: {exc}", file=sys.stderr)
        return 1
    print("\n".join(st.lines(time.time())))
    return 0 if all(st.regions.values()) else 1


def _metrics(settings: Settings, args: argparse.Namespace) -> int:
    """Exit 0 whenever the metrics were printed: a region that does not answer is a figure
    (``horae_dr_region_up`` 0), not a failure of the export."""
    regions = _regions(settings)
    active = read_state(dr_home(settings)).active
    try:
        st = status(_flow(settings, regions, active), dr_home(settings))
    except (StackError, KafkaException) as exc:
        print(f"horae dr metrics: {exc}", file=sys.stderr)
        return 1
    sys.stdout.write(exposition(st.figures(), time.time()).decode())
    return 0


def _reset(settings: Settings, args: argparse.Namespace) -> int:
    regions = _regions(settings)
    active = read_state(dr_home(settings)).active
    try:
        wiped = reset_standby(regions[other(active)], regions[active], dr_home(settings))
    except (StackError, KafkaException) as exc:
        print(f"horae dr reset-standby: {exc}", file=sys.stderr)
        return 1
    print(
        f"region {other(active)} wiped ({wiped['topics']} topics, {wiped['groups']} consumer "
        f"groups) and provisioned again as the standby of region {active}; `horae dr up` "
        f"mirrors {active} -> {other(active)}, then `horae dr promote --to {other(active)}`"
    )
    return 0


def _promote(settings: Settings, args: argparse.Namespace) -> int:
    mine = settings.dr
    regions = _regions(settings)
    try:
        done = promote(
            _flow(settings, regions, other(mine.to)),
            dr_home(settings),
            declare_lost=mine.declare_lost,
            lag_timeout_s=mine.lag_timeout_s,
        )
    except (StackError, KafkaException) as exc:
        print(f"horae dr promote: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(done.to_dict(), sort_keys=True))
    target = regions[mine.to]
    exports = " ".join(f"{k}={v}" for k, v in target.env().items())
    print(
        f"region {mine.to} writes. Start its planners and dispatchers now (each as its own "
        f"Kafka user, docs/dr.md): export {exports}"
    )
    return 0
