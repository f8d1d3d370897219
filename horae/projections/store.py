"""One batch = one PostgreSQL transaction: its rows and the offsets it consumed up to.

:class:`ProjectionStore` owns one connection whose ``search_path`` is the target schema. Per batch
(:meth:`ProjectionStore.apply`), inside a single transaction:

1. check the schema's generation (a swap since connecting raises :class:`GenerationChanged`);
   a plain read: the projector role may not lock ``projection_meta``;
2. lock the stored offsets of the batch's partitions (``SELECT ... FOR UPDATE``) and drop any
   record below them (already applied by someone: a replay is a no-op even without the merge
   rules);
3. COPY (binary) each non-empty staging table, then run the ``merge/*.sql`` statements (multi-row
   ``INSERT ... ON CONFLICT``; replays of the same record are no-ops, a second fire record under
   a key goes to ``fire_duplicates``);
4. upsert the next offsets; COMMIT.

Any exception leaves nothing behind (the transaction rolls back). :func:`is_record_fault` tells
the caller whether it was the records' fault (a value the database cannot hold: the batch is
retried a few times, then split to set that record aside, :mod:`.isolate`) or the database's
(the caller reconnects and seeks back to the stored offsets). Not thread-safe: one store per
projector thread.

The store needs only the projector role's privileges (:mod:`horae.projections.roles`) on a
migrated schema. On connecting it migrates a schema that still needs migrations, which only the
owner may do: as any other role it raises :class:`SchemaNotMigrated` instead.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any

import psycopg

from horae.projections import schema as pschema
from horae.projections.rows import STAGE_COLUMNS, STAGE_TYPES, Batch, Row, Stage
from horae.projections.rows import ApplyResult as ApplyResult
from horae.projections.rows import position_of as position_of
from horae.projections.rows import unapplied as unapplied
from horae.projections.sqlfiles import sql

#: merge statements per staging table, in order
MERGES: dict[Stage, tuple[str, ...]] = {
    Stage.DEFINITIONS: ("merge/definitions", "merge/triggers"),
    Stage.FIRES: ("merge/fires", "merge/fires_replaced"),  # the first returns the duplicates
    Stage.ATTEMPTS: ("merge/attempts", "merge/attempts_fires"),
    Stage.OUTCOMES: ("merge/outcomes",),
    Stage.SCHEDULE_EVENTS: ("merge/schedule_events", "merge/trigger_runs"),
    Stage.AUDIT: ("merge/audit", "merge/tenant_suspensions"),
    Stage.DEAD_LETTERS: ("merge/dead_letters",),
    Stage.ERRORS: ("merge/errors",),
}


class GenerationChanged(RuntimeError):
    """The schema was swapped under the store: reconnect and reseek from its stored offsets."""


class SchemaNotMigrated(RuntimeError):
    """The schema needs migrations this role may not apply: run ``horae migrate`` as the owner."""


#: SQLSTATE classes of errors a record's own values cause: data exceptions (22: a NUL byte in
#: text, an invalid JSON escape, a number out of range), integrity violations (23) and program
#: limits (54: an index row too large, a value nested too deep)
_RECORD_FAULT_CLASSES = ("22", "23", "54")


def is_record_fault(exc: BaseException) -> bool:
    """Whether ``exc``, raised by :meth:`ProjectionStore.apply`, is the fault of a record's
    values (the same record fails again, wherever it is: split the batch and set it aside)
    rather than of the database (connection, privileges, a swapped schema: retry as it is).
    Values psycopg refuses before sending them (a lone surrogate, an integer too large) raise
    ``ValueError``, ``TypeError`` or ``OverflowError`` and count as the record's too."""
    if isinstance(exc, GenerationChanged):
        return False
    if isinstance(exc, psycopg.Error):
        if isinstance(exc, psycopg.DataError | psycopg.IntegrityError):
            return True
        return (exc.sqlstate or "")[:2] in _RECORD_FAULT_CLASSES
    return isinstance(exc, ValueError | TypeError | OverflowError)


def describe_fault(stage: Stage, exc: BaseException) -> str:
    """The cause of a record fault as ``projection_errors.detail``: the table, the SQLSTATE, the
    primary message and its detail (never the context, which names the record's line in its
    batch), with NUL bytes and unencodable characters escaped so the detail can be stored."""
    if isinstance(exc, psycopg.Error):
        message = exc.diag.message_primary or (str(exc).splitlines() or [""])[0]
        text = f"{stage.value}: {exc.sqlstate or type(exc).__name__} {message}"
        if exc.diag.message_detail:
            text = f"{text} ({exc.diag.message_detail})"
    else:
        text = f"{stage.value}: {type(exc).__name__}: {exc}"
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text.replace("\x00", "\\x00")[:2000]


