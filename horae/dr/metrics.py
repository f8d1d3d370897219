"""The DR figures as Prometheus metrics, and the standby's "would be late by" figure.

``horae dr metrics`` prints them in Prometheus' text format (for node_exporter's textfile
collector, or any scraper that runs a command); the alert rules are in ``docs/operations.md``,
section "What to alert on".

"Would be late by": of the instants the standby's replicated planner state says are next to be
decided (``planner-state``, the changelog, latest record per trigger), the oldest one that is
due, and how long ago it became due. A promoted standby's planners start from exactly that state,
so this is how late its first decision would be if it were promoted now (0 when nothing is due).
It grows when the replication stalls (the standby's state stops moving while time goes on),
and, as a planner's own ``horae_planner_oldest_undecided_due_age_seconds``, when the writer
itself stops deciding.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from horae.contracts import events as ev


@dataclass(frozen=True)
class Due:
    """The oldest instant next to be decided in a region's planner state."""

    tenant: str
    trigger_id: str
    instant: datetime

    def late_by(self, now: float) -> float:
        """How long ago it became due (0 when it is not due yet)."""
        return max(0.0, now - self.instant.timestamp())


def oldest_due(states: Iterable[tuple[bytes | None, ev.PlannerState | None]]) -> Due | None:
    """Of a changelog's records in order (key, state; None: a tombstone), the latest state per
    trigger, and of the live ones the earliest next instant (None when no trigger has one)."""
    latest: dict[bytes, ev.PlannerState] = {}
    for key, state in states:
        if key is None:
            continue
        if state is None:
            latest.pop(key, None)
        else:
            latest[key] = state
    best: Due | None = None
    for s in latest.values():
        if s.state is not ev.DefinitionState.LIVE or s.next_instant is None:
            continue
        if best is None or s.next_instant < best.instant:
            best = Due(s.tenant, s.trigger_id, s.next_instant)
    return best


@dataclass(frozen=True)
class Figures:
    """What ``horae dr metrics`` exports (``status`` gathers it)."""

    active: str
    regions: dict[str, bool]  # answers
    mirror_running: bool
    lag: dict[str, int] | None  # None: not measurable (a region does not answer)
    last_decided_at: datetime | None  # the latest decision in the standby's ledger
    due: Due | None  # the oldest instant next to be decided, in the standby's state
    promotions: int


class DrCollector(Collector):
    """The figures of one reading, as gauges (each scrape of this collector returns them)."""

    def __init__(self, figures: Figures, now: float) -> None:
        self.figures = figures
        self.now = now

    def collect(self) -> Iterator[Metric]:
        f = self.figures
        up = GaugeMetricFamily(
            "horae_dr_region_up", "1 when the region's Kafka answers", labels=["region", "role"]
        )
        for name, answers in f.regions.items():
            up.add_metric([name, "writer" if name == f.active else "standby"], int(answers))
        yield up
        writer = GaugeMetricFamily(
            "horae_dr_writer", "1 for the region that writes", labels=["region"]
        )
        for name in f.regions:
            writer.add_metric([name], int(name == f.active))
        yield writer
        yield GaugeMetricFamily(
            "horae_dr_mirror_running",
            "1 when MirrorMaker 2 runs from the writer to the standby",
            value=int(f.mirror_running),
        )
        yield GaugeMetricFamily(
            "horae_dr_replication_lag_known",
            "1 when the lag could be measured (both regions answer)",
            value=int(f.lag is not None),
        )
        lag = GaugeMetricFamily(
            "horae_dr_replication_lag_records",
            "Committed records of the writer's topic not yet in the standby (absent when "
            "not measurable)",
            labels=["topic"],
        )
        for topic, n in sorted((f.lag or {}).items()):
            lag.add_metric([topic], n)
        yield lag
        if f.due is not None or f.regions.get(_standby(f), False):
            yield GaugeMetricFamily(
                "horae_dr_standby_would_be_late_by_seconds",
                "How long ago the oldest instant the standby would have to decide first, if "
                "promoted now, became due (from its replicated planner state; 0: none due)",
                value=0.0 if f.due is None else f.due.late_by(self.now),
            )
        if f.last_decided_at is not None:
            yield GaugeMetricFamily(
                "horae_dr_standby_last_decision_age_seconds",
                "Seconds since the latest decision the standby's ledger holds was decided",
                value=max(0.0, self.now - f.last_decided_at.timestamp()),
            )
        yield GaugeMetricFamily(
            "horae_dr_promotions", "Promotions recorded in the DR state", value=f.promotions
        )


def _standby(f: Figures) -> str:
    return next((name for name in f.regions if name != f.active), f.active)


def exposition(figures: Figures, now: float) -> bytes:
    """The figures in Prometheus' text format."""
    registry = CollectorRegistry()
    registry.register(DrCollector(figures, now))
    return generate_latest(registry)
