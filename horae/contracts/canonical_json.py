"""Canonical-JSON writers compiled per schema: event dataclass in, the bytes that
:func:`horae.contracts.jsonform.canonical` gives for ``to_avro(event)`` out.

Signatures cover the canonical form (:mod:`horae.contracts.signing`); computing it through
``to_avro`` and the generic schema walk cost ~100 µs per definition, most of the planner's ingest.
Here each record schema, with the dataclass of its event, becomes generated Python: a test per
field against its default (the schema default's datum, compared as the walk compares the datum),
then the JSON text of the fields kept, in sorted key order (known when compiling), straight from
the dataclass. Values of the types the dataclass declares take the fast path (strings through
:mod:`json`'s own escaping, ints and finite floats by ``repr``, UTC instants as epoch
microseconds, bytes as base64); any other value (an int where a float is declared, a non-UTC
instant, NaN, a subclass) is written by the generic walk for that value alone, so the bytes are
the same whatever the value. A property test compares both on generated definitions and commands.

Supported: records, enums, ``["null", X]`` unions (default null), string, bytes, long/int,
double/float, boolean, map and array (default empty), ``timestamp-micros`` (no default but null);
a schema using anything else gets no writer (:func:`canonical_writer` falls back to the walk).
Used while :data:`~horae.contracts.memo.INGEST_MEMO` is on (off: the walk every time).
"""

from __future__ import annotations

import base64
import dataclasses
import json
import types
import typing
from collections.abc import Callable, Collection, Mapping
from datetime import UTC, datetime, timedelta
from enum import Enum
from typing import Any

from horae.contracts._reflect import _writer, hints, to_avro
from horae.contracts.binary import Unsupported
from horae.contracts.events import INTERNED
from horae.contracts.jsonform import _Walker, canonical

Writer = Callable[[Any], bytes]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
_DUMPS = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode


def _encode_string(s: str) -> str:
    """A JSON string as :func:`json.dumps` with ``ensure_ascii=False`` writes it."""
    return json.encoder.encode_basestring(s)


