"""The Python types mirror the committed Avro schemas one-to-one (names, types, defaults)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from horae.contracts import events as ev
from horae.contracts._reflect import schema_of
from horae.contracts.codec import SCHEMAS, canonical


def _strip_docs(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: _strip_docs(v) for k, v in schema.items() if k != "doc"}
    if isinstance(schema, list):
        return [_strip_docs(x) for x in schema]
    return schema


@pytest.mark.parametrize("event_type", ev.EVENT_TYPES, ids=lambda t: t.__name__)
def test_committed_schema_mirrors_dataclass(event_type: type[ev.Event]) -> None:
    committed = json.loads((SCHEMAS / f"{event_type.__name__}.avsc").read_text())
    implied = schema_of(event_type)
    assert canonical(committed) == canonical(implied)
    # canonical form drops defaults: compare them too
    assert _strip_docs(committed) == _strip_docs(implied)


def test_no_stray_schema_files() -> None:
    files = {p.name.removesuffix(".avsc") for p in SCHEMAS.iterdir() if p.name.endswith(".avsc")}
    assert files == {t.__name__ for t in ev.EVENT_TYPES}