class ProjectionStore:
    """Writes batches into ``schema``; see the module docstring for the transaction. The
    PostgreSQL :class:`horae.ports.ReadModelStore`; ``stage_topics`` names the topic each staging
    table's rows come from."""

    def __init__(
        self,
        database_url: str,
        schema: str,
        connect_timeout_s: int = 5,
        stage_topics: Mapping[Stage, str] | None = None,
    ) -> None:
        self.database_url = database_url
        self.schema = schema
        self.stage_topics: Mapping[Stage, str] = stage_topics or {}
        self.connect_timeout_s = connect_timeout_s
        self._conn: psycopg.Connection[Any] | None = None
        self.generation: uuid.UUID | None = None

    # --- connection --------------------------------------------------------------------
    @property
    def conn(self) -> psycopg.Connection[Any]:
        if self._conn is None or self._conn.closed:
            self.connect()
        assert self._conn is not None
        return self._conn

    def connect(self) -> None:
        """(Re)connect, migrate the schema if needed (see the module docstring), create the
        staging tables."""
        self.close()
        conn = psycopg.connect(
            self.database_url,
            autocommit=False,
            connect_timeout=self.connect_timeout_s,
            application_name=f"horae-projector:{self.schema}",
        )
        try:
            conn.autocommit = True
            todo = pschema.pending(conn, self.schema)
            if todo:
                try:
                    pschema.migrate(conn, self.schema)
                except psycopg.errors.InsufficientPrivilege as exc:
                    raise SchemaNotMigrated(
                        f"schema {self.schema} needs {', '.join(todo)} and this role may not "
                        f"migrate it ({exc}): run `horae migrate` as the owner (HORAE_DATABASE_URL)"
                    ) from exc
            pschema.set_search_path(conn, self.schema)
            # Rows and offsets commit together, so losing the last commits in a database crash
            # only rewinds the projection consistently (it re-reads from the older offsets):
            # no need to wait for the WAL flush.
            conn.execute("SET synchronous_commit TO off")
            conn.execute(sql("stage"))
            self.generation = pschema.generation(conn, self.schema)
            conn.autocommit = False
        except BaseException:
            conn.close()
            raise
        self._conn = conn

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            finally:
                self._conn = None

    # --- reads ---------------------------------------------------------------------------
    def stored_offsets(self) -> dict[tuple[str, int], int]:
        conn = self.conn
        with conn.transaction():
            return pschema.stored_offsets(conn, self.schema)

    # --- the batch transaction -----------------------------------------------------------
    def apply(self, batch: Batch, stage_topics: Mapping[Stage, str] | None = None) -> ApplyResult:
        """Write ``batch`` and its offsets in one transaction (see the module docstring).
        ``stage_topics`` (default: the store's) names the topic each staging table's rows come
        from."""
        if stage_topics is None:
            stage_topics = self.stage_topics
        result = ApplyResult()
        if not batch.next_offsets:
            return result
        conn = self.conn
        with conn.transaction(), conn.cursor() as cur:
            row = cur.execute("SELECT generation FROM projection_meta").fetchone()
            if row is None or uuid.UUID(str(row[0])) != self.generation:
                raise GenerationChanged(f"schema {self.schema} has a new generation")
            tps = list(batch.next_offsets)
            cur.execute(
                sql("merge/lock_offsets"),
                {"topics": [t for t, _ in tps], "partitions": [p for _, p in tps]},
            )
            stored = {(str(t), int(p)): int(o) for t, p, o in cur.fetchall()}
            for stage, rows in batch.rows.items():
                if stored:
                    rows = unapplied(stage, rows, stage_topics.get(stage, ""), stored, result)
                if not rows:
                    continue
                self._copy(cur, stage, rows)
                result.rows[stage] = len(rows)
            for stage in MERGES:
                if stage not in result.rows:
                    continue
                for name in MERGES[stage]:
                    cur.execute(sql(name))
                    if name == "merge/fires":
                        for (identical,) in cur.fetchall():
                            if identical:
                                result.duplicates_identical += 1
                            else:
                                result.duplicates_different += 1
            offsets = [
                (t, p, o) for (t, p), o in batch.next_offsets.items() if o > stored.get((t, p), -1)
            ]
            if offsets:
                cur.execute(
                    sql("merge/offsets"),
                    {
                        "topics": [t for t, _, _ in offsets],
                        "partitions": [p for _, p, _ in offsets],
                        "offsets": [o for _, _, o in offsets],
                    },
                )
        return result

    @staticmethod
    def _copy(cur: psycopg.Cursor[Any], stage: Stage, rows: Iterable[Row]) -> None:
        cols = ", ".join(f'"{c}"' for c in STAGE_COLUMNS[stage])
        statement = f"COPY {stage.value} ({cols}) FROM STDIN (FORMAT BINARY)"
        with cur.copy(statement) as copy:
            copy.set_types(list(STAGE_TYPES[stage]))
            for row in rows:
                copy.write_row(row)
