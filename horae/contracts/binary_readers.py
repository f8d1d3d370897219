"""Avro binary readers compiled from the event dataclasses: framed body in, event out.

Generated from the dataclasses (whose schemas are the current .avsc files, a test proves it): the
codec uses them for records written with the current schema and keeps fastavro's schema
resolution for older writer schemas. Malformed input raises (IndexError, ValueError, ...); the
codec turns any exception into a DecodeError.

Interned record types (the value objects many triggers share: recurrence, policies, quotas,
target) are read by their bytes: the record is first skipped (no object built, nothing decoded),
and equal bytes seen before give the very object decoded then. Before skipping, the bytes of the
last record of the type read are compared with the input at the offset: a record is
self-delimiting, so input that starts with them holds that very record (consecutive definitions
mostly share their policies and quotas, often their recurrence). A planner rebuilding a million
definitions thus builds each distinct recurrence or policy once, and holds it once. The objects
are frozen; a shared target's headers mapping is read-only by convention, like every event's.
Each interned type has an :class:`InternTable` in the namespace of the readers compiled with it
(so a codec owns its tables): bounded by two generations of ``INTERN_LIMIT`` encodings, the
encodings met since the last turn survive it; :func:`intern_stats` reports them.
"""

from __future__ import annotations

import dataclasses
import struct
import types
import typing
from collections.abc import Callable, Collection, Iterable, Mapping
from datetime import datetime, timedelta
from enum import Enum
from typing import Any

from horae.contracts.binary import EPOCH, Unsupported

INTERN_LIMIT = 65_536  # encodings per generation of each interned type's table

Read = Callable[[bytes, int], tuple[Any, int]]


def read_long(b: bytes, p: int) -> tuple[int, int]:
    x = b[p]
    p += 1
    if x < 128:
        return (x >> 1) ^ -(x & 1), p
    v = x & 127
    shift = 7
    while True:
        x = b[p]
        p += 1
        v |= (x & 127) << shift
        if x < 128:
            return (v >> 1) ^ -(v & 1), p
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")


def read_bytes(b: bytes, p: int) -> tuple[bytes, int]:
    n, p = read_long(b, p)
    end = p + n
    if n < 0 or end > len(b):
        raise ValueError(f"length {n} out of bounds")
    return b[p:end], end


def read_string(b: bytes, p: int) -> tuple[str, int]:
    n, p = read_long(b, p)
    end = p + n
    if n < 0 or end > len(b):
        raise ValueError(f"length {n} out of bounds")
    return b[p:end].decode(), end


# Recent instants by their encoding. Every instant from 1988 to 3110 is an 8-byte
# varint, and an 8-byte key that was stored came from a complete 8-byte varint (seven bytes with
# the continuation bit, one without), so a hit is that very varint: no decoding.
_instants: dict[bytes, datetime] = {}
_INSTANTS_LIMIT = 65_536


def read_instant(b: bytes, p: int) -> tuple[datetime, int]:
    key = b[p : p + 8]
    found = _instants.get(key)
    if found is not None:
        return found, p + 8
    micros, end = read_long(b, p)
    found = EPOCH + timedelta(microseconds=micros)
    if end - p == 8:
        if len(_instants) >= _INSTANTS_LIMIT:
            _instants.clear()
        _instants[key] = found
    return found, end


def read_boolean(b: bytes, p: int) -> tuple[bool, int]:
    x = b[p]
    if x > 1:
        raise ValueError(f"boolean byte {x}")
    return x == 1, p + 1


_UNPACK_DOUBLE = struct.Struct("<d").unpack_from


def read_double(b: bytes, p: int) -> tuple[float, int]:
    return _UNPACK_DOUBLE(b, p)[0], p + 8


@dataclasses.dataclass(frozen=True, slots=True)
class InternStats:
    misses: int  # encodings decoded (every other read of the type was a hit)
    size: int
    evictions: int


