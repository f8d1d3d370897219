"""History queries the API uses (read-only). Every query the API uses is scoped to one tenant: a
tenant can never read another tenant's rows through them (invariant 4); only the projector's
gauges (:meth:`HistoryQueries.undispatched`) read across tenants.

- :meth:`HistoryQueries.fires` — fires of a trigger whose scheduled instant is in a window,
  optionally filtered by state (matches the ``status`` — decision refined by dispatch/outcome,
  e.g. ``succeeded`` — or the decision ``state``, e.g. ``skipped``), oldest first, with an opaque
  cursor for the next page;
- :meth:`HistoryQueries.search_fires` — a tenant's fires across its triggers in a window, by
  shown state (``status``) and label, oldest first, keyset-paged (``GET /v1/fires``);
- :meth:`HistoryQueries.fire` — one fire with its attempts, every outcome recorded for it (the
  dispatcher's and each callback's) and the authoritative one (a callback's over the
  dispatcher's, then the later record), each with its tzdata version;
- :meth:`HistoryQueries.events` — the schedule events of a trigger (paused, resumed, skipped and
  expired ranges, completed, recomputed, ...) emitted in a window, oldest first, cursor-paginated;
- :meth:`HistoryQueries.lateness_by_trigger` / :meth:`HistoryQueries.lateness` — p50/p95/p99 of
  lateness (``fires.lateness_ms``: a webhook target's first attempt start minus due time, an
  event target's decision minus due time, ms) per trigger / per tenant over a window;
- :meth:`HistoryQueries.triggers` — triggers of a tenant (latest version), cursor-paginated;
- for the HTTP API: :meth:`HistoryQueries.trigger_row` / :meth:`HistoryQueries.trigger_rows`
  (full latest versions), :meth:`HistoryQueries.lateness_summary` (with max and missed),
  :meth:`HistoryQueries.audit_entries`;
- for the projector's gauges, across tenants: :meth:`HistoryQueries.undispatched`.

Each call runs in its own short, read-only transaction with ``search_path`` set to the schema;
connections come from a ``psycopg_pool.ConnectionPool`` or a single ``psycopg.Connection``, which
should connect as the reader role (``HORAE_READER_DATABASE_URL``, see
:mod:`horae.projections.roles`): PostgreSQL then refuses any write whatever the SQL.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg import sql as pgsql
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from horae.projections.sqlfiles import sql

MAX_LIMIT = 1000


class BadCursor(ValueError):
    """A cursor that this API did not hand out."""


@dataclass(frozen=True)
class RowPage:
    items: list[dict[str, Any]]
    next_cursor: str | None


@dataclass(frozen=True)
class FireDetail:
    """A fire (its decision, tzdata version and the authoritative outcome's columns), its
    attempts by number, every outcome in the order recorded, and the authoritative one (the
    row of ``outcomes`` the fire shows; None before any)."""

    fire: dict[str, Any]
    attempts: list[dict[str, Any]]
    outcome: dict[str, Any] | None
    outcomes: list[dict[str, Any]]


@dataclass(frozen=True)
class Lateness:
    fires: int
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None
    trigger_id: str | None = None


def _encode_cursor(parts: list[str]) -> str:
    return base64.urlsafe_b64encode(json.dumps(parts).encode()).decode().rstrip("=")


def _after(cursor: str | None) -> tuple[datetime | None, str | None]:
    """The ``(time, key)`` a keyset cursor names (none without a cursor)."""
    if not cursor:
        return None, None
    text, after_key = _decode_cursor(cursor, 2)
    try:
        return datetime.fromisoformat(text), after_key
    except ValueError as exc:
        raise BadCursor("malformed cursor") from exc


def _page(rows: list[dict[str, Any]], limit: int, at: str, key: str) -> RowPage:
    """The first ``limit`` of ``rows`` (one more was read), and the cursor after the last of
    them (``at``, ``key``: its keyset columns) when there are more."""
    more = len(rows) > limit
    rows = rows[:limit]
    last = rows[-1] if rows else None
    token = _encode_cursor([last[at].isoformat(), last[key]]) if more and last else None
    return RowPage(rows, token)


def _decode_cursor(cursor: str, n: int) -> list[str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        parts = json.loads(raw)
    except (ValueError, json.JSONDecodeError) as exc:
        raise BadCursor("malformed cursor") from exc
    if not isinstance(parts, list) or len(parts) != n or not all(isinstance(p, str) for p in parts):
        raise BadCursor("malformed cursor")
    return parts


class HistoryQueries:
    def __init__(
        self, source: ConnectionPool[Any] | psycopg.Connection[Any], schema: str = "horae"
    ) -> None:
        self.source = source
        self.schema = schema

    @contextmanager
    def _cursor(self) -> Iterator[psycopg.Cursor[dict[str, Any]]]:
        if isinstance(self.source, psycopg.Connection):
            yield from self._in_tx(self.source)
        else:
            with self.source.connection() as conn:
                yield from self._in_tx(conn)

    def _in_tx(self, conn: psycopg.Connection[Any]) -> Iterator[psycopg.Cursor[dict[str, Any]]]:
        with conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
            cur.execute(
                pgsql.SQL(
                    "SET LOCAL search_path TO {}; SET LOCAL transaction_read_only TO on"
                ).format(pgsql.Identifier(self.schema))
            )
            yield cur

    def fires(
        self,
        tenant: str,
        trigger_id: str,
        since: datetime,
        until: datetime,
        states: Sequence[str] | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> RowPage:
        params = {"tenant": tenant, "trigger_id": trigger_id, "since": since, "until": until,
                  "states": list(states) if states else None}  # fmt: skip
        return self._keyset("queries/fires_page", params, limit, cursor, "scheduled_at", "fire_key")

    def last_fires(
        self, tenant: str, trigger_ids: Sequence[str], before: datetime
    ) -> dict[str, dict[str, Any]]:
        """The latest fire scheduled before ``before`` of each of ``trigger_ids`` that has one
        (by trigger id): one statement, an index step per trigger."""
        params = {"tenant": tenant, "trigger_ids": list(trigger_ids), "before": before}
        with self._cursor() as cur:
            rows = cur.execute(sql("queries/last_fires"), params).fetchall()
        return {r["trigger_id"]: r for r in rows}

    def search_fires(
        self,
        tenant: str,
        since: datetime,
        until: datetime,
        states: Sequence[str] | None = None,
        labels: dict[str, str] | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> RowPage:
        """A tenant's fires scheduled in ``[since, until)``, oldest first, keyset-paged on
        ``(scheduled_at, fire_key)``: only those whose shown state (``status``) is one of
        ``states`` and whose trigger's latest version has every label of ``labels``. One
        transaction: the labelled triggers' ids, then one index range per state (the
        ``fires_tenant_status`` index), or the tenant's fires by time
        (``fires_tenant_scheduled``)."""
        limit = max(1, min(limit, MAX_LIMIT))
        after_at, after_key = _after(cursor)
        params: dict[str, Any] = {"tenant": tenant, "since": since, "until": until,
                                  "states": sorted(set(states)) if states else None,
                                  "trigger_ids": None, "after_at": after_at,
                                  "after_key": after_key, "limit": limit + 1}  # fmt: skip
        with self._cursor() as cur:
            if labels:
                found = cur.execute(
                    sql("queries/labelled_triggers"),
                    {"tenant": tenant, "labels": json.dumps(labels)},
                ).fetchall()
                if not found:
                    return RowPage([], None)
                params["trigger_ids"] = [r["trigger_id"] for r in found]
            name = "queries/fires_search_states" if states else "queries/fires_search"
            rows = cur.execute(sql(name), params).fetchall()
        return _page(rows, limit, "scheduled_at", "fire_key")

    def undispatched(self, now: datetime) -> list[dict[str, Any]]:
        """Rows ``lane, tenant, fires, oldest_due_at``: webhook fires due at ``now`` or before,
        decided (fired) and not yet attempted, per lane and tenant (every tenant: the platform's
        gauges, never an answer to a tenant)."""
        with self._cursor() as cur:
            return cur.execute(sql("queries/undispatched"), {"now": now}).fetchall()

    def fire(self, tenant: str, fire_key: str) -> FireDetail | None:
        params = {"tenant": tenant, "fire_key": fire_key}
        with self._cursor() as cur:
            fire = cur.execute(sql("queries/fire"), params).fetchone()
            if fire is None:
                return None
            attempts = cur.execute(sql("queries/fire_attempts"), params).fetchall()
            outcomes = cur.execute(sql("queries/fire_outcomes"), params).fetchall()
        shown = (fire["outcome_src_partition"], fire["outcome_src_offset"])
        outcome = next(
            (o for o in outcomes if (o["src_partition"], o["src_offset"]) == shown), None
        )
        return FireDetail(fire, attempts, outcome, outcomes)

    def events(
        self,
        tenant: str,
        trigger_id: str,
        since: datetime,
        until: datetime,
        limit: int = 100,
        cursor: str | None = None,
    ) -> RowPage:
        params = {"tenant": tenant, "trigger_id": trigger_id, "since": since, "until": until}
        return self._keyset("queries/events_page", params, limit, cursor, "emitted_at", "event_id")

    def lateness_by_trigger(
        self, tenant: str, since: datetime, until: datetime, trigger_id: str | None = None
    ) -> list[Lateness]:
        params = {"tenant": tenant, "since": since, "until": until, "trigger_id": trigger_id}
        with self._cursor() as cur:
            rows = cur.execute(sql("queries/lateness_by_trigger"), params).fetchall()
        return [
            Lateness(r["fires"], r["p50"], r["p95"], r["p99"], trigger_id=r["trigger_id"])
            for r in rows
        ]

    def lateness(self, tenant: str, since: datetime, until: datetime) -> Lateness:
        params = {"tenant": tenant, "since": since, "until": until}
        with self._cursor() as cur:
            r = cur.execute(sql("queries/lateness_tenant"), params).fetchone()
        assert r is not None
        return Lateness(r["fires"], r["p50"], r["p95"], r["p99"])

    def triggers(
        self,
        tenant: str,
        limit: int = 100,
        cursor: str | None = None,
        include_deleted: bool = False,
    ) -> RowPage:
        limit = max(1, min(limit, MAX_LIMIT))
        after = _decode_cursor(cursor, 1)[0] if cursor else None
        params = {"tenant": tenant, "after": after, "limit": limit + 1,
                  "include_deleted": include_deleted}  # fmt: skip
        with self._cursor() as cur:
            rows = cur.execute(sql("queries/triggers_page"), params).fetchall()
        more = len(rows) > limit
        rows = rows[:limit]
        return RowPage(rows, _encode_cursor([rows[-1]["trigger_id"]]) if more else None)

    # --- the HTTP API's queries (horae.api.adapters) ------------------------------------------

    def trigger_row(self, tenant: str, trigger_id: str) -> dict[str, Any] | None:
        """The latest version of a trigger in full (``trigger_versions`` columns and
        ``first_authored_at``), deleted ones included."""
        with self._cursor() as cur:
            row: dict[str, Any] | None = cur.execute(
                sql("queries/api_trigger"), {"tenant": tenant, "trigger_id": trigger_id}
            ).fetchone()
        return row

    def trigger_rows(
        self,
        tenant: str,
        limit: int = 100,
        cursor: str | None = None,
        state: str | None = None,
        labels: dict[str, str] | None = None,
        defaults: dict[str, dict[str, Any]] | None = None,
    ) -> RowPage:
        """Latest versions by trigger id, each rendered as the API's TriggerOut JSON text
        (``trigger_id, version, state, labels, recurrence_key, body``: see the SQL); ``state``
        (default: all but deleted) and ``labels`` (all of them) filter; ``defaults``: the JSON
        of each sub-record's defaults (``recurrence``, ``target``, ``policies``, ``retry``,
        ``quotas``) for rows projected before a field existed."""
        limit = max(1, min(limit, MAX_LIMIT))
        after = _decode_cursor(cursor, 1)[0] if cursor else None
        params = {"tenant": tenant, "after": after, "limit": limit + 1, "state": state,
                  "labels": json.dumps(labels) if labels else None}  # fmt: skip
        for name in ("recurrence", "target", "policies", "retry", "quotas"):
            params[name] = json.dumps((defaults or {}).get(name, {}))
        with self._cursor() as cur:
            rows = cur.execute(sql("queries/api_triggers_page"), params).fetchall()
        more = len(rows) > limit
        rows = rows[:limit]
        return RowPage(rows, _encode_cursor([rows[-1]["trigger_id"]]) if more else None)

    def _keyset(
        self, name: str, params: dict[str, Any], limit: int, cursor: str | None, at: str, key: str
    ) -> RowPage:
        limit = max(1, min(limit, MAX_LIMIT))
        after_at, after_key = _after(cursor)
        params = {**params, "after_at": after_at, "after_key": after_key, "limit": limit + 1}
        with self._cursor() as cur:
            rows = cur.execute(sql(name), params).fetchall()
        return _page(rows, limit, at, key)

    def lateness_summary(
        self, tenant: str, since: datetime, until: datetime, trigger_id: str | None = None
    ) -> list[dict[str, Any]]:
        """Rows ``trigger_id, fires, p50, p99, max, missed``: first the total (``trigger_id``
        NULL), then one per trigger, over fires due in ``[since, until)``."""
        params = {"tenant": tenant, "since": since, "until": until, "trigger_id": trigger_id}
        with self._cursor() as cur:
            return cur.execute(sql("queries/api_lateness"), params).fetchall()

    def audit_entries(
        self,
        tenant: str,
        since: datetime,
        until: datetime,
        limit: int = 100,
        cursor: str | None = None,
    ) -> RowPage:
        """The audit entries of a tenant in ``[since, until)``, oldest first."""
        params = {"tenant": tenant, "since": since, "until": until}
        return self._keyset("queries/api_audit_page", params, limit, cursor, "at", "audit_id")

    def audit_entry(self, tenant: str, audit_id: str) -> dict[str, Any] | None:
        """One audit entry of ``tenant`` by id (``None``: none, or another tenant's)."""
        with self._cursor() as cur:
            found: dict[str, Any] | None = cur.execute(
                sql("queries/audit_entry"), {"tenant": tenant, "audit_id": audit_id}
            ).fetchone()
        return found

    def dead_letters(
        self,
        tenant: str,
        *,
        ids: Sequence[str] | None = None,
        trigger_id: str | None = None,
        labels: dict[str, str] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        cause: str | None = None,
        state: str | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> RowPage:
        """A tenant's dead letters, oldest death first, keyset-paged on ``(dead_at, dlq_id)``:
        those of ``ids``, of ``trigger_id``, of the triggers whose latest version has every
        label of ``labels``, dead in ``[since, until)``, whose cause holds ``cause``, ``state``
        ``dead`` (never redriven) or ``redriven``. One transaction (the labelled triggers'
        ids, then the page, from the ``dead_letters_tenant_*`` indexes)."""
        limit = max(1, min(limit, MAX_LIMIT))
        after_at, after_key = _after(cursor)
        params: dict[str, Any] = {"tenant": tenant, "ids": list(ids) if ids is not None else None,
                                  "trigger_ids": [trigger_id] if trigger_id else None,
                                  "since": since, "until": until, "cause": cause or None,
                                  "state": state, "after_at": after_at, "after_key": after_key,
                                  "limit": limit + 1}  # fmt: skip
        with self._cursor() as cur:
            if labels:
                found = cur.execute(
                    sql("queries/labelled_triggers"),
                    {"tenant": tenant, "labels": json.dumps(labels)},
                ).fetchall()
                chosen = {r["trigger_id"] for r in found}
                if trigger_id:
                    chosen &= {trigger_id}
                if not chosen:
                    return RowPage([], None)
                params["trigger_ids"] = sorted(chosen)
            rows = cur.execute(sql("queries/dead_letters_page"), params).fetchall()
        return _page(rows, limit, "dead_at", "dlq_id")
