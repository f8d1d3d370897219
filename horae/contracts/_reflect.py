"""Generic mapping between the frozen event dataclasses and Avro: datum conversion both ways and
the Avro schema a dataclass implies (used to prove the committed ``.avsc`` files mirror the Python
types one-to-one). Pure; no I/O."""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from datetime import UTC, datetime
from enum import Enum
from functools import cache
from typing import Any

NAMESPACE = "horae.events"
TIMESTAMP_MICROS: dict[str, str] = {"type": "long", "logicalType": "timestamp-micros"}


@cache
def hints(cls: type) -> dict[str, Any]:
    """Resolved type hints of a dataclass (cached)."""
    return typing.get_type_hints(cls)


def to_avro(obj: Any) -> Any:
    """A dataclass instance (or value within one) as the datum fastavro writes."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_avro(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, Enum):
        return obj.value
    if isinstance(obj, tuple | list):
        return [to_avro(x) for x in obj]
    if isinstance(obj, Mapping):
        return {str(k): to_avro(v) for k, v in obj.items()}
    if isinstance(obj, datetime):
        if obj.tzinfo is None:
            raise ValueError(f"naive datetime {obj.isoformat()}: every instant must be aware")
        return obj.astimezone(UTC)
    return obj


def from_avro(tp: Any, value: Any) -> Any:
    """The Python value of type ``tp`` for a datum read by fastavro."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None:
            return None
        (inner,) = [a for a in typing.get_args(tp) if a is not type(None)]
        return from_avro(inner, value)
    if origin is tuple:
        return tuple(from_avro(typing.get_args(tp)[0], v) for v in value)
    if origin in (dict, Mapping):
        inner = typing.get_args(tp)[1]
        return {k: from_avro(inner, v) for k, v in value.items()}
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        fields = hints(tp)
        return tp(**{k: from_avro(t, value[k]) for k, t in fields.items() if k in value})
    if isinstance(tp, type) and issubclass(tp, Enum):
        return tp(value)
    if tp is datetime:
        if not isinstance(value, datetime):
            raise TypeError(f"expected a timestamp, got {type(value).__name__}")
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    if tp is float and isinstance(value, int):
        return float(value)
    return value


def schema_of(cls: type) -> dict[str, Any]:
    """The Avro record schema the dataclass ``cls`` implies (named types defined once)."""
    result = _schema(cls, set())
    assert isinstance(result, dict)
    return result


def _default(value: Any) -> Any:
    """An Avro JSON default: bytes as a latin-1 string, per the specification."""
    datum = to_avro(value)
    return datum.decode("latin-1") if isinstance(datum, bytes) else datum


def _schema(tp: Any, defined: set[str]) -> Any:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        (inner,) = [a for a in typing.get_args(tp) if a is not type(None)]
        return ["null", _schema(inner, defined)]
    if origin is tuple:
        return {"type": "array", "items": _schema(typing.get_args(tp)[0], defined)}
    if origin in (dict, Mapping):
        return {"type": "map", "values": _schema(typing.get_args(tp)[1], defined)}
    if isinstance(tp, type) and (dataclasses.is_dataclass(tp) or issubclass(tp, Enum)):
        full = f"{NAMESPACE}.{tp.__name__}"
        if full in defined:
            return full
        defined.add(full)
        if issubclass(tp, Enum):
            return {"type": "enum", "name": tp.__name__, "symbols": [e.value for e in tp]}
        fields = []
        for f in dataclasses.fields(tp):
            entry: dict[str, Any] = {"name": f.name, "type": _schema(hints(tp)[f.name], defined)}
            if f.default is not dataclasses.MISSING:
                entry["default"] = _default(f.default)
            elif f.default_factory is not dataclasses.MISSING:
                entry["default"] = _default(f.default_factory())
            fields.append(entry)
        return {"type": "record", "name": tp.__name__, "namespace": NAMESPACE, "fields": fields}
    simple = {str: "string", int: "long", float: "double", bool: "boolean", bytes: "bytes"}
    if tp in simple:
        return simple[tp]
    if tp is datetime:
        return dict(TIMESTAMP_MICROS)
    raise TypeError(f"no Avro mapping for {tp!r}")
