"""JSON forms of the contracts, driven by the Avro schemas themselves.

- :func:`coerce` turns plain JSON (what a tenant types into kcat) into the Avro datum of a schema,
  strictly: unknown fields, missing required fields and wrong types are errors naming the field
  path. Conveniences: timestamps as RFC 3339 strings (offset required) or epoch microseconds;
  bytes as a UTF-8 string or ``{"base64": "..."}``; a union with null as the bare value.
- :func:`canonical` is the deterministic form that signatures cover: sorted keys, no spaces,
  timestamps as epoch microseconds, bytes base64, and *every field equal to its default omitted*
  (recursively), so adding a defaulted field to a schema never invalidates earlier signatures.
"""

from __future__ import annotations

import base64
import binascii
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from horae.contracts.codec import DecodeError
from horae.contracts.memo import INGEST_MEMO


def named_types(schema: Any, found: dict[str, Any] | None = None, ns: str = "") -> dict[str, Any]:
    """Every named type (record, enum, fixed) of a schema, by full name and short name."""
    found = {} if found is None else found
    if isinstance(schema, list):
        for branch in schema:
            named_types(branch, found, ns)
    elif isinstance(schema, dict):
        kind = schema.get("type")
        if kind in ("record", "enum", "fixed"):
            ns = schema.get("namespace", ns)
            name = schema["name"]
            full = name if "." in name else f"{ns}.{name}".lstrip(".")
            found[full] = found[name] = schema
        for f in schema.get("fields", ()):
            named_types(f["type"], found, ns)
        if kind == "array":
            named_types(schema["items"], found, ns)
        elif kind == "map":
            named_types(schema["values"], found, ns)
        elif isinstance(kind, dict | list):
            named_types(kind, found, ns)
    return found


_MISSING = object()


class _Walker:
    def __init__(self, schema: dict[str, Any]) -> None:
        self.schema = schema
        self.names = named_types(schema)
        #: each defaulted field's default datum, by the field's identity (the field dicts belong
        #: to ``schema``, which the walker holds): computed once, not per signature
        self._defaults: dict[int, Any] = {}

    def field_default(self, f: dict[str, Any]) -> Any:
        """The datum of field ``f``'s default (``f`` must have one); never mutated."""
        found = self._defaults.get(id(f), _MISSING)
        if found is _MISSING:
            found = self._defaults[id(f)] = self.default(f["type"], f["default"])
        return found

    def resolve(self, s: Any) -> Any:
        if isinstance(s, str) and s in self.names:
            return self.names[s]
        if isinstance(s, dict) and isinstance(s.get("type"), dict | list | str) and len(s) == 1:
            return self.resolve(s["type"])
        return s

    # --- JSON -> datum --------------------------------------------------------------------

    def coerce(self, s: Any, v: Any, path: str) -> Any:
        s = self.resolve(s)
        where = path or "<root>"
        if isinstance(s, list):
            if v is None and "null" in s:
                return None
            branches = [b for b in s if b != "null"]
            if len(branches) != 1:
                raise DecodeError("schema", f"{where}: unsupported union")
            return self.coerce(branches[0], v, path)
        kind = s.get("type") if isinstance(s, dict) else s
        if kind == "record":
            if not isinstance(v, dict):
                raise DecodeError("schema", f"{where}: expected an object")
            names = {f["name"] for f in s["fields"]}
            extra = sorted(set(v) - names)
            if extra:
                raise DecodeError("schema", f"{_join(path, extra[0])}: unknown field")
            out = {}
            for f in s["fields"]:
                sub = _join(path, f["name"])
                if f["name"] in v:
                    out[f["name"]] = self.coerce(f["type"], v[f["name"]], sub)
                elif "default" in f:
                    out[f["name"]] = self.default(f["type"], f["default"])
                else:
                    raise DecodeError("schema", f"{sub}: required field missing")
            return out
        if kind == "enum":
            if v not in s["symbols"]:
                raise DecodeError("schema", f"{where}: {v!r} is not one of {s['symbols']}")
            return v
        if kind == "array":
            if not isinstance(v, list):
                raise DecodeError("schema", f"{where}: expected a list")
            return [self.coerce(s["items"], x, f"{path}[{i}]") for i, x in enumerate(v)]
        if kind == "map":
            if not isinstance(v, dict):
                raise DecodeError("schema", f"{where}: expected an object")
            return {str(k): self.coerce(s["values"], x, _join(path, str(k))) for k, x in v.items()}
        if isinstance(s, dict) and s.get("logicalType") == "timestamp-micros":
            return _timestamp(v, where)
        return _primitive(kind, v, where)

    def default(self, s: Any, d: Any) -> Any:
        """The datum of an Avro JSON default (bytes defaults are latin-1 strings)."""
        s = self.resolve(s)
        if isinstance(s, list):
            return None if d is None else self.default(s[0], d)
        kind = s.get("type") if isinstance(s, dict) else s
        if kind == "record":
            return {
                f["name"]: self.default(f["type"], d[f["name"]] if f["name"] in d else f["default"])
                for f in s["fields"]
            }
        if kind == "array":
            return [self.default(s["items"], x) for x in d]
        if kind == "map":
            return {k: self.default(s["values"], x) for k, x in d.items()}
        if kind == "bytes":
            return str(d).encode("latin-1")
        if isinstance(s, dict) and s.get("logicalType") == "timestamp-micros":
            return _timestamp(d, "default")
        return d

    # --- datum -> canonical JSON value ----------------------------------------------------

    def canonical(self, s: Any, v: Any) -> Any:
        s = self.resolve(s)
        if isinstance(s, list):
            return None if v is None else self.canonical(next(b for b in s if b != "null"), v)
        kind = s.get("type") if isinstance(s, dict) else s
        if kind == "record":
            out = {}
            for f in s["fields"]:
                value = v.get(f["name"])
                if "default" in f and value == self.field_default(f):
                    continue
                out[f["name"]] = self.canonical(f["type"], value)
            return out
        if kind == "array":
            return [self.canonical(s["items"], x) for x in v]
        if kind == "map":
            return {k: self.canonical(s["values"], x) for k, x in v.items()}
        if kind == "bytes":
            return base64.b64encode(bytes(v)).decode("ascii")
        if isinstance(v, datetime):
            return _micros(v)
        return v


