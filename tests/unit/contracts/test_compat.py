from __future__ import annotations

import copy
import io
import json
import shutil
from collections.abc import Iterator
from dataclasses import replace
from enum import Enum
from importlib.resources import as_file
from pathlib import Path
from typing import Any

import fastavro
import pytest

from horae.contracts import events as ev
from horae.contracts._reflect import from_avro, to_avro
from horae.contracts.codec import SCHEMAS, decode
from horae.contracts.compat import check_all, problems
from tests.unit.contracts.samples import all_samples
from tests.unit.contracts.samples import definition as sample_definition

CURRENT = json.loads((SCHEMAS / "TriggerDefinition.avsc").read_text())


@pytest.fixture
def schemas_dir() -> Iterator[Path]:
    """The packaged schemas as a file system folder."""
    with as_file(SCHEMAS) as folder:
        yield folder


def test_every_current_schema_is_compatible_with_every_release() -> None:
    assert check_all() == []


def _without(schema: dict[str, Any], field: str) -> dict[str, Any]:
    new = copy.deepcopy(schema)
    new["fields"] = [f for f in new["fields"] if f["name"] != field]
    return new


def test_removing_a_field_without_default_fails_naming_it() -> None:
    found = problems(_without(CURRENT, "author"), CURRENT, "v1")
    assert found
    assert any("TriggerDefinition.author" in p and p.startswith("FORWARD") for p in found)


def test_adding_a_field_without_default_fails_naming_it() -> None:
    new = copy.deepcopy(CURRENT)
    new["fields"].append({"name": "colour", "type": "string"})
    found = problems(new, CURRENT, "v1")
    assert any("TriggerDefinition.colour" in p and p.startswith("BACKWARD") for p in found)


def test_adding_or_removing_a_field_with_default_is_fine() -> None:
    new = copy.deepcopy(CURRENT)
    new["fields"].append({"name": "colour", "type": ["null", "string"], "default": None})
    assert problems(new, CURRENT) == []
    assert problems(_without(CURRENT, "description"), CURRENT) == []


def test_type_change_is_reported() -> None:
    new = copy.deepcopy(CURRENT)
    next(f for f in new["fields"] if f["name"] == "version")["type"] = "string"
    assert any("TriggerDefinition.version: type changed" in p for p in problems(new, CURRENT))


def test_incompatible_file_fails_check_all(tmp_path: Path, schemas_dir: Path) -> None:
    shutil.copytree(schemas_dir, tmp_path / "schemas")
    broken = _without(CURRENT, "author")
    (tmp_path / "schemas" / "TriggerDefinition.avsc").write_text(json.dumps(broken))
    found = check_all(tmp_path / "schemas")
    assert found and all("author" in p for p in found)


@pytest.mark.parametrize("event", all_samples(), ids=lambda e: type(e).__name__)
def test_golden_bytes_of_each_release_decode(event: ev.Event, schemas_dir: Path) -> None:
    name = type(event).__name__
    fixtures = sorted((schemas_dir / "golden").glob(f"v*/{name}.hex"))
    assert fixtures, f"no golden bytes for {name}"
    for path in fixtures:
        data = bytes.fromhex(path.read_text().strip())
        assert decode(data) == event, str(path)


def test_every_release_has_golden_bytes(schemas_dir: Path) -> None:
    released = list((schemas_dir / "released").glob("v*/*.avsc"))
    assert released
    for schema in released:
        golden = schemas_dir / "golden" / schema.parent.name / f"{schema.stem}.hex"
        assert golden.exists(), f"missing {golden}"


# --- enums that can grow (v5: every enum carries an Avro default) ---------------------------


def _enums(schema: Any) -> Iterator[dict[str, Any]]:
    if isinstance(schema, list):
        for branch in schema:
            yield from _enums(branch)
    elif isinstance(schema, dict):
        if schema.get("type") == "enum":
            yield schema
        for key in ("type", "items", "values"):
            yield from _enums(schema.get(key))
        for f in schema.get("fields", ()):
            yield from _enums(f["type"])


def test_every_enum_of_every_current_schema_has_a_default_among_its_symbols() -> None:
    seen = set()
    for path in SCHEMAS.iterdir():
        if path.name.endswith(".avsc"):
            for enum in _enums(json.loads(path.read_text())):
                assert enum.get("default") in enum["symbols"], f"{path.name}: {enum['name']}"
                seen.add(enum["name"])
    assert {t.__name__ for t in ev.ENUM_DEFAULTS} == seen


def _with_symbol(schema: dict[str, Any], enum: str, symbol: str) -> dict[str, Any]:
    new = copy.deepcopy(schema)
    (found,) = [e for e in _enums(new) if e["name"] == enum]
    found["symbols"].append(symbol)
    return new


def test_a_symbol_unknown_to_the_reader_decodes_to_the_enum_default(schemas_dir: Path) -> None:
    """A later release adds a target kind; a v5 reader reads it as the default, ``event``."""
    v5 = json.loads((schemas_dir / "released" / "v5" / "TriggerDefinition.avsc").read_text())
    later = _with_symbol(v5, "TargetKind", "grpc")
    datum = to_avro(sample_definition())
    datum["target"]["kind"] = "grpc"
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(later), datum)
    buf.seek(0)
    read = fastavro.schemaless_reader(buf, fastavro.parse_schema(later), fastavro.parse_schema(v5))
    decoded = from_avro(ev.TriggerDefinition, read)
    assert decoded.target.kind is ev.TargetKind.EVENT
    assert decoded == replace(
        sample_definition(), target=replace(sample_definition().target, kind=ev.TargetKind.EVENT)
    )
    # the rule says the same: compatible with v5 both ways, not with a release without defaults
    assert problems(later, v5, "v5") == []
    v3 = json.loads((schemas_dir / "released" / "v3" / "TriggerDefinition.avsc").read_text())
    assert any("target.kind" in p and p.startswith("FORWARD") for p in problems(later, v3, "v3"))


@pytest.mark.parametrize("enum_type", list(ev.ENUM_DEFAULTS), ids=lambda t: t.__name__)
def test_each_enum_falls_back_to_its_default(enum_type: type[Enum], schemas_dir: Path) -> None:
    """For every enum: a record whose value is a new symbol reads, under the current schema,
    as that enum's default."""
    name = enum_type.__name__
    schema_name = next(
        p.name
        for p in sorted(schemas_dir.glob("*.avsc"))
        if any(e["name"] == name for e in _enums(json.loads(p.read_text())))
    )
    current = json.loads((schemas_dir / schema_name).read_text())
    later = _with_symbol(current, name, "zz_later")
    assert problems(later, current, "current") == []
    # a probe record over the enum alone, as each schema defines it
    (old_enum,) = [e for e in _enums(current) if e["name"] == name]
    (new_enum,) = [e for e in _enums(later) if e["name"] == name]
    probe_w = fastavro.parse_schema(
        {"type": "record", "name": "Probe", "fields": [{"name": "e", "type": new_enum}]}
    )
    probe_r = fastavro.parse_schema(
        {"type": "record", "name": "Probe", "fields": [{"name": "e", "type": old_enum}]}
    )
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, probe_w, {"e": "zz_later"})
    buf.seek(0)
    assert fastavro.schemaless_reader(buf, probe_w, probe_r) == {"e": ev.ENUM_DEFAULTS[enum_type]}
