"""The body of a webhook attempt (pure: everything it says comes from the dispatch order).

:func:`webhook_body` ``(order) -> (body, content_type | None)``:

- ``envelope`` (the default body mode of a target): a JSON object in the Standard Webhooks shape,
  ``{"type": "schedule.triggered", "timestamp": <due time, RFC 3339>, "data": {...}}`` with
  ``data`` = ``tenant``, ``trigger_id``, ``scheduled_at``, ``due_at``, ``fire_key``, ``origin``,
  ``attempt``, ``tzdata_version``, ``content_type`` (the payload's) and the tenant's payload:
  ``payload`` is the payload itself when it is JSON (content type ``application/json`` or
  ``…+json`` and the bytes parse), ``null`` when empty, else ``payload_base64`` holds it.
  The same fire gives the same bytes on every attempt but for ``attempt``; content type
  ``application/json``;
- ``raw``: the payload bytes with the definition's content type — and no content type at all when
  the payload is empty (an empty body is not JSON).
"""

from __future__ import annotations

import base64
import json
from typing import Any

from horae.contracts import events as ev

ENVELOPE_TYPE = "schedule.triggered"
JSON = "application/json"
#: ``json.dumps(..., separators=(",", ":"), sort_keys=True)`` without building an encoder per call
_COMPACT_SORTED = json.JSONEncoder(separators=(",", ":"), sort_keys=True)


def _is_json(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == JSON or media.endswith("+json")


def _instant(value: Any) -> str:
    return str(value.isoformat().replace("+00:00", "Z"))


def _same(a: Any, b: Any) -> bool:
    """The same instant written the same way (the same offset): one RFC 3339 string for both."""
    return bool(a == b and a.tzinfo is b.tzinfo)


def webhook_body(order: ev.DispatchOrder) -> tuple[bytes, str | None]:
    """The body of ``order``'s attempt and its ``Content-Type`` (``None``: send none)."""
    if order.target.body == "raw":
        return order.payload, order.content_type if order.payload else None
    fire = order.fire
    due = _instant(fire.due_at)
    data: dict[str, Any] = {
        "tenant": fire.tenant,
        "trigger_id": fire.trigger_id,
        "scheduled_at": due
        if _same(fire.scheduled_at, fire.due_at)
        else _instant(fire.scheduled_at),
        "due_at": due,
        "fire_key": fire.fire_key,
        "origin": fire.origin.value,
        "attempt": order.attempt,
        "tzdata_version": fire.tzdata_version,
        "content_type": order.content_type,
        "payload": None,
    }
    if order.payload:
        parsed: Any = None
        if _is_json(order.content_type):
            try:
                parsed = json.loads(order.payload)
            except ValueError:
                parsed = None
        if parsed is not None or order.payload.strip() == b"null":
            data["payload"] = parsed
        else:
            data["payload_base64"] = base64.b64encode(order.payload).decode("ascii")
    envelope = {"type": ENVELOPE_TYPE, "timestamp": due, "data": data}
    return _COMPACT_SORTED.encode(envelope).encode(), JSON