class InternTable:
    """The records of one interned type by their encoding. Readers look ``young`` up directly (a
    hit costs one dict lookup) and call :meth:`recall` on a miss: an encoding found in ``old``
    moves to ``young``; one found nowhere is decoded. When ``young`` is full, ``old`` is dropped
    and replaced by a copy of ``young``, which is emptied (the readers keep that very dict)."""

    __slots__ = ("decode", "evictions", "limit", "misses", "old", "young")

    def __init__(self, decode: Read, limit: int = INTERN_LIMIT) -> None:
        self.decode = decode
        self.limit = limit
        self.young: dict[bytes, Any] = {}
        self.old: dict[bytes, Any] = {}
        self.misses = 0
        self.evictions = 0

    def recall(self, b: bytes, start: int, key: bytes) -> Any:
        found = self.old.pop(key, None)
        if found is None:
            found, _ = self.decode(b, start)
            self.misses += 1
        if len(self.young) >= self.limit:
            self.evictions += len(self.old)
            self.old = self.young.copy()
            self.young.clear()
        self.young[key] = found
        return found

    def stats(self) -> InternStats:
        return InternStats(self.misses, len(self.young) + len(self.old), self.evictions)


def intern_stats(readers: Mapping[type, Read]) -> dict[str, InternStats]:
    """The stats of the intern tables of readers from :func:`compile_readers`, by type name."""
    tables: dict[str, InternStats] = {}
    for read in readers.values():
        for name, value in getattr(read, "__globals__", {}).items():
            if isinstance(value, InternTable):
                tables[name.removeprefix("_table_")] = value.stats()
    return tables


def compile_readers(types: Iterable[type], interned: Collection[type] = ()) -> dict[type, Read]:
    """One reader per dataclass whose fields these readers compile (the others are left out:
    the codec reads them through fastavro): ``read(data, offset) -> (instance, end offset)``;
    the records of ``interned`` types are shared by their bytes (see the module docstring)."""
    types = tuple(types)
    gen = _ReaderGenerator(interned)
    try:
        idents = {t: gen.record(t) for t in types}
    except Unsupported:
        gen = _ReaderGenerator(interned)
        idents = {t: gen.record(t) for t in types if _compiles(t, interned)}
    namespace: dict[str, Any] = {
        "_long": read_long,
        "_bytes": read_bytes,
        "_string": read_string,
        "_instant": read_instant,
        "_boolean": read_boolean,
        "_double": read_double,
        "_skip": skip_varint,
        "_skip_sized": skip_sized,
        **gen.constants,
    }
    exec(compile("\n".join(gen.lines), "<horae.contracts.binary_readers>", "exec"), namespace)
    for ident in gen.interned_idents:
        table = namespace[f"_table_{ident}"] = InternTable(namespace[f"decode_{ident}"])
        namespace[f"_young_{ident}"] = table.young
        namespace[f"_last_{ident}"] = [(b"", None)]  # one tuple, replaced whole (threads)
    return {t: namespace[f"read_{ident}"] for t, ident in idents.items()}


def _compiles(t: type, interned: Collection[type]) -> bool:
    try:
        _ReaderGenerator(interned).record(t)
    except Unsupported:
        return False
    return True


def skip_varint(b: bytes, p: int) -> int:
    """The offset after the varint at ``p``."""
    while b[p] & 128:
        p += 1
    return p + 1


def skip_sized(b: bytes, p: int) -> int:
    """The offset after the length-prefixed bytes at ``p`` (never backwards)."""
    n, p = read_long(b, p)
    if n < 0:
        raise ValueError(f"negative length {n}")
    return p + n


