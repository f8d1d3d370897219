"""TriggerOut, the API's JSON form of a trigger, rendered from a decoded definition
(:func:`stored_body`) or, for the list route, by PostgreSQL straight from the read-model row
(``queries/api_triggers_page.sql`` through :func:`row_listed`: no definition decoded, no JSON
coercion, the JSON text passed through; the same JSON as :func:`stored_body`, which
``tests/integration/api/test_api_postgres.py`` checks field for field).

The row's JSON columns hold each sub-record's Avro datum as canonical JSON
(:func:`horae.projections.rows.to_json`): instants RFC 3339 with ``+00:00`` (TriggerOut writes
``Z``), every field present when projected by this release (a row projected before a field existed
lacks it: the field's default, :data:`DEFAULTS`, fills it, as decoding does).

The history routes' answers are rendered here too: a fire row (:func:`history_item`), a lateness
row (:func:`lateness_json`), and any read-model value as JSON (:func:`json_text`: instants RFC
3339 with ``Z``, bytes as hex).
"""

from __future__ import annotations

import functools
import json
from datetime import UTC, datetime
from typing import Any

from horae.api.ports import LatenessRow, ListedTrigger, StoredTrigger
from horae.contracts import events as ev
from horae.contracts._reflect import to_avro
from horae.contracts.domain_map import trigger_spec
from horae.contracts.jsonform import plain
from horae.domain.errors import ValidationError
from horae.domain.queries import next_instants
from horae.domain.schedule import Schedule
from horae.domain.timefmt import format_utc

UPCOMING = 3  # next_instants of a TriggerOut


def _defaults(record: Any) -> dict[str, Any]:
    datum: dict[str, Any] = plain(to_avro(record))
    return datum


_RECURRENCE = _defaults(ev.Recurrence(kind=ev.RecurrenceKind.CRON))
_TARGET = _defaults(ev.Target(kind=ev.TargetKind.EVENT))
_POLICIES = _defaults(ev.Policies())
_RETRY = _POLICIES.pop("retry")
_QUOTAS = _defaults(ev.Quotas())
_INSTANTS = ("anchor", "start", "end")


def _z(text: str | None) -> str | None:
    """An instant of a JSON column as TriggerOut writes it (UTC, ``Z``)."""
    if text is None:
        return None
    if text.endswith("+00:00"):
        return text[:-6] + "Z"
    return format_iso(datetime.fromisoformat(text))


def format_iso(moment: datetime) -> str:
    """RFC 3339 in UTC with ``Z`` (microseconds kept), as :func:`plain` writes instants."""
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def trigger_json(d: ev.TriggerDefinition) -> dict[str, Any]:
    """The plain JSON form of a definition (signature left out)."""
    out: dict[str, Any] = plain(to_avro(d))
    out.pop("signature", None)
    return out


def stored_body(s: StoredTrigger) -> dict[str, Any]:
    """TriggerOut without ``next_instants``: the definition's JSON form, its state (what it is
    doing) and run state (what it is decided under), created/updated."""
    body = trigger_json(s.definition)
    body["state"] = s.shown
    body["run_state"] = s.definition.state.value
    body["created_at"] = format_iso(s.created_at)
    body["updated_at"] = format_iso(s.updated_at)
    return body


def listed(s: StoredTrigger) -> ListedTrigger:
    d = s.definition
    body = json.dumps(stored_body(s), ensure_ascii=False, separators=(",", ":"))
    return ListedTrigger(d.trigger_id, d.version, s.shown, d.labels, d.recurrence, body)


def _recurrence(j: dict[str, Any]) -> dict[str, Any]:
    out = {**_RECURRENCE, **j}
    for name in _INSTANTS:
        out[name] = _z(out[name])
    out["instants"] = [_z(i) for i in out["instants"]]
    return out


def _instant(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text.replace("Z", "+00:00"))


