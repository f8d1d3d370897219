"""Prometheus metrics of the projector (one :class:`ProjectionMetrics` per registry).

- ``horae_projection_lag_records{schema,topic,partition}``: high watermark minus next offset;
- ``horae_projection_lag_seconds{schema,topic,partition}``: age of the last projected record
  at its commit (0 when the partition is caught up);
- ``horae_projection_rows_total{schema,table}`` and ``horae_projection_rows_per_second{schema}``
  (rate over the last ~10 s);
- ``horae_projection_duplicate_keys_total{schema,kind}``: second fire records under one key
  (``kind`` = ``different`` decision or ``identical`` re-send);
- ``horae_projection_errors_total{schema,cause}``: records skipped (kept in projection_errors):
  undecodable or unexpected ones, and ``cause="store"`` for records the store could not hold
  (set aside after the batch's retries, see :mod:`.isolate`);
- ``horae_projection_batch_seconds{schema}``, ``horae_projection_db_retries_total{schema}``;
- ``horae_projection_oldest_undispatched_due_age_seconds{schema,lane,tenant}``,
  ``horae_projection_undispatched_due_fires{schema,lane,tenant}`` and
  ``horae_projection_lane_queue_depth{schema,lane}``: webhook fires due, decided and not yet
  attempted (set by :class:`~horae.projections.undispatched.UndispatchedWatch`).
"""

from __future__ import annotations

import time
from collections import deque

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


class ProjectionMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.lag_records = Gauge(
            "horae_projection_lag_records",
            "Records behind the high watermark",
            ["schema", "topic", "partition"],
            registry=r,
        )
        self.lag_seconds = Gauge(
            "horae_projection_lag_seconds",
            "Age of the last projected record when committed; 0 when caught up",
            ["schema", "topic", "partition"],
            registry=r,
        )
        self.rows = Counter(
            "horae_projection_rows", "Rows projected", ["schema", "table"], registry=r
        )
        self.rows_per_second = Gauge(
            "horae_projection_rows_per_second", "Rows projected per second", ["schema"], registry=r
        )
        self.duplicate_keys = Counter(
            "horae_projection_duplicate_keys",
            "Second fire records under an existing fire key",
            ["schema", "kind"],
            registry=r,
        )
        self.errors = Counter(
            "horae_projection_errors",
            "Records skipped, kept in projection_errors (undecodable, unexpected, or refused by "
            "the store: cause store)",
            ["schema", "cause"],
            registry=r,
        )
        self.batch_seconds = Histogram(
            "horae_projection_batch_seconds",
            "Time to write one batch",
            ["schema"],
            registry=r,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
        )
        self.db_retries = Counter(
            "horae_projection_db_retries",
            "Reconnects after a database error, and retries of a batch the store refused",
            ["schema"],
            registry=r,
        )
        # the undispatched gauges (:mod:`horae.projections.undispatched`)
        self.undispatched_age = Gauge(
            "horae_projection_oldest_undispatched_due_age_seconds",
            "Age of the oldest webhook fire due, decided and not yet attempted (0 when none)",
            ["schema", "lane", "tenant"],
            registry=r,
        )
        self.undispatched = Gauge(
            "horae_projection_undispatched_due_fires",
            "Webhook fires due, decided and not yet attempted",
            ["schema", "lane", "tenant"],
            registry=r,
        )
        self.lane_queue_depth = Gauge(
            "horae_projection_lane_queue_depth",
            "Webhook fires due, decided and not yet attempted, per lane",
            ["schema", "lane"],
            registry=r,
        )
        self._window: deque[tuple[float, int]] = deque()

    def observe_rows(self, schema: str, n: int, now: float | None = None) -> None:
        """Feed the rows/s gauge (a sliding 10 s window)."""
        t = time.monotonic() if now is None else now
        self._window.append((t, n))
        while self._window and t - self._window[0][0] > 10.0:
            self._window.popleft()
        span = max(t - self._window[0][0], 1.0)
        self.rows_per_second.labels(schema).set(sum(k for _, k in self._window) / span)