class _ReaderGenerator:
    def __init__(self, interned: Collection[type]) -> None:
        self.interned = frozenset(interned)
        self.lines: list[str] = []
        self.constants: dict[str, Any] = {}
        self.ident: dict[type, str] = {}
        self.skips: set[type] = set()
        self.interned_idents: list[str] = []
        self._n = 0

    def _fresh(self, stem: str) -> str:
        self._n += 1
        return f"{stem}{self._n}"

    def record(self, cls: type) -> str:
        if cls in self.ident:
            return self.ident[cls]
        ident = cls.__name__
        self.ident[cls] = ident
        self.constants[f"_cls_{ident}"] = cls
        body: list[str] = []
        names: list[str] = []
        for name, tp in typing.get_type_hints(cls).items():
            var = self._fresh("f")
            body += self._value(tp, var, 1)
            names.append(f"{name}={var}")
        decoded = f"decode_{ident}" if cls in self.interned else f"read_{ident}"
        self.lines += [f"def {decoded}(b, p):", *body, *self._build(cls, ident, names), ""]
        if cls in self.interned:
            self.interned_idents.append(ident)
            self.lines += [
                f"def read_{ident}(b, p):",
                f"    k, o = _last_{ident}[0]",
                "    if k and b.startswith(k, p):",
                "        return o, p + len(k)",
                "    s = p",
                f"    p = skip_{self._skipper(cls)}(b, p)",
                "    if p > len(b):",
                "        raise ValueError('record runs past the end')",
                "    k = b[s:p]",
                f"    o = _young_{ident}.get(k)",
                "    if o is None:",
                f"        o = _table_{ident}.recall(b, s, k)",
                f"    _last_{ident}[0] = (k, o)",
                "    return o, p",
                "",
            ]
        return ident

    def _value(self, tp: Any, var: str, depth: int) -> list[str]:
        pad = "    " * depth
        origin = typing.get_origin(tp)
        if origin in (typing.Union, types.UnionType):
            return self._union(tp, depth, lambda inner: self._value(inner, var, depth + 1), var)
        if origin is tuple or origin in (dict, Mapping):
            return self._repeated(tp, var, depth)
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):
            return [f"{pad}{var}, p = read_{self.record(tp)}(b, p)"]
        if isinstance(tp, type) and issubclass(tp, Enum):
            table = f"_enum_{tp.__name__}"
            self.constants[table] = tuple(tp)
            index = self._fresh("e")
            return [
                *self._long(index, pad),
                f"{pad}if {index} < 0:",
                f"{pad}    raise ValueError(f'enum index {{{index}}}')",
                f"{pad}{var} = {table}[{index}]",
            ]
        simple = {
            str: "_string",
            bytes: "_bytes",
            int: "_long",
            float: "_double",
            bool: "_boolean",
            datetime: "_instant",
        }
        if tp is int:
            return self._long(var, pad)
        if tp is str:
            n, end = self._fresh("n"), self._fresh("end")
            return [
                *self._long(n, pad),
                f"{pad}{end} = p + {n}",
                f"{pad}if {n} < 0 or {end} > len(b):",
                f"{pad}    raise ValueError(f'length {{{n}}} out of bounds')",
                f"{pad}{var} = b[p:{end}].decode()",
                f"{pad}p = {end}",
            ]
        if tp in simple:
            return [f"{pad}{var}, p = {simple[tp]}(b, p)"]
        raise Unsupported(f"type {tp}")

    @staticmethod
    def _long(var: str, pad: str) -> list[str]:
        """A ``long`` into ``var``: one-byte values (most lengths, enums, small numbers) inline."""
        return [
            f"{pad}{var} = b[p]",
            f"{pad}if {var} < 128:",
            f"{pad}    {var} = ({var} >> 1) ^ -({var} & 1)",
            f"{pad}    p += 1",
            f"{pad}else:",
            f"{pad}    {var}, p = _long(b, p)",
        ]

    def _build(self, cls: type, ident: str, names: list[str]) -> list[str]:
        """The lines that return the instance. A frozen dataclass's ``__init__`` sets each field
        through ``object.__setattr__`` (~0.25 µs a field); a slotted one is built by setting its
        slots directly, which is what that ``__init__`` amounts to (no field is init=False and
        none has a __post_init__, which is checked here)."""
        fields = dataclasses.fields(cls)
        slots = [cls.__dict__.get(f.name) for f in fields]
        direct = not hasattr(cls, "__post_init__") and all(
            f.init and isinstance(d, types.MemberDescriptorType)
            for f, d in zip(fields, slots, strict=True)
        )
        if not direct:
            return [f"    return _cls_{ident}({', '.join(names)}), p"]
        lines = [f"    o = _new(_cls_{ident})"]
        self.constants["_new"] = object.__new__
        for f, d, assign in zip(fields, slots, names, strict=True):
            name, var = assign.split("=", 1)
            assert name == f.name, (name, f.name)
            setter = f"_set_{ident}_{name}"
            self.constants[setter] = d.__set__  # type: ignore[union-attr]
            lines.append(f"    {setter}(o, {var})")
        return [*lines, "    return o, p"]

    @staticmethod
    def _union(
        tp: Any, depth: int, inner_lines: Callable[[Any], list[str]], var: str | None = None
    ) -> list[str]:
        pad = "    " * depth
        (inner,) = [a for a in typing.get_args(tp) if a is not type(None)]
        return [
            f"{pad}if b[p] == 0:",
            f"{pad}    p += 1",
            *([f"{pad}    {var} = None"] if var is not None else []),
            f"{pad}elif b[p] == 2:",
            f"{pad}    p += 1",
            *inner_lines(inner),
            f"{pad}else:",
            f"{pad}    raise ValueError(f'union branch byte {{b[p]}}')",
        ]

    def _repeated(self, tp: Any, var: str, depth: int) -> list[str]:
        pad = "    " * depth
        is_map = typing.get_origin(tp) is not tuple
        element = typing.get_args(tp)[1 if is_map else 0]
        count, item, key = self._fresh("n"), self._fresh("i"), self._fresh("k")
        read_item = self._value(element, item, depth + 2)
        if is_map:
            start, add = f"{var} = {{}}", f"{var}[{key}] = {item}"
            read_item = [f"{pad}        {key}, p = _string(b, p)", *read_item]
        else:
            start, add = f"{var} = []", f"{var}.append({item})"
        return [
            f"{pad}{start}",
            f"{pad}while True:",
            f"{pad}    {count}, p = _long(b, p)",
            f"{pad}    if {count} == 0:",
            f"{pad}        break",
            f"{pad}    if {count} < 0:",  # a block with its byte size
            f"{pad}        {count} = -{count}",
            f"{pad}        _, p = _long(b, p)",
            f"{pad}    for _ in range({count}):",
            *read_item,
            f"{pad}        {add}",
            *([] if is_map else [f"{pad}{var} = tuple({var})"]),
        ]

    # --- skipping: only the end offset of a record, nothing decoded -----------------------
    def _skipper(self, cls: type) -> str:
        ident = cls.__name__
        if cls not in self.skips:
            self.skips.add(cls)
            body: list[str] = []
            for tp in typing.get_type_hints(cls).values():
                body += self._skip(tp, 1)
            self.lines += [f"def skip_{ident}(b, p):", *body, "    return p", ""]
        return ident

    def _skip(self, tp: Any, depth: int) -> list[str]:
        pad = "    " * depth
        origin = typing.get_origin(tp)
        if origin in (typing.Union, types.UnionType):
            return self._union(tp, depth, lambda inner: self._skip(inner, depth + 1))
        if origin is tuple or origin in (dict, Mapping):
            is_map = origin is not tuple
            element = typing.get_args(tp)[1 if is_map else 0]
            count = self._fresh("n")
            return [
                f"{pad}while True:",
                f"{pad}    {count}, p = _long(b, p)",
                f"{pad}    if {count} == 0:",
                f"{pad}        break",
                f"{pad}    if {count} < 0:",  # a block with its byte size: jump over it
                f"{pad}        p = _skip_sized(b, p)",
                f"{pad}        continue",
                f"{pad}    for _ in range({count}):",
                *([f"{pad}        p = _skip_sized(b, p)"] if is_map else []),
                *self._skip(element, depth + 2),
            ]
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):
            return [f"{pad}p = skip_{self._skipper(tp)}(b, p)"]
        if tp in (str, bytes):
            return [f"{pad}p = _skip_sized(b, p)"]
        if tp is float:
            return [f"{pad}p += 8"]
        if tp is bool:
            return [f"{pad}p += 1"]
        if tp in (int, datetime) or (isinstance(tp, type) and issubclass(tp, Enum)):
            return [f"{pad}p = _skip(b, p)"]
        raise Unsupported(f"type {tp}")
