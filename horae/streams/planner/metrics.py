"""Planner metrics (prometheus-client), on a registry of their own so that several workers in one
test process do not collide. ``horae planner --metrics-port`` serves them on ``/metrics``."""

from __future__ import annotations

import gc
from collections import Counter as Tally
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from horae.contracts import events as ev
from horae.contracts.binary_readers import intern_stats
from horae.contracts.codec import default_codec

_FIRED = ev.FireState.FIRED

if TYPE_CHECKING:
    from horae.ports import Emit
    from horae.streams.planner.sharing import SharedValues

LATENESS_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 3600)


class PlannerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.oldest_due_age = Gauge(
            "horae_planner_oldest_undecided_due_age_seconds",
            "Age of the oldest instant that is due and not yet decided (0 when none)",
            registry=r,
        )
        self.fires = Counter(
            "horae_planner_fires_committed",
            "Fire records committed, by state",
            ["state"],
            registry=r,
        )
        self.lateness = Histogram(
            "horae_planner_decision_lateness_seconds",
            "decided-at minus scheduled instant of committed fires",
            buckets=LATENESS_BUCKETS,
            registry=r,
        )
        self.partitions_owned = Gauge(
            "horae_planner_partitions_owned", "Partitions this worker owns", registry=r
        )
        self.clock_offset = Gauge(
            "horae_planner_clock_offset_seconds", "Broker clock minus local clock", registry=r
        )
        self.clock_gate_closed = Counter(
            "horae_planner_clock_gate_closed", "Times the clock gate closed", registry=r
        )
        self.transaction_aborts = Counter(
            "horae_planner_transaction_aborts", "Aborted transactions", registry=r
        )
        self.quarantined = Counter(
            "horae_planner_quarantined_records",
            "Definitions/commands quarantined",
            ["cause"],
            registry=r,
        )
        self.record_failures = Counter(
            "horae_planner_record_failures",
            "Input records whose handling raised, each attempt (by input: definitions, commands,"
            " outcomes); the last one is quarantined handler-error",
            ["input"],
            registry=r,
        )
        self.gc_frozen = Gauge(
            "horae_planner_gc_frozen_objects",
            "Objects in the garbage collector's permanent generation (gc.get_freeze_count)",
            registry=r,
        )
        self.gc_frozen.set_function(gc.get_freeze_count)

    def watch_sharing(self, shared: SharedValues) -> None:
        """Export the stats of the planner's shared values and of the codec's interned records
        (read when scraped: nothing is counted twice on the hot path)."""
        self.registry.register(_SharingCollector(shared))

    def observe_committed(self, outputs: Sequence[Emit], now: float) -> None:
        states: Tally[ev.FireState] = Tally()  # counters incremented once per batch and state
        for out in outputs:
            event = out.event
            if isinstance(event, ev.FireRecord):
                states[event.state] += 1  # a StrEnum: its label is its value
                if event.state is _FIRED:
                    late = event.decided_at.timestamp() - event.scheduled_at.timestamp()
                    self.lateness.observe(max(0.0, late))
            elif isinstance(event, ev.Quarantined):
                self.quarantined.labels(event.cause).inc()
        for state, n in states.items():
            self.fires.labels(state).inc(n)


class _SharingCollector(Collector):
    def __init__(self, shared: SharedValues) -> None:
        self.shared = shared

    def collect(self) -> Iterator[Metric]:
        s = self.shared.stats()
        prefix = "horae_planner_shared_values"
        yield CounterMetricFamily(f"{prefix}_hits", "Shared-value lookups found", value=s.hits)
        yield CounterMetricFamily(f"{prefix}_misses", "Shared-value lookups kept", value=s.misses)
        yield CounterMetricFamily(
            f"{prefix}_evictions",
            "Shared values forgotten (two-generation bound)",
            value=s.evictions,
        )
        yield GaugeMetricFamily(f"{prefix}_size", "Shared values held", value=s.size)
        prefix = "horae_codec_interned"
        misses = CounterMetricFamily(
            f"{prefix}_misses", "Interned records decoded, by type", labels=["type"]
        )
        evictions = CounterMetricFamily(
            f"{prefix}_evictions", "Interned records forgotten, by type", labels=["type"]
        )
        size = GaugeMetricFamily(
            f"{prefix}_size", "Interned records held, by type", labels=["type"]
        )
        for name, t in intern_stats(default_codec().current.readers).items():
            misses.add_metric([name], t.misses)
            evictions.add_metric([name], t.evictions)
            size.add_metric([name], t.size)
        yield from (misses, evictions, size)
