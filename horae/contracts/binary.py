"""Avro binary writers compiled from the schemas: event dataclass in, schemaless Avro body out.

The planner writes three records per fire; through ``to_wire`` and fastavro that was ~20 µs a
record, most of it per-call and per-field dispatch. Here each record schema becomes one generated
Python function (straight-line code per field, no datum dict), byte-for-byte what fastavro writes
(a property test compares them on random events; the golden bytes pin them down).

Supported: records, enums, ``["null", X]`` unions, string, bytes, long/int, double/float, boolean,
map, array and ``timestamp-micros`` (aware datetimes); enums as ``StrEnum`` members (a member is
its symbol) or symbol strings. A record whose schema uses anything else gets no writer
(:func:`compile_writers` leaves it out) and the codec writes it through fastavro.

Written records are remembered by identity — the last one of each type, and every one recently
written of the value objects many triggers share (``shared``): when the same object is written
again, alone or inside another record — a fire record inside its dispatch order, the target that a
thousand triggers share — its bytes are reused (a record's encoding is the concatenation of its
fields, so the nesting changes nothing; the memo holds the object, so its id is not reused).
The readers are in :mod:`horae.contracts.binary_readers`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Collection
from datetime import UTC, datetime, timedelta
from typing import Any

Body = Callable[[Any], bytes]

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
_SMALL = [bytes([n]) for n in range(128)]
_DOUBLE = struct.Struct("<d").pack
_FLOAT = struct.Struct("<f").pack
_PRIMITIVES = {"string", "bytes", "long", "int", "double", "float", "boolean", "null"}
_CACHE_LIMIT = 4096


class Unsupported(Exception):
    """The schema uses a construct these writers do not compile."""


def long_bytes(n: int) -> bytes:
    """Avro ``long``: zig-zag, then base-128 varint."""
    z = (n << 1) ^ (n >> 63)
    if z < 128:
        return _SMALL[z]
    out = bytearray()
    while z > 127:
        out.append((z & 127) | 128)
        z >>= 7
    out.append(z)
    return bytes(out)


_instants: dict[datetime, bytes] = {}


def instant_bytes(value: datetime) -> bytes:
    """``timestamp-micros`` of an aware datetime (recent instants are cached: a batch of fires
    shares its decided-at and, at a peak, its scheduled instant)."""
    found = _instants.get(value)
    if found is not None:
        return found
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"naive datetime {value.isoformat()}: every instant must be aware")
    encoded = long_bytes((value - EPOCH) // _MICROSECOND)
    if len(_instants) >= _CACHE_LIMIT:
        _instants.clear()
    _instants[value] = encoded
    return encoded


def compile_writers(
    schemas: dict[str, dict[str, Any]], shared: Collection[str] = ()
) -> dict[str, Body]:
    """One body writer per top-level record schema that these writers compile, by the record's
    full name (the others are left out). The records named in ``shared`` (the value objects many
    triggers share) remember the bytes of every object recently written, not only of the last
    one."""
    gen = _Generator(frozenset(shared))
    try:
        for schema in schemas.values():
            gen.record(schema, "")
    except Unsupported:
        schemas = {n: s for n, s in schemas.items() if _compiles(s)}
        gen = _Generator(frozenset(shared))
        for schema in schemas.values():
            gen.record(schema, "")
    namespace: dict[str, Any] = {
        "_long": long_bytes,
        "_instant": instant_bytes,
        "_double": _DOUBLE,
        "_float": _FLOAT,
        **gen.constants,
    }
    exec(compile("\n".join(gen.lines), "<horae.contracts.binary>", "exec"), namespace)
    writers: dict[str, Body] = {}
    for name in schemas:
        writers[name] = namespace[f"body_{gen.ident[name]}"]
    return writers


def _compiles(schema: dict[str, Any]) -> bool:
    try:
        _Generator(frozenset()).record(schema, "")
    except Unsupported:
        return False
    return True


class _Generator:
    def __init__(self, shared: frozenset[str]) -> None:
        self.shared = shared
        self.lines: list[str] = []
        self.constants: dict[str, Any] = {}
        self.ident: dict[str, str] = {}  # record full name -> python identifier
        self.named: dict[str, dict[str, Any]] = {}  # full name -> (enum or record) schema
        self._loop = 0

    def _fullname(self, name: str, namespace: str) -> str:
        return name if "." in name else f"{namespace}.{name}".lstrip(".")

    def record(self, schema: dict[str, Any], namespace: str) -> str:
        """Emit the writer of a record schema (once); returns its identifier."""
        namespace = schema.get("namespace", namespace)
        full = self._fullname(schema["name"], namespace)
        if full in self.ident:
            return self.ident[full]
        ident = full.replace(".", "_")
        self.ident[full] = ident
        self.named[full] = schema
        body: list[str] = []
        for field in schema["fields"]:
            body += self._value(field["type"], f"o.{field['name']}", namespace, 1)
        memo = f"_memo_{ident}"
        if full in self.shared:  # by identity: the memo holds the object, its id stays its own
            self.constants[memo] = {}
            recall = [f"    m = {memo}.get(id(o))", "    if m is not None and m[0] is o:"]
            remember = [
                f"    if len({memo}) >= {_CACHE_LIMIT}:",
                f"        {memo}.clear()",
                f"    {memo}[id(o)] = (o, bytes(out[start:]))",
            ]
        else:
            self.constants[memo] = [(None, b"")]
            recall = [f"    m = {memo}[0]", "    if m[0] is o:"]
            remember = [f"    {memo}[0] = (o, bytes(out[start:]))"]
        self.lines += [
            f"def write_{ident}(o, out):",
            *recall,
            "        out += m[1]",
            "        return",
            "    start = len(out)",
            *body,
            *remember,
            "",
            f"def body_{ident}(o):",
            "    out = bytearray()",
            f"    write_{ident}(o, out)",
            "    return bytes(out)",
            "",
        ]
        return ident

    def _value(self, tp: Any, expr: str, namespace: str, depth: int) -> list[str]:
        pad = "    " * depth
        if isinstance(tp, list):
            if len(tp) != 2 or tp[0] != "null":
                raise Unsupported(f"union {tp}: only [null, X] is compiled")
            var = f"u{depth}"
            return [
                f"{pad}{var} = {expr}",
                f"{pad}if {var} is None:",
                f"{pad}    out += b'\\x00'",
                f"{pad}else:",
                f"{pad}    out += b'\\x02'",
                *self._value(tp[1], var, namespace, depth + 1),
            ]
        if isinstance(tp, dict):
            kind = tp["type"]
            if kind == "record":
                return [f"{pad}write_{self.record(tp, namespace)}({expr}, out)"]
            if kind == "enum":
                return self._enum(tp, expr, namespace, pad)
            if kind == "long" and tp.get("logicalType") == "timestamp-micros":
                return [f"{pad}out += _instant({expr})"]
            if kind in ("map", "array"):
                return self._repeated(tp, expr, namespace, depth)
            if kind in _PRIMITIVES and "logicalType" not in tp:
                return self._value(kind, expr, namespace, depth)
            raise Unsupported(f"type {tp}")
        if tp in ("long", "int"):
            return [f"{pad}out += _long({expr})"]
        if tp == "string":
            var = f"s{depth}"
            return [f"{pad}{var} = {expr}.encode()", f"{pad}out += _long(len({var})) + {var}"]
        if tp == "bytes":
            var = f"s{depth}"
            return [f"{pad}{var} = {expr}", f"{pad}out += _long(len({var})) + {var}"]
        if tp == "double":
            return [f"{pad}out += _double({expr})"]
        if tp == "float":
            return [f"{pad}out += _float({expr})"]
        if tp == "boolean":
            return [f"{pad}out += b'\\x01' if {expr} else b'\\x00'"]
        if tp == "null":
            return []
        full = self._fullname(tp, namespace) if tp not in self.named else tp
        if full not in self.named:
            raise Unsupported(f"unknown named type {tp}")
        return self._value(self.named[full], expr, namespace, depth)

    def _enum(self, tp: dict[str, Any], expr: str, namespace: str, pad: str) -> list[str]:
        full = self._fullname(tp["name"], tp.get("namespace", namespace))
        self.named.setdefault(full, tp)
        table = f"_enum_{full.replace('.', '_')}"
        if table not in self.constants:
            self.constants[table] = {s: long_bytes(i) for i, s in enumerate(tp["symbols"])}
        return [f"{pad}out += {table}[{expr}]"]  # a StrEnum member is its symbol

    def _repeated(self, tp: dict[str, Any], expr: str, namespace: str, depth: int) -> list[str]:
        pad = "    " * depth
        self._loop += 1
        var, item, key = f"c{self._loop}", f"i{self._loop}", f"k{self._loop}"
        if tp["type"] == "map":
            head = f"{pad}    for {key}, {item} in {var}.items():"
            each = [
                f"{pad}        {key}b = str({key}).encode()",
                f"{pad}        out += _long(len({key}b)) + {key}b",
                *self._value(tp["values"], item, namespace, depth + 2),
            ]
        else:
            head = f"{pad}    for {item} in {var}:"
            each = self._value(tp["items"], item, namespace, depth + 2)
        return [
            f"{pad}{var} = {expr}",
            f"{pad}if {var}:",
            f"{pad}    out += _long(len({var}))",
            head,
            *each,
            f"{pad}out += b'\\x00'",
        ]
