"""Dispatcher metrics (prometheus-client) on a registry of their own; ``horae dispatcher
--metrics-port`` serves them on ``/metrics``.

- ``horae_dispatch_delivery_lateness_seconds``: first attempt start minus the scheduled instant;
- ``horae_dispatch_lane_depth{lane}``: records of a lane not yet committed (end offset minus
  commit point, from the last fetch);
- ``horae_dispatch_attempts_total{result,target_class}``: ``result`` is the sender's transport
  result, ``target_class`` the answer's class (``2xx``..``5xx``, ``no_answer``);
- ``horae_dispatch_outcomes_total{state}`` and ``horae_dispatch_unknown_fraction`` (fires ended
  ``unknown`` among all ended fires);
- ``horae_dispatch_partition_share``: owned / total lane partitions, the share of every tenant's
  dispatch limits this process applies;
- ``horae_dispatch_breaker_trips_total``; in-flight sends, held orders by class (both refreshed
  at most every :data:`GAUGE_EVERY_S`), retries, callbacks by result, transaction aborts.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

GAUGE_EVERY_S = 0.25  # the loop refreshes its in-flight and held gauges at most this often
LATENESS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 3600)


def target_class(status: int | None) -> str:
    return f"{status // 100}xx" if status is not None and 100 <= status < 600 else "no_answer"


class DispatcherMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.lateness = Histogram(
            "horae_dispatch_delivery_lateness_seconds",
            "First attempt start minus the scheduled instant",
            buckets=LATENESS_BUCKETS,
            registry=r,
        )
        self.lane_depth = Gauge(
            "horae_dispatch_lane_depth", "Lane records not yet committed", ["lane"], registry=r
        )
        self.attempts = Counter(
            "horae_dispatch_attempts",
            "Attempts by transport result and answer class",
            ["result", "target_class"],
            registry=r,
        )
        self.outcomes = Counter(
            "horae_dispatch_outcomes", "Fires ended, by state", ["state"], registry=r
        )
        self.unknown_fraction = Gauge(
            "horae_dispatch_unknown_fraction",
            "Fires ended in the unknown state among all ended fires",
            registry=r,
        )
        self.breaker_trips = Counter(
            "horae_dispatch_breaker_trips", "Triggers paused by the breaker", registry=r
        )
        self.retries = Counter("horae_dispatch_retries", "Retry orders produced", registry=r)
        self.inflight = Gauge("horae_dispatch_inflight", "Sends in flight", registry=r)
        self.held = Gauge(
            "horae_dispatch_held_orders", "Orders waiting in memory", ["lane_class"], registry=r
        )
        self.callbacks = Counter(
            "horae_dispatch_callbacks", "Outcome callbacks by result", ["result"], registry=r
        )
        self.partition_share = Gauge(
            "horae_dispatch_partition_share",
            "Share of the lane partitions this process owns (its part of each tenant's limits)",
            registry=r,
        )
        self.aborts = Counter(
            "horae_dispatch_transaction_aborts", "Aborted transactions", registry=r
        )
        self._ended = 0
        self._unknown = 0
        self._attempts: dict[tuple[str, str], Any] = {}  # label children, looked up once
        self._outcomes: dict[str, Any] = {}
        self._held: dict[str, Any] = {}

    def attempt(self, result: str, klass: str) -> None:
        """Count one attempt (``horae_dispatch_attempts``; once per send, so the labelled child
        is looked up once per label pair)."""
        child = self._attempts.get((result, klass))
        if child is None:
            child = self._attempts[(result, klass)] = self.attempts.labels(result, klass)
        child.inc()

    def set_held(self, klass: str, n: int) -> None:
        child = self._held.get(klass)
        if child is None:
            child = self._held[klass] = self.held.labels(klass)
        child.set(n)

    def ended(self, state: str) -> None:
        child = self._outcomes.get(state)
        if child is None:
            child = self._outcomes[state] = self.outcomes.labels(state)
        child.inc()
        self._ended += 1
        self._unknown += state == "unknown"
        self.unknown_fraction.set(self._unknown / self._ended)
