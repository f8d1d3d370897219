from __future__ import annotations

import copy
import json
import shutil
from collections.abc import Iterator
from importlib.resources import as_file
from pathlib import Path
from typing import Any

import pytest

from horae.contracts import events as ev
from horae.contracts.codec import SCHEMAS, decode
from horae.contracts.compat import check_all, problems
from tests.unit.contracts.samples import all_samples

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