def coerce(schema: dict[str, Any], value: Any) -> dict[str, Any]:
    """The Avro datum of JSON ``value`` under ``schema``; :class:`DecodeError` ``schema``."""
    datum = _walker(schema).coerce(schema, value, "")
    assert isinstance(datum, dict)
    return datum


def _walker(schema: dict[str, Any]) -> _Walker:
    """The walker of ``schema``, made once per schema object while :data:`INGEST_MEMO` is on (its
    named types and defaults are computed once: they were ~40 % of checking a signature).
    Schemas are never mutated; the cache holds the few the codec has (at most 64)."""
    if not INGEST_MEMO.enabled:
        return _Walker(schema)
    found = _WALKERS.get(id(schema))
    if found is None or found.schema is not schema:
        if len(_WALKERS) >= 64:  # schemas built on the fly (tests): never more than a few
            _WALKERS.clear()
        found = _WALKERS[id(schema)] = _Walker(schema)
    return found


def canonical(schema: dict[str, Any], datum: dict[str, Any], omit: tuple[str, ...] = ()) -> bytes:
    """Canonical JSON bytes of a record datum (fields in ``omit`` left out)."""
    value = _walker(schema).canonical(schema, {k: v for k, v in datum.items() if k not in omit})
    for name in omit:
        value.pop(name, None)
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


_WALKERS: dict[int, _Walker] = {}


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _micros(v: datetime) -> int:
    delta = v.astimezone(UTC) - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _timestamp(v: Any, where: str) -> datetime:
    if isinstance(v, int) and not isinstance(v, bool):
        try:
            return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=v)
        except OverflowError as exc:
            raise DecodeError("schema", f"{where}: timestamp out of range") from exc
    if isinstance(v, str):
        try:
            parsed = datetime.fromisoformat(v.replace("Z", "+00:00").replace("z", "+00:00"))
        except ValueError as exc:
            raise DecodeError("schema", f"{where}: not an RFC 3339 instant: {v!r}") from exc
        if parsed.tzinfo is None:
            raise DecodeError("schema", f"{where}: instant needs an offset (e.g. Z): {v!r}")
        return parsed.astimezone(UTC)
    raise DecodeError("schema", f"{where}: expected an RFC 3339 string or epoch microseconds")


def _primitive(kind: Any, v: Any, where: str) -> Any:
    if kind == "string" and isinstance(v, str):
        return v
    if kind in ("long", "int") and isinstance(v, int) and not isinstance(v, bool):
        if not -(2**63) <= v < 2**63:
            raise DecodeError("schema", f"{where}: integer out of range")
        return v
    if kind in ("double", "float") and isinstance(v, int | float) and not isinstance(v, bool):
        return float(v)
    if kind == "boolean" and isinstance(v, bool):
        return v
    if kind == "null" and v is None:
        return None
    if kind == "bytes":
        if isinstance(v, str):
            return v.encode()
        if isinstance(v, dict) and set(v) == {"base64"} and isinstance(v["base64"], str):
            try:
                return base64.b64decode(v["base64"], validate=True)
            except (binascii.Error, ValueError) as exc:
                raise DecodeError("schema", f"{where}: bad base64") from exc
        raise DecodeError("schema", f"{where}: expected a string or {{'base64': ...}}")
    raise DecodeError("schema", f"{where}: expected {kind}, got {type(v).__name__}")


def plain(value: Any) -> Any:
    """A datum as the plain JSON :func:`coerce` accepts back (instants RFC 3339, bytes base64)."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    if isinstance(value, bytes):
        return {"base64": base64.b64encode(value).decode("ascii")}
    return value
