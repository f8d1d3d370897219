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

from horae.contracts.events import ENUM_DEFAULTS

NAMESPACE = "horae.events"
TIMESTAMP_MICROS: dict[str, str] = {"type": "long", "logicalType": "timestamp-micros"}


@cache
def hints(cls: type) -> dict[str, Any]:
    """Resolved type hints of a dataclass (cached)."""
    return typing.get_type_hints(cls)


def to_avro(obj: Any) -> Any:
    """A dataclass instance (or value within one) as the datum fastavro writes (instants as aware
    datetimes: also the input of the canonical JSON form that signatures cover)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return _record_writer(obj.__class__)(obj)
    if isinstance(obj, Enum):
        return obj.value
    if isinstance(obj, tuple | list):
        return [to_avro(x) for x in obj]
    if isinstance(obj, Mapping):
        return {str(k): to_avro(v) for k, v in obj.items()}
    if isinstance(obj, datetime):
        return _aware(obj)
    return obj


def from_avro(tp: Any, value: Any) -> Any:
    """The Python value of type ``tp`` for a datum read by fastavro."""
    return _reader(tp)(value)


# Converters are compiled once per declared type (the projector's hot path decodes every record):
# no per-value introspection of type hints.
Convert = typing.Callable[[Any], Any]


def _identity(value: Any) -> Any:
    return value


def _aware(value: datetime) -> datetime:
    if value.tzinfo is None:
        raise ValueError(f"naive datetime {value.isoformat()}: every instant must be aware")
    return value.astimezone(UTC)


def _timestamp(value: Any) -> datetime:
    if not isinstance(value, datetime):
        raise TypeError(f"expected a timestamp, got {type(value).__name__}")
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _float(value: Any) -> Any:
    return float(value) if isinstance(value, int) else value


def _optional_inner(tp: Any) -> Any | None:
    """``X`` for a declared ``X | None``, else None."""
    if typing.get_origin(tp) not in (typing.Union, types.UnionType):
        return None
    (inner,) = [a for a in typing.get_args(tp) if a is not type(None)]
    return inner


def _unless_none(convert: Convert) -> Convert:
    if convert is _identity:
        return _identity
    return lambda value: None if value is None else convert(value)


@cache
def _record_writer(cls: Any) -> Convert:
    fields = tuple((name, _writer(tp)) for name, tp in hints(cls).items())
    plain = tuple(name for name, w in fields if w is _identity)
    converted = tuple((name, w) for name, w in fields if w is not _identity)

    def write(obj: Any) -> Any:
        datum = {name: getattr(obj, name) for name in plain}
        for name, w in converted:
            datum[name] = w(getattr(obj, name))
        return datum

    return write


@cache
def _writer(tp: Any) -> Convert:
    """How to write a value of the declared type ``tp``."""
    inner = _optional_inner(tp)
    if inner is not None:
        return _unless_none(_writer(inner))
    origin = typing.get_origin(tp)
    if origin is tuple:
        item = _writer(typing.get_args(tp)[0])
        return lambda v: [item(x) for x in v]
    if origin in (dict, Mapping):
        value = _writer(typing.get_args(tp)[1])
        return lambda v: {str(k): value(x) for k, x in v.items()}
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _record_writer(tp)
    if isinstance(tp, type) and issubclass(tp, Enum):
        return lambda v: v.value
    if tp is datetime:
        return _aware
    return _identity


@cache
def _reader(tp: Any) -> Convert:
    """How to turn a datum into a value of the declared type ``tp``."""
    inner = _optional_inner(tp)
    if inner is not None:
        return _unless_none(_reader(inner))
    origin = typing.get_origin(tp)
    if origin is tuple:
        item = _reader(typing.get_args(tp)[0])
        return lambda value: tuple(item(v) for v in value)
    if origin in (dict, Mapping):
        element = _reader(typing.get_args(tp)[1])
        return lambda value: {k: element(v) for k, v in value.items()}
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        fields = tuple((k, _reader(t)) for k, t in hints(tp).items())
        plain = tuple(k for k, r in fields if r is _identity)
        converted = tuple((k, r) for k, r in fields if r is not _identity)

        def read_record(value: Any) -> Any:
            kwargs = {k: value[k] for k in plain if k in value}
            for k, r in converted:
                if k in value:
                    kwargs[k] = r(value[k])
            return tp(**kwargs)

        return read_record
    if isinstance(tp, type) and issubclass(tp, Enum):
        return tp
    if tp is datetime:
        return _timestamp
    if tp is float:
        return _float
    return _identity


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
            symbols = [e.value for e in tp]
            default = ENUM_DEFAULTS[tp].value
            return {"type": "enum", "name": tp.__name__, "symbols": symbols, "default": default}
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
