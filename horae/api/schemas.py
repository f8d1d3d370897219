"""JSON Schemas of the API's bodies, derived from the Avro schemas (one source of truth).

:func:`json_schema` turns an Avro schema into the JSON Schema of the plain JSON form that
:func:`horae.contracts.jsonform.coerce` accepts (instants as RFC 3339 strings, bytes as a UTF-8
string or ``{"base64": ...}``). ``TriggerIn`` is the TriggerDefinition form without the fields the
API fills (tenant, version, authored_at, author, role, signature); ``TriggerOut`` adds what the API
reports (``state``: what the trigger is doing, :data:`~horae.api.ports.SHOWN_STATES`;
``run_state``: the state it is decided under, which TriggerIn's ``state`` sets; on a GET,
``last_run``: its latest fire scheduled before now, a ``FireItem``). ``FireItem`` is a fire as
the history and the fire search show it. :func:`components` are the ``components/schemas`` of
the OpenAPI document.
"""

from __future__ import annotations

from typing import Any

from horae.api.ports import SHOWN_STATES
from horae.contracts import events as ev
from horae.contracts.codec import default_codec
from horae.contracts.jsonform import named_types

#: TriggerDefinition fields the API fills from the token and the version it computes.
FILLED = ("tenant", "version", "authored_at", "author", "role", "signature")
#: TriggerOut fields that are not TriggerIn's: what a body built from an answer must drop
REPORTED: tuple[str, ...] = (
    "tenant",
    "version",
    "state",
    "run_state",
    "author",
    "role",
    "authored_at",
    "created_at",
    "updated_at",
    "next_instants",
    "last_run",
)

_PRIMITIVE: dict[str, dict[str, Any]] = {
    "string": {"type": "string"},
    "long": {"type": "integer", "minimum": -(2**63), "maximum": 2**63 - 1},
    "int": {"type": "integer", "minimum": -(2**31), "maximum": 2**31 - 1},
    "double": {"type": "number"},
    "float": {"type": "number"},
    "boolean": {"type": "boolean"},
    "bytes": {
        "anyOf": [
            {"type": "string"},
            {
                "type": "object",
                "properties": {"base64": {"type": "string"}},
                "required": ["base64"],
                "additionalProperties": False,
            },
        ]
    },
}


def json_schema(schema: Any, names: dict[str, Any], omit: tuple[str, ...] = ()) -> dict[str, Any]:
    """The JSON Schema of the plain JSON form of Avro ``schema`` (``omit``: top-level fields)."""
    if isinstance(schema, str) and schema in names:
        schema = names[schema]
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        inner = json_schema(branches[0], names)
        return {"anyOf": [inner, {"type": "null"}]} if "null" in schema else inner
    if isinstance(schema, str):
        return dict(_PRIMITIVE[schema])
    kind = schema["type"]
    if isinstance(kind, dict | list) or (isinstance(kind, str) and kind in names):
        return json_schema(kind, names)
    if schema.get("logicalType") == "timestamp-micros":
        return {"type": "string", "format": "date-time"}
    if kind == "record":
        fields = [f for f in schema["fields"] if f["name"] not in omit]
        return {
            "type": "object",
            "properties": {f["name"]: json_schema(f["type"], names) for f in fields},
            "required": [f["name"] for f in fields if "default" not in f],
            "additionalProperties": False,
        }
    if kind == "enum":
        return {"type": "string", "enum": list(schema["symbols"])}
    if kind == "array":
        return {"type": "array", "items": json_schema(schema["items"], names)}
    if kind == "map":
        return {"type": "object", "additionalProperties": json_schema(schema["values"], names)}
    return dict(_PRIMITIVE[kind])


_TEXT_OR_NULL = {"type": ["string", "null"]}
_TIME_OR_NULL = {"type": ["string", "null"], "format": "date-time"}
#: a fire as the history, the fire search and ``last_run`` show it
#: (:func:`horae.api.render.history_item`)
FIRE_ITEM: dict[str, Any] = {
    "type": "object",
    "required": ["fire_key", "scheduled_at", "due_at", "state", "decision", "attempts"],
    "properties": {
        "fire_key": {"type": "string"},
        "trigger_id": {"type": "string"},
        "scheduled_at": _TIME_OR_NULL,
        "due_at": _TIME_OR_NULL,
        "state": _TEXT_OR_NULL,
        "decision": _TEXT_OR_NULL,
        "origin": _TEXT_OR_NULL,
        "cause": _TEXT_OR_NULL,
        "lane": _TEXT_OR_NULL,
        "lateness_ms": {"type": ["number", "null"]},
        "tzdata_version": _TEXT_OR_NULL,
        "attempts": {"type": "integer"},
        "outcome": _TEXT_OR_NULL,
        "trigger_version": {"type": ["integer", "null"]},
    },
}
LAST_RUN = {"$ref": "#/components/schemas/FireItem"}


def _occurrence() -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["utc", "local", "offset", "jitter_ms"],
        "properties": {
            "utc": {"type": "string"},
            "local": {"type": "string"},
            "offset": {"type": "string"},
            "dst_note": {"type": ["string", "null"]},
            "jitter_ms": {"type": "integer"},
        },
    }


def components() -> dict[str, Any]:
    """``components/schemas``: TriggerIn, TriggerOut, Occurrence, FireItem, Problem."""
    raw = default_codec().current.raw[ev.TriggerDefinition]
    names = named_types(raw)
    trigger_in = json_schema(raw, names, omit=FILLED)
    trigger_in["properties"]["state"] = {"type": "string", "enum": ["live", "paused"]}
    trigger_in["required"] = [r for r in trigger_in["required"] if r != "state"]
    out_props = dict(trigger_in["properties"])
    out_props["state"] = {"type": "string", "enum": list(SHOWN_STATES)}
    out_props["run_state"] = {"type": "string", "enum": ["live", "paused", "deleted"]}
    out_props.update(
        tenant={"type": "string"},
        version={"type": "integer"},
        author={"type": "string"},
        role={"type": "string"},
        created_at={"type": "string", "format": "date-time"},
        updated_at={"type": "string", "format": "date-time"},
        next_instants={"type": "array", "items": {"type": "string"}},
        last_run={"oneOf": [LAST_RUN, {"type": "null"}]},
    )
    trigger_out = {
        "type": "object",
        "properties": out_props,
        "required": ["tenant", "trigger_id", "version", "state", "run_state", "recurrence",
                     "target", "created_at", "updated_at", "next_instants"],
    }  # fmt: skip
    problem = {
        "type": "object",
        "required": ["type", "title", "status"],
        "properties": {
            "type": {"type": "string"},
            "title": {"type": "string"},
            "status": {"type": "integer"},
            "detail": {"type": "string"},
            "instance": {"type": "string"},
            "errors": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["field", "message"],
                    "properties": {"field": {"type": "string"}, "message": {"type": "string"}},
                },
            },
        },
    }
    return {
        "TriggerIn": trigger_in,
        "TriggerOut": trigger_out,
        "Occurrence": _occurrence(),
        "FireItem": FIRE_ITEM,
        "Problem": problem,
    }