def _micros(v: datetime) -> str:
    return str((v - _EPOCH) // _MICROSECOND)


def _b64(v: bytes) -> str:
    return '"' + base64.b64encode(v).decode("ascii") + '"'


_INF = float("inf")
_MEMO_LIMIT = 4096


def canonical_writer(cls: type, schema: dict[str, Any], omit: tuple[str, ...] = ()) -> Writer:
    """The writer of ``cls`` events under record ``schema`` (fields in ``omit`` left out): made
    once per (type, schema object, omit), remembering the text of the value objects events
    share (:data:`~horae.contracts.events.INTERNED`); the generic walk when the schema does not
    compile."""
    key = (cls, id(schema), omit)
    found = _WRITERS.get(key)
    if found is None or found[0] is not schema:
        try:
            writer = compile_canonical(cls, schema, omit, INTERNED)
        except Unsupported:

            def writer(event: Any) -> bytes:
                return canonical(schema, to_avro(event), omit)

        if len(_WRITERS) >= 64:  # schemas built on the fly (tests): never more than a few
            _WRITERS.clear()
        found = _WRITERS[key] = (schema, writer)
    return found[1]


_WRITERS: dict[tuple[type, int, tuple[str, ...]], tuple[dict[str, Any], Writer]] = {}


def compile_canonical(
    cls: type, schema: dict[str, Any], omit: tuple[str, ...] = (), shared: Collection[type] = ()
) -> Writer:
    """The generated writer (see the module docstring); raises :class:`Unsupported`. The text
    of a field holding a record of a ``shared`` type (frozen value objects many events share) is
    remembered per object, for the last ``_MEMO_LIMIT`` objects of each such field."""
    gen = _Generator(schema, shared)
    ident = gen.record(cls, schema, frozenset(omit))
    namespace: dict[str, Any] = {
        "_str": _encode_string,
        "_micros": _micros,
        "_b64": _b64,
        "_int": int.__repr__,
        "_float": float.__repr__,
        "_datetime": datetime,
        "_UTC": UTC,
        "_INF": _INF,
        **gen.constants,
    }
    exec(compile("\n".join(gen.lines), "<horae.contracts.canonical_json>", "exec"), namespace)
    write: Callable[[Any], str] = namespace[f"c_{ident}"]

    def writer(event: Any) -> bytes:
        return write(event).encode()

    return writer


def _optional(tp: Any) -> Any | None:
    if typing.get_origin(tp) not in (typing.Union, types.UnionType):
        return None
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if len(args) != 1:
        raise Unsupported(f"union {tp}")
    return args[0]


class _Generator:
    def __init__(self, root: dict[str, Any], shared: Collection[type]) -> None:
        self.shared = frozenset(shared)
        self.walker = _Walker(root)
        self.lines: list[str] = []
        self.constants: dict[str, Any] = {}
        self.done: dict[tuple[type, frozenset[str]], str] = {}
        self._n = 0

    def _const(self, value: Any, stem: str = "k") -> str:
        self._n += 1
        name = f"_{stem}{self._n}"
        self.constants[name] = value
        return name

    def _fresh(self, stem: str) -> str:
        self._n += 1
        return f"{stem}{self._n}"

    def record(self, cls: type, schema: Any, omit: frozenset[str] = frozenset()) -> str:
        """Emit ``c_<ident>(o) -> str`` for a record (once per class and omit)."""
        s = self.walker.resolve(schema)
        if not (isinstance(s, dict) and s.get("type") == "record"):
            raise Unsupported(f"not a record: {schema}")
        if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
            raise Unsupported(f"{cls} is not a dataclass")
        if (cls, omit) in self.done:
            return self.done[(cls, omit)]
        ident = self._fresh(cls.__name__)
        self.done[(cls, omit)] = ident
        declared = hints(cls)
        fields = {f["name"]: f for f in s["fields"]}
        if set(fields) != set(declared):
            raise Unsupported(f"{cls.__name__}: schema and dataclass fields differ")
        body = [f"def c_{ident}(o):", "    p = []"]
        for name in sorted(fields):  # json.dumps(sort_keys=True): the order is known now
            if name in omit:
                continue
            f, tp = fields[name], declared[name]
            x = self._fresh("x")
            key = _encode_string(name) + ":"
            body.append(f"    {x} = o.{name}")
            if tp in self.shared:
                body += self._remembered(tp, f, x, key)
                continue
            keep = f"p.append({key!r} + {self._emit(tp, f['type'], x)})"
            if "default" in f:
                datum = self.walker.field_default(f)
                body += [f"    if not ({self._is(tp, f['type'], x, datum)}):", f"        {keep}"]
            else:
                body.append(f"    {keep}")
        body += ["    return '{' + ','.join(p) + '}'", ""]
        self.lines += body
        return ident

    def _remembered(self, tp: Any, f: dict[str, Any], x: str, key: str) -> list[str]:
        """The lines keeping field ``f`` (a shared record in ``x``) or not, remembering the
        outcome per object (by identity: the memo holds the object, so its id stays its own)."""
        memo, t = self._const({}, "memo"), self._fresh("t")
        text = self._emit(tp, f["type"], x)
        if "default" in f:
            text = f"None if {self._is(tp, f['type'], x, self.walker.field_default(f))} else {text}"
        return [
            f"    m = {memo}.get(id({x}))",
            f"    if m is not None and m[0] is {x}:",
            f"        {t} = m[1]",
            "    else:",
            f"        {t} = {text}",
            f"        if len({memo}) >= {_MEMO_LIMIT}:",
            f"            {memo}.clear()",
            f"        {memo}[id({x})] = ({x}, {t})",
            f"    if {t} is not None:",
            f"        p.append({key!r} + {t})",
        ]

    def _slow(self, tp: Any, schema: Any) -> str:
        """A function writing one value the way the generic walk does (any value)."""
        convert, walker = _writer(tp), self.walker

        def slow(value: Any) -> str:
            return _DUMPS(walker.canonical(schema, convert(value)))

        return self._const(slow, "slow")

    def _emit(self, tp: Any, schema: Any, x: str) -> str:
        """An expression: the JSON text of the value in variable ``x`` (declared ``tp``)."""
        s = self.walker.resolve(schema)
        inner = _optional(tp)
        if isinstance(s, list):
            branches = [b for b in s if b != "null"]
            if inner is None or "null" not in s or len(branches) != 1:
                raise Unsupported(f"union {s}")
            return f"('null' if {x} is None else {self._emit(inner, branches[0], x)})"
        if inner is not None:
            raise Unsupported(f"{tp} for {s}")
        kind = s.get("type") if isinstance(s, dict) else s
        if kind == "record":
            return f"c_{self.record(tp, s)}({x})"
        slow = f"{self._slow(tp, s)}({x})"
        if kind == "enum":
            if not (isinstance(tp, type) and issubclass(tp, Enum)):
                raise Unsupported(f"enum {s['name']} as {tp}")
            table = self._const({m: _DUMPS(m.value) for m in tp}, "enum")
            return f"({table}[{x}] if type({x}) is {self._const(tp, 'cls')} else {slow})"
        if isinstance(s, dict) and s.get("logicalType") == "timestamp-micros":
            if tp is not datetime:
                raise Unsupported(f"timestamp as {tp}")
            utc = f"type({x}) is _datetime and {x}.tzinfo is _UTC"
            return f"(_micros({x}) if {utc} else {slow})"
        if kind == "array":
            if typing.get_origin(tp) is not tuple:
                raise Unsupported(f"array as {tp}")
            item = self._fresh("i")
            each = self._emit(typing.get_args(tp)[0], s["items"], item)
            return f"('[' + ','.join([{each} for {item} in {x}]) + ']')"
        if kind == "map":
            if typing.get_origin(tp) not in (dict, Mapping):
                raise Unsupported(f"map as {tp}")
            return f"{self._map(typing.get_args(tp)[1], s['values'])}({x})"
        fast: dict[Any, tuple[type, str]] = {
            "string": (str, f"_str({x})"),
            "long": (int, f"_int({x})"),
            "int": (int, f"_int({x})"),
            "bytes": (bytes, f"_b64({x})"),
        }
        if kind in fast and isinstance(s, str):
            py, text = fast[kind]
            if tp is not py:
                raise Unsupported(f"{kind} as {tp}")
            return f"({text} if type({x}) is {py.__name__} else {slow})"
        if kind in ("double", "float") and isinstance(s, str) and tp is float:
            return f"(_float({x}) if type({x}) is float and -_INF < {x} < _INF else {slow})"
        if kind == "boolean" and isinstance(s, str) and tp is bool:
            return f"('true' if {x} is True else 'false' if {x} is False else {slow})"
        raise Unsupported(f"type {s} as {tp}")

    def _map(self, tp: Any, schema: Any) -> str:
        """A function writing a map (keys as ``str(k)``, sorted, as the walk and json do)."""
        ident, value = self._fresh("m"), self._fresh("v")
        each = self._emit(tp, schema, value)
        self.lines += [
            f"def {ident}(x):",
            "    if not x:",
            "        return '{}'",
            "    d = {str(k): v for k, v in x.items()}",
            f"    items = [_str(k) + ':' + {each} for k, {value} in sorted(d.items())]",
            "    return '{' + ','.join(items) + '}'",
            "",
        ]
        return ident

    def _is(self, tp: Any, schema: Any, x: str, datum: Any) -> str:
        """An expression: whether the value in ``x`` converts to a datum equal to ``datum`` (the
        walk's ``value == default`` on the converted value)."""
        s = self.walker.resolve(schema)
        if isinstance(s, list):
            if datum is not None:
                raise Unsupported(f"union {s} with default {datum!r}")
            return f"{x} is None"
        kind = s.get("type") if isinstance(s, dict) else s
        if kind == "record":
            return f"{self._is_record(tp, s, datum)}({x})"
        if kind == "enum":
            if not (isinstance(tp, type) and issubclass(tp, Enum)):
                raise Unsupported(f"enum as {tp}")
            member = self._const(tp(datum), "member")
            return f"({x} is {member} or {x}.value == {self._const(datum)})"
        if isinstance(s, dict) and s.get("logicalType") == "timestamp-micros":
            raise Unsupported("a timestamp with a default other than null")
        if kind in ("array", "map"):
            if datum:
                raise Unsupported(f"{kind} with a non-empty default")
            return f"len({x}) == 0"
        return f"{x} == {self._const(datum)}"

    def _is_record(self, tp: Any, s: dict[str, Any], datum: Any) -> str:
        """A function: whether a record value converts to a datum equal to ``datum`` (a dict
        equals another when every field does)."""
        if not (isinstance(tp, type) and dataclasses.is_dataclass(tp)):
            raise Unsupported(f"record as {tp}")
        fields = {f["name"]: f for f in s["fields"]}
        declared = hints(tp)
        if set(fields) != set(declared) or not isinstance(datum, dict) or set(datum) != set(fields):
            raise Unsupported(f"{tp.__name__}: schema, dataclass and default fields differ")
        ident = self._fresh("d")
        body = [f"def {ident}(x):"]
        for name, f in fields.items():
            y = self._fresh("y")
            body += [
                f"    {y} = x.{name}",
                f"    if not ({self._is(declared[name], f['type'], y, datum[name])}):",
                "        return False",
            ]
        self.lines += [*body, "    return True", ""]
        return ident
