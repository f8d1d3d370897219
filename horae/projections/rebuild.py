"""Rebuild, verify, swap: the read models are disposable, these prove it.

- :func:`rebuild` (as the owner) drops the shadow schema, migrates it (granting ``roles`` their
  privileges on it, so it can be swapped in under a running projector), snapshots the end
  offsets of every projected partition and replays the topics from the beginning into it (a
  :class:`Projector` in replay mode), reporting progress (records, rate, ETA) through a callback.
- :func:`verify` compares two schemas table by table, row by row by primary key: rows only on one
  side and rows whose values differ (all columns). Zero divergence means the live schema is
  exactly what the topics produce; the reader role may run it. Compare at equal offsets (a live
  projector still running is ahead of the shadow's snapshot; the report says whether the offsets
  agree).
- :func:`horae.projections.schema.swap` makes the shadow live.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

import psycopg
from confluent_kafka import Consumer, TopicPartition
from psycopg import sql as pgsql

from horae.kafka.config import client_config
from horae.kafka.reader import end_offset
from horae.projections import schema as pschema
from horae.projections.metrics import ProjectionMetrics
from horae.projections.projector import TP, Projector, ProjectorConfig
from horae.projections.roles import Roles
from horae.projections.rows import Batch
from horae.projections.store import ApplyResult

#: compared tables and their primary keys
TABLES: dict[str, tuple[str, ...]] = {
    "triggers": ("tenant", "trigger_id"),
    "trigger_versions": ("tenant", "trigger_id", "version"),
    "trigger_runs": ("tenant", "trigger_id"),
    "tenant_suspensions": ("tenant",),
    "fires": ("fire_key",),
    "fire_duplicates": ("src_topic", "src_partition", "src_offset"),
    "attempts": ("fire_key", "n"),
    "work_outcomes": ("fire_key",),
    "schedule_events": ("event_id",),
    "audit_entries": ("audit_id",),
    "projection_errors": ("topic", "partition", "offset"),
}


@dataclass
class Progress:
    total: int
    done: int = 0
    started: float = field(default_factory=time.monotonic)

    @property
    def rate(self) -> float:
        return self.done / max(time.monotonic() - self.started, 1e-6)

    @property
    def eta_s(self) -> float | None:
        rate = self.rate
        return None if rate <= 0 else max(0.0, (self.total - self.done) / rate)

    def render(self, width: int = 30) -> str:
        frac = 1.0 if self.total <= 0 else min(1.0, self.done / self.total)
        bar = "#" * int(frac * width) + "-" * (width - int(frac * width))
        eta = self.eta_s
        eta_txt = "?" if eta is None else f"{eta:.0f}s"
        return (
            f"[{bar}] {self.done}/{self.total} records {frac * 100:5.1f}% "
            f"{self.rate:,.0f} rec/s ETA {eta_txt}"
        )


def end_offsets(bootstrap: str, topics: list[str]) -> dict[TP, int]:
    """The end (last stable offset) of every partition of ``topics`` that exist."""
    consumer = Consumer(
        client_config(bootstrap, {"group.id": "horae-rebuild-probe", "log_level": 3,
                                  "isolation.level": "read_committed", "enable.auto.commit": False})
    )  # fmt: skip
    try:
        meta = consumer.list_topics(timeout=30)
        ends: dict[TP, int] = {}
        for name in topics:
            if name not in meta.topics or meta.topics[name].error is not None:
                continue
            for p in meta.topics[name].partitions:
                ends[(name, p)] = end_offset(consumer, TopicPartition(name, p))
        return ends
    finally:
        consumer.close()


def rebuild(
    config: ProjectorConfig,
    on_progress: Callable[[Progress], None] = lambda p: None,
    stop_event: threading.Event | None = None,
    roles: Roles | None = None,
) -> Progress:
    """Replay every projected topic from the beginning into ``config.schema`` (dropped first;
    ``config.database_url`` is the owner's), then refresh its planner statistics."""
    with psycopg.connect(config.database_url, autocommit=True) as conn:
        pschema.drop(conn, config.schema)
        pschema.migrate(conn, config.schema, roles)
    ends = end_offsets(config.bootstrap, config.existing_topics())
    progress = Progress(total=sum(ends.values()))
    last = [0.0]

    def hook(batch: Batch, result: ApplyResult) -> None:
        progress.done += batch.records
        now = time.monotonic()
        if now - last[0] >= 0.5:
            last[0] = now
            on_progress(progress)

    replay = ProjectorConfig(**{**config.__dict__, "stop_at": ends})
    Projector(replay, ProjectionMetrics(), on_batch=hook).run(stop_event)
    with psycopg.connect(config.database_url, autocommit=True) as conn:
        pschema.analyze(conn, config.schema)
    progress.done = max(progress.done, 0)
    on_progress(progress)
    return progress


def progress_printer(stream: TextIO = sys.stderr) -> Callable[[Progress], None]:
    """A progress bar on a terminal (redrawn in place), else one line per report."""
    tty = stream.isatty()

    def show(p: Progress) -> None:
        stream.write(("\r" if tty else "") + p.render() + ("" if tty else "\n"))
        stream.flush()

    return show


# --- verify ----------------------------------------------------------------------------------
@dataclass
class TableDiff:
    live_rows: int
    shadow_rows: int
    only_live: int
    only_shadow: int
    different: int
    samples: list[str]

    @property
    def divergent(self) -> int:
        return self.only_live + self.only_shadow + self.different


@dataclass
class VerifyReport:
    tables: dict[str, TableDiff]
    offsets_equal: bool

    @property
    def divergence(self) -> int:
        return sum(t.divergent for t in self.tables.values())

    def render(self) -> str:
        lines = [f"{'table':<18}{'live':>10}{'shadow':>10}{'only live':>11}"
                 f"{'only shadow':>13}{'different':>11}"]  # fmt: skip
        for name, t in self.tables.items():
            lines.append(
                f"{name:<18}{t.live_rows:>10}{t.shadow_rows:>10}{t.only_live:>11}"
                f"{t.only_shadow:>13}{t.different:>11}"
            )
            lines.extend(f"    {s}" for s in t.samples)
        lines.append(f"offsets equal: {'yes' if self.offsets_equal else 'NO (compare at rest)'}")
        lines.append(f"divergence: {self.divergence} rows")
        return "\n".join(lines)


def _diff_table(
    conn: psycopg.Connection[Any], live: str, shadow: str, table: str, keys: tuple[str, ...],
    samples: int,
) -> TableDiff:  # fmt: skip
    lt = pgsql.Identifier(live, table)
    st = pgsql.Identifier(shadow, table)
    using = pgsql.SQL(", ").join(pgsql.Identifier(k) for k in keys)
    first = pgsql.Identifier(keys[0])
    counts = pgsql.SQL(
        "SELECT count(l.{first}), count(s.{first}),"
        " count(*) FILTER (WHERE s.{first} IS NULL),"
        " count(*) FILTER (WHERE l.{first} IS NULL),"
        " count(*) FILTER (WHERE l.{first} IS NOT NULL AND s.{first} IS NOT NULL"
        "   AND to_jsonb(l) IS DISTINCT FROM to_jsonb(s))"
        " FROM {lt} l FULL JOIN {st} s USING ({using})"
    ).format(first=first, lt=lt, st=st, using=using)
    row = conn.execute(counts).fetchone()
    assert row is not None
    live_rows, shadow_rows, only_live, only_shadow, different = (int(v) for v in row)
    found: list[str] = []
    if only_live + only_shadow + different and samples > 0:
        keycols = pgsql.SQL(", ").join(pgsql.SQL("{}").format(pgsql.Identifier(k)) for k in keys)
        detail = pgsql.SQL(
            "SELECT CASE WHEN s.{first} IS NULL THEN 'only live' WHEN l.{first} IS NULL"
            " THEN 'only shadow' ELSE 'different' END, {keycols}"
            " FROM {lt} l FULL JOIN {st} s USING ({using})"
            " WHERE s.{first} IS NULL OR l.{first} IS NULL"
            "   OR to_jsonb(l) IS DISTINCT FROM to_jsonb(s)"
            " ORDER BY {keycols} LIMIT {n}"
        ).format(first=first, keycols=keycols, lt=lt, st=st, using=using, n=pgsql.Literal(samples))
        for kind, *key in conn.execute(detail).fetchall():
            found.append(
                f"{kind}: " + ", ".join(f"{k}={v}" for k, v in zip(keys, key, strict=True))
            )
    return TableDiff(live_rows, shadow_rows, only_live, only_shadow, different, found)


def verify(database_url: str, live: str, shadow: str, samples: int = 5) -> VerifyReport:
    """Compare ``live`` and ``shadow`` row by row (one repeatable-read snapshot)."""
    with psycopg.connect(database_url, autocommit=False) as conn:
        conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        for s in (live, shadow):
            if not pschema.schema_exists(conn, s):
                raise ValueError(f"schema {s!r} does not exist")
        tables = {
            name: _diff_table(conn, live, shadow, name, keys, samples)
            for name, keys in TABLES.items()
        }
        equal = pschema.stored_offsets(conn, live) == pschema.stored_offsets(conn, shadow)
        conn.rollback()
    return VerifyReport(tables, equal)
