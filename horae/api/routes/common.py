"""What several routers declare alike in the OpenAPI document: references to the components'
schemas, a JSON body, a success answer, and the answers' shapes that recur (a page, an accepted
command, occurrences, a lateness summary)."""

from typing import Any


def ref(name: str) -> dict[str, Any]:
    """A reference to the schema ``name`` of the document's components."""
    return {"$ref": f"#/components/schemas/{name}"}


def json_body(name: str) -> dict[str, Any]:
    """An operation's required JSON body of the component schema ``name`` (``openapi_extra``:
    the routes read their bodies themselves, :mod:`horae.api.dependencies`)."""
    return {
        "requestBody": {"required": True, "content": {"application/json": {"schema": ref(name)}}}
    }


def ok(status: int, schema: dict[str, Any], description: str = "OK") -> dict[int | str, Any]:
    """A success answer ``status`` with a JSON body of ``schema``."""
    return {
        status: {"description": description, "content": {"application/json": {"schema": schema}}}
    }


PAGE_PROPERTIES: dict[str, Any] = {
    "items": {"type": "array", "items": {"type": "object"}},
    "next_cursor": {"type": ["string", "null"]},
}
PAGE = {"type": "object", "required": ["items", "next_cursor"], "properties": PAGE_PROPERTIES}
ACCEPTED = {
    "type": "object",
    "required": ["command_id"],
    "properties": {"command_id": {"type": "string"}, "fire_key": {"type": "string"}},
}
OCCURRENCES = {"type": "array", "items": ref("Occurrence")}
LATENESS = {
    "type": "object",
    "required": ["fires", "p50_ms", "p99_ms", "max_ms", "missed"],
    "properties": {
        "fires": {"type": "integer"},
        "p50_ms": {"type": ["number", "null"]},
        "p99_ms": {"type": ["number", "null"]},
        "max_ms": {"type": ["number", "null"]},
        "missed": {"type": "integer"},
        "trigger_id": {"type": ["string", "null"]},
    },
}
