"""Schema compatibility: every current schema (``horae/contracts/schemas/<Name>.avsc``) against
every released version of it (``schemas/released/v*/``), in both directions (FULL_TRANSITIVE):

- BACKWARD: the new schema reads data written with each released one (consumers upgrade first);
- FORWARD: each released schema reads data written with the new one (a tenant's old subscriber
  keeps decoding ``schedule-events``). Removing a field that has no default breaks this.

The check is structural (Avro schema resolution rules, with messages naming the field) and
empirical (random records written with one schema are read with the other by fastavro).

Run: ``python -m horae.contracts.compat [DIR]`` (the packaged schemas, or those in ``DIR``; exit 1
and one line per problem); CI runs it as a test.
"""

from __future__ import annotations

import io
import json
import sys
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import fastavro
from fastavro.utils import generate_many

from horae.contracts.codec import SCHEMAS, fullname, load_schema
from horae.contracts.jsonform import named_types

_PROMOTIONS = {
    "int": {"int", "long", "float", "double"},
    "long": {"long", "float", "double"},
    "float": {"float", "double"},
    "string": {"string", "bytes"},
    "bytes": {"bytes", "string"},
}
_COMPLEX = ("record", "enum", "fixed", "array", "map")


class _Resolver:
    def __init__(self, reader: dict[str, Any], writer: dict[str, Any]) -> None:
        self.rn, self.wn = named_types(reader), named_types(writer)

    def _get(self, s: Any, names: dict[str, Any]) -> Any:
        while True:
            if isinstance(s, str) and s in names:
                s = names[s]
            elif isinstance(s, dict) and not isinstance(s.get("type"), str):
                s = s["type"]
            elif isinstance(s, dict) and s["type"] not in _COMPLEX:
                s = s["type"]  # primitive with a logical type
            else:
                return s

    @staticmethod
    def _kind(s: Any) -> str:
        return "union" if isinstance(s, list) else s if isinstance(s, str) else str(s["type"])

    def check(self, r: Any, w: Any, path: str) -> list[str]:
        r, w = self._get(r, self.rn), self._get(w, self.wn)
        rk, wk = self._kind(r), self._kind(w)
        if wk == "union":
            return [p for branch in w for p in self.check(r, branch, path)]
        if rk == "union":
            for branch in r:
                if not self.check(branch, w, path):
                    return []
            return [f"{path}: a {wk} value matches no branch of the reader's union"]
        if rk != wk and rk not in _PROMOTIONS.get(wk, set()):
            return [f"{path}: type changed from {wk} to {rk}"]
        if rk == "record":
            written = {f["name"]: f for f in w["fields"]}
            out: list[str] = []
            for f in r["fields"]:
                sub = f"{path}.{f['name']}"
                names = [f["name"], *f.get("aliases", ())]
                match = next((written[n] for n in names if n in written), None)
                if match is not None:
                    out += self.check(f["type"], match["type"], sub)
                elif "default" not in f:
                    out.append(f"{sub}: field missing from the writer and has no default")
            return out
        if rk == "enum":
            extra = [s for s in w["symbols"] if s not in r["symbols"]]
            if extra and "default" not in r:
                return [f"{path}: enum symbols {extra} unknown to the reader (no enum default)"]
            return []
        if rk == "array":
            return self.check(r["items"], w["items"], f"{path}[]")
        if rk == "map":
            return self.check(r["values"], w["values"], f"{path}{{}}")
        return []


def problems(new: dict[str, Any], old: dict[str, Any], label: str = "released") -> list[str]:
    """Why ``new`` is not FULL-compatible with ``old`` (empty: compatible)."""
    name = fullname(new).rsplit(".", 1)[-1]
    out = [
        f"BACKWARD ({label} data read with the new schema): {p}"
        for p in _Resolver(new, old).check(new, old, name)
    ]
    out += [
        f"FORWARD (new data read with the {label} schema): {p}"
        for p in _Resolver(old, new).check(old, new, name)
    ]
    if not out:  # the empirical check, only worth running when the rules say yes
        for writer, reader, direction in ((old, new, "BACKWARD"), (new, old, "FORWARD")):
            error = _round_trip(writer, reader)
            if error:
                out.append(f"{direction} ({label}) {name}: fastavro: {error}")
    return out


def _round_trip(writer: dict[str, Any], reader: dict[str, Any], n: int = 25) -> str | None:
    w, r = fastavro.parse_schema(writer), fastavro.parse_schema(reader)
    for record in generate_many(w, n):
        buf = io.BytesIO()
        try:
            fastavro.schemaless_writer(buf, w, record)
            buf.seek(0)
            fastavro.schemaless_reader(buf, w, r)
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"
    return None


def _avsc(folder: Traversable) -> list[Traversable]:
    return sorted(
        (f for f in folder.iterdir() if f.is_file() and f.name.endswith(".avsc")),
        key=lambda f: f.name,
    )


def check_all(schemas_dir: Traversable = SCHEMAS) -> list[str]:
    """Every problem of every current schema against every released version of it
    (``released/v*/``)."""
    versions = sorted(
        (v for v in (schemas_dir / "released").iterdir() if v.is_dir() and v.name.startswith("v")),
        key=lambda v: v.name,
    )
    released = [(v.name, load_schema(f)) for v in versions for f in _avsc(v)]
    out: list[str] = []
    for current_path in _avsc(schemas_dir):
        current = load_schema(current_path)
        for label, old in released:
            if fullname(old) == fullname(current):
                found = problems(current, old, label)
                out += [f"{current_path.name} vs {label}: {p}" for p in found]
    return out


def main() -> int:
    found = check_all(Path(sys.argv[1]) if len(sys.argv) > 1 else SCHEMAS)
    for line in found:
        print(line)
    print(json.dumps({"compatible": not found, "problems": len(found)}))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