def recurrence_of(j: dict[str, Any]) -> ev.Recurrence:
    """The contract recurrence of its TriggerOut JSON (as :func:`_recurrence` renders it)."""
    return ev.Recurrence(
        kind=ev.RecurrenceKind(j["kind"]),
        expr=j["expr"],
        interval_s=j["interval_s"],
        anchor=_instant(j["anchor"]),
        instants=tuple(i for i in (_instant(t) for t in j["instants"]) if i is not None),
        zone=j["zone"],
        dst_gap=ev.DstGap(j["dst_gap"]),
        dst_repeat=ev.DstRepeat(j["dst_repeat"]),
        start=_instant(j["start"]),
        end=_instant(j["end"]),
        count=j["count"],
    )


#: the sub-records' defaults the list query fills a row's missing fields with
DEFAULTS: dict[str, dict[str, Any]] = {
    "recurrence": _RECURRENCE,
    "target": _TARGET,
    "policies": _POLICIES,
    "retry": _RETRY,
    "quotas": _QUOTAS,
}


@functools.lru_cache(maxsize=4096)
def stored_recurrence(text: str) -> ev.Recurrence:
    """The contract recurrence of a ``recurrence`` column's JSON text (cached by the text)."""
    return recurrence_of(_recurrence(json.loads(text)))


def row_listed(row: dict[str, Any]) -> ListedTrigger:
    """A :class:`ListedTrigger` from a row of ``queries/api_triggers_page.sql`` (which renders
    the body in PostgreSQL as :func:`stored_body` does in Python)."""
    return ListedTrigger(
        row["trigger_id"],
        row["version"],
        row["state"],
        row["labels"],
        stored_recurrence(row["recurrence_key"]),
        row["body"],
    )


@functools.lru_cache(maxsize=4096)
def _schedule(r: ev.Recurrence) -> Schedule:
    """The planner's compiled schedule of a recurrence (a pure function of it: cached, so a page
    of triggers sharing a recurrence compiles it once)."""
    probe = ev.TriggerDefinition(
        tenant="-",
        trigger_id="-",
        version=1,
        state=ev.DefinitionState.LIVE,
        recurrence=r,
        target=ev.Target(kind=ev.TargetKind.EVENT),
        authored_at=datetime.fromtimestamp(0, UTC),
        author="-",
    )
    return trigger_spec(probe).schedule()


def upcoming_instants(state: str, recurrence: ev.Recurrence, now: int) -> list[str]:
    """The next three instants after ``now`` of a live trigger (none for another state — paused,
    suspended, completed, deleted — or a recurrence the planner cannot compile)."""
    if state != ev.DefinitionState.LIVE.value:
        return []
    try:
        return [format_utc(t) for t in next_instants(_schedule(recurrence), now, UPCOMING)]
    except (ValidationError, ValueError):
        return []


def json_text(value: Any) -> Any:
    """A read-model value as JSON: instants RFC 3339 in UTC with ``Z``, bytes as hex, within
    dicts, lists and tuples too."""
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    if isinstance(value, dict):
        return {k: json_text(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_text(v) for v in value]
    return value


def history_item(r: dict[str, Any]) -> dict[str, Any]:
    """A fire of a trigger's history: its decision, delivery state, lateness and outcome."""
    item: dict[str, Any] = json_text(
        {
            "fire_key": r["fire_key"],
            "scheduled_at": r.get("scheduled_at"),
            "due_at": r.get("due_at"),
            "state": r.get("status") or r.get("state"),
            "decision": r.get("state"),
            "origin": r.get("origin"),
            "cause": r.get("cause"),
            "lane": r.get("lane"),
            "lateness_ms": r.get("lateness_ms"),
            "tzdata_version": r.get("tzdata_version"),
            "attempts": r.get("attempt_count", 0),
            "outcome": r.get("outcome"),
            "trigger_version": r.get("trigger_version"),
        }
    )
    return item


def lateness_json(row: LatenessRow) -> dict[str, Any]:
    return {
        "fires": row.fires,
        "p50_ms": row.p50_ms,
        "p99_ms": row.p99_ms,
        "max_ms": row.max_ms,
        "missed": row.missed,
        "trigger_id": row.trigger_id,
    }
