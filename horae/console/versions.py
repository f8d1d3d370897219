"""A schedule's version history: every version of its definition, newest first, who wrote it
(the definition's ``author`` and ``role``: for a version written through the API, the token's
subject and roles), when (``authored_at``), and what changed from the version before.

The API has no route for a trigger's earlier versions; the read models keep every one (table
``trigger_versions``, one row per accepted version). Like the console's two other reads without a
route, this one reads through the API's :class:`~horae.api.ports.HistorySource` for the token's
tenant, after the API's verifier accepted the token and ``may(read)`` held:

- :class:`~horae.api.adapters.PostgresHistory`: one statement (:data:`VERSIONS_SQL`) on its pool
  (the API's reader role), in a read-only transaction with the read models' schema as
  ``search_path``, as :class:`~horae.projections.queries.HistoryQueries` runs its own;
- :class:`~horae.api.memory.MemoryBackend` (the unit tests' API): the definitions it was given.

:func:`changes` is pure: the differences between two versions' JSON forms, one line per field
(``recurrence.expr: '*/3 * * * * *' -> '0 9 * * 1-5'``), the payload compared by digest.
"""

from __future__ import annotations

import hashlib
import json
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg import sql as pgsql
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from horae.api.memory import MemoryBackend
from horae.contracts import events as ev
from horae.contracts._reflect import to_avro
from horae.contracts.jsonform import plain
from horae.projections.queries import HistoryQueries

#: the most versions a page shows (newest first)
MAX_VERSIONS = 100

#: a trigger's versions, newest first: the columns a version's JSON form needs, its payload by
#: digest and size
VERSIONS_SQL = """
SELECT version, state, recurrence, target, policies, quotas, authored_at, author, role,
    description, labels, content_type, md5(payload) AS payload_md5,
    octet_length(payload) AS payload_bytes
FROM trigger_versions
WHERE tenant = %(tenant)s AND trigger_id = %(trigger_id)s
ORDER BY version DESC
LIMIT %(limit)s
"""

#: the fields of a version compared (its JSON form); the rest says who and when
COMPARED = ("state", "recurrence", "target", "policies", "quotas", "description", "labels")


@dataclass(frozen=True)
class Version:
    """One version of a definition and what changed from the one before it (empty for the
    first version kept)."""

    version: int
    authored_at: datetime
    author: str
    role: str
    state: str
    body: dict[str, Any]  # the compared fields, their JSON form
    changes: list[str]


def _flat(value: Any, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(value, dict) and value:
        for key in sorted(value):
            _flat(value[key], f"{prefix}.{key}" if prefix else str(key), out)
    else:
        out[prefix] = value


def _shown(value: Any) -> str:
    if value is None:
        return "none"
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """What changed from ``before`` to ``after`` (two versions' compared fields, JSON form): one
    line per field, dotted (``policies.misfire_grace_s: 60 -> 1``), in field order; a field one
    of them lacks reads ``none``."""
    a: dict[str, Any] = {}
    b: dict[str, Any] = {}
    _flat(before, "", a)
    _flat(after, "", b)
    said = []
    for name in sorted(set(a) | set(b)):
        old, new = a.get(name), b.get(name)
        if old != new:
            said.append(f"{name}: {_shown(old)} -> {_shown(new)}")
    return said


def _compared(row: dict[str, Any]) -> dict[str, Any]:
    body = {name: row.get(name) for name in COMPARED}
    body["payload"] = {
        "content_type": row.get("content_type"),
        "md5": row.get("payload_md5"),
        "bytes": row.get("payload_bytes"),
    }
    return body


def _versions(rows: list[dict[str, Any]]) -> list[Version]:
    """``rows`` newest first -> Versions newest first, each with its changes from the next row
    (the version before it)."""
    out = []
    for i, row in enumerate(rows):
        body = _compared(row)
        older = rows[i + 1] if i + 1 < len(rows) else None
        said = [] if older is None else changes(_compared(older), body)
        if older is not None and older["version"] != row["version"] - 1:
            said.insert(0, f"(versions {older['version'] + 1}..{row['version'] - 1} not kept)")
        out.append(
            Version(
                version=int(row["version"]),
                authored_at=row["authored_at"],
                author=str(row["author"]),
                role=str(row["role"]),
                state=str(row["state"]),
                body=body,
                changes=said,
            )
        )
    return out


def _postgres(queries: HistoryQueries, tenant: str, trigger_id: str, limit: int) -> list[Any]:
    params = {"tenant": tenant, "trigger_id": trigger_id, "limit": limit}
    source = queries.source
    taken = source.connection() if isinstance(source, ConnectionPool) else nullcontext(source)
    with taken as conn, conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
        cur.execute(
            pgsql.SQL("SET LOCAL search_path TO {}; SET LOCAL transaction_read_only TO on").format(
                pgsql.Identifier(queries.schema)
            )
        )
        return list(cur.execute(VERSIONS_SQL, params).fetchall())


def _memory(backend: MemoryBackend, tenant: str, trigger_id: str, limit: int) -> list[Any]:
    """The in-memory API's versions, as ``trigger_versions`` holds them (the first of a version
    wins)."""
    kept: dict[int, ev.TriggerDefinition] = {}
    for d in backend.definitions:
        if d.tenant == tenant and d.trigger_id == trigger_id:
            kept.setdefault(d.version, d)
    rows = []
    for version in sorted(kept, reverse=True)[:limit]:
        d = kept[version]
        datum: dict[str, Any] = plain(to_avro(d))
        payload = bytes(d.payload)
        rows.append(
            {
                **{name: datum.get(name) for name in COMPARED},
                "version": d.version,
                "authored_at": d.authored_at,
                "author": d.author,
                "role": d.role.value,
                "content_type": d.content_type,
                "payload_md5": hashlib.md5(payload, usedforsecurity=False).hexdigest(),
                "payload_bytes": len(payload),
            }
        )
    return rows


def versions(
    history: Any, tenant: str, trigger_id: str, limit: int = MAX_VERSIONS
) -> list[Version] | None:
    """The trigger's versions, newest first (at most ``limit``), each with what changed; None
    when ``history`` keeps no versions this module can read."""
    queries = getattr(history, "queries", None)
    if isinstance(queries, HistoryQueries):
        rows = _postgres(queries, tenant, trigger_id, limit + 1)
    elif isinstance(history, MemoryBackend):
        rows = _memory(history, tenant, trigger_id, limit + 1)
    else:
        return None
    shown = _versions(rows)[:limit]
    return shown
