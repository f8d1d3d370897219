"""Binary codec of the event contracts: fastavro bodies in the Confluent wire framing
(magic byte ``0`` + 4-byte big-endian schema id + schemaless Avro).

The schemas are package data (``horae/contracts/schemas``, read through :mod:`importlib.resources`,
so an installed wheel finds them). Schema ids come from their committed catalogue
``schemas/catalogue.json`` (stable, append-only) or, when ``HORAE_SCHEMA_REGISTRY_URL`` is set, from
a Confluent-compatible schema registry (subject = the record's full name, i.e. RecordNameStrategy).
Records are always *read* with the current schema of their type (``schemas/<Name>.avsc``) as reader
schema, so data written by any earlier released version decodes. ``decode`` never raises anything
but :class:`DecodeError`.
"""

from __future__ import annotations

import io
import json
import struct
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from importlib.resources.abc import Traversable
from typing import Any, Literal, Protocol, TypeVar, cast, get_args, overload

import fastavro
from fastavro.schema import to_parsing_canonical_form

from horae.contracts._reflect import from_avro, to_avro
from horae.contracts.binary import Body, compile_writers
from horae.contracts.binary_readers import Read, compile_readers
from horae.contracts.events import EVENT_TYPES, INTERNED, Event

SCHEMAS: Traversable = files("horae.contracts") / "schemas"
MAGIC = 0
_HEADER = struct.Struct(">bI")
E = TypeVar("E", bound=Event)
WireMode = Literal["compiled", "fastavro"]


class DecodeError(Exception):
    """The one error decoding raises. ``cause`` is a short code (``framing``, ``schema-id``,
    ``avro``, ``type``, ``json``, ``schema``, ``invalid``); ``detail`` says what was wrong."""

    def __init__(self, cause: str, detail: str) -> None:
        super().__init__(f"{cause}: {detail}")
        self.cause = cause
        self.detail = detail


class CatalogueError(Exception):
    """The committed schemas and catalogue disagree (a developer error, caught by CI)."""


def fullname(schema: dict[str, Any]) -> str:
    name = str(schema["name"])
    return name if "." in name else f"{schema.get('namespace', '')}.{name}".lstrip(".")


def load_schema(path: Traversable) -> dict[str, Any]:
    return cast(dict[str, Any], json.loads(path.read_text()))


def canonical(schema: dict[str, Any]) -> str:
    """Avro parsing canonical form (docs and defaults stripped) for identity comparisons."""
    return str(to_parsing_canonical_form(fastavro.parse_schema(schema, _write_hint=False)))


@dataclass(frozen=True)
class CurrentSchemas:
    """The current schema of every event type, read from ``schemas/<Name>.avsc``."""

    raw: dict[type[Event], dict[str, Any]]
    parsed: dict[type[Event], Any]
    by_name: dict[str, type[Event]]
    bodies: dict[type[Event], Body]  # compiled writers (horae.contracts.binary)
    readers: dict[type[Event], Read]  # compiled readers of records written with these schemas

    @classmethod
    def load(cls, schemas_dir: Traversable = SCHEMAS) -> CurrentSchemas:
        raw = {t: load_schema(schemas_dir / f"{t.__name__}.avsc") for t in EVENT_TYPES}
        parsed = {t: fastavro.parse_schema(s) for t, s in raw.items()}
        by_name = {fullname(s): t for t, s in raw.items()}
        shared = {f"horae.events.{t.__name__}" for t in INTERNED}
        writers = compile_writers({fullname(s): s for s in raw.values()}, shared)
        bodies = {by_name[n]: w for n, w in writers.items()}
        return cls(raw, parsed, by_name, bodies, compile_readers(EVENT_TYPES, INTERNED))


class SchemaIds(Protocol):
    """Where schema ids come from: the committed catalogue or a schema registry."""

    def writer_id(self, event_type: type[Event]) -> int: ...

    def writer_schema(self, schema_id: int) -> dict[str, Any] | None: ...


class Catalogue:
    """The committed catalogue: ``{"schemas": [{"id", "name", "version", "path"}]}``."""

    def __init__(self, current: CurrentSchemas, schemas_dir: Traversable = SCHEMAS) -> None:
        doc = json.loads((schemas_dir / "catalogue.json").read_text())
        self.entries: dict[int, dict[str, Any]] = {}
        self._schemas: dict[int, dict[str, Any]] = {}
        for entry in doc["schemas"]:
            sid = int(entry["id"])
            if sid in self.entries:
                raise CatalogueError(f"schema id {sid} appears twice in catalogue.json")
            schema = load_schema(schemas_dir / entry["path"])
            if fullname(schema) != entry["name"]:
                raise CatalogueError(f"id {sid}: {entry['path']} is not {entry['name']}")
            self.entries[sid] = entry
            self._schemas[sid] = schema
        self._writer: dict[type[Event], int] = {}
        for t, schema in current.raw.items():
            form = canonical(schema)
            ids = [i for i, s in self._schemas.items() if canonical(s) == form]
            if not ids:
                raise CatalogueError(
                    f"horae/contracts/schemas/{t.__name__}.avsc is not released: copy it to "
                    f"schemas/released/vN/ and append an entry with a new id to catalogue.json "
                    f"(docs/contracts.md)"
                )
            self._writer[t] = max(ids)

    def writer_id(self, event_type: type[Event]) -> int:
        return self._writer[event_type]

    def writer_schema(self, schema_id: int) -> dict[str, Any] | None:
        return self._schemas.get(schema_id)


class Registry:
    """Ids from a Confluent-compatible schema registry (subject = record full name)."""

    def __init__(self, url: str, current: CurrentSchemas) -> None:
        from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

        self._client = SchemaRegistryClient({"url": url})
        self._schema_cls = Schema
        self._current = current
        self._writer: dict[type[Event], int] = {}
        self._by_id: dict[int, dict[str, Any] | None] = {}
        self._lock = threading.Lock()

    def writer_id(self, event_type: type[Event]) -> int:
        with self._lock:
            if event_type not in self._writer:
                raw = self._current.raw[event_type]
                schema = self._schema_cls(json.dumps(raw), "AVRO")
                sid = self._client.register_schema(fullname(raw), schema)
                self._writer[event_type] = int(sid)
            return self._writer[event_type]

    def writer_schema(self, schema_id: int) -> dict[str, Any] | None:
        with self._lock:
            if schema_id not in self._by_id:
                try:
                    found = self._client.get_schema(schema_id)
                    self._by_id[schema_id] = cast(dict[str, Any], json.loads(str(found.schema_str)))
                except Exception:  # unknown id or registry trouble: the record is undecodable
                    return None
            return self._by_id[schema_id]


class Codec:
    """Encodes events to, and decodes them from, framed Avro. ``mode`` (default: the process's,
    see :func:`set_wire_mode`) chooses the body code for records of the current schemas."""

    def __init__(
        self,
        ids: SchemaIds | None = None,
        current: CurrentSchemas | None = None,
        mode: WireMode | None = None,
    ):
        self.current = current or CurrentSchemas.load()
        self.ids = ids or Catalogue(self.current)
        # schema id -> (type, writer schema, reader schema or None when they are identical:
        # fastavro's schema resolution costs more than the read itself)
        self._writers: dict[int, tuple[type[Event], Any, Any]] = {}
        self.set_mode(mode or _wire_mode)

    def set_mode(self, mode: WireMode) -> None:
        """``compiled``: the generated writers and readers (:mod:`horae.contracts.binary`), and
        fastavro for a type they do not compile; ``fastavro``: fastavro's schemaless writer and
        reader for every type — the same bytes and events, slower (to bisect a suspected bug
        of the compiled code)."""
        if mode not in get_args(WireMode):
            raise ValueError(f"wire mode {mode!r}: one of {get_args(WireMode)}")
        compiled = mode == "compiled"
        bodies, readers = self.current.bodies, self.current.readers
        self.mode = mode
        self._bodies: dict[type[Event], Body] = {
            t: bodies[t] if compiled and t in bodies else _fastavro_body(p)
            for t, p in self.current.parsed.items()
        }
        self._readers: dict[type[Event], Read] = {
            t: readers[t] if compiled and t in readers else _fastavro_reader(t, p)
            for t, p in self.current.parsed.items()
        }

    def header(self, event_type: type[Event]) -> bytes:
        """The wire header (magic byte, writer schema id) this codec writes ``event_type`` with."""
        return _HEADER.pack(MAGIC, self.ids.writer_id(event_type))

    def encode(self, event: Event) -> bytes:
        t = type(event)
        body = self._bodies.get(t)
        if body is None:
            raise TypeError(f"{t.__name__} is not an event contract")
        return _HEADER.pack(MAGIC, self.ids.writer_id(t)) + body(event)

    def decode_datum(self, data: bytes) -> tuple[type[Event], dict[str, Any]]:
        """The event type and the Avro datum (read with the current schema) of framed bytes."""
        t, writer, reader = self._writer(_schema_id(data))
        buf = io.BytesIO(bytes(data[_HEADER.size :]))
        try:
            datum = fastavro.schemaless_reader(buf, writer, reader)
        except Exception as exc:
            raise DecodeError("avro", f"{type(exc).__name__}: {exc}") from exc
        if buf.tell() != len(data) - _HEADER.size:
            raise DecodeError("avro", "trailing bytes after the record")
        if not isinstance(datum, dict):
            raise DecodeError("avro", "not a record")
        return t, datum

    @overload
    def decode(self, data: bytes) -> Event: ...

    @overload
    def decode(self, data: bytes, expect: type[E]) -> E: ...

    def decode(self, data: bytes, expect: type[Any] | None = None) -> Event:
        t, _, resolving = self._writer(_schema_id(data))
        if expect is not None and t is not expect:
            raise DecodeError("type", f"a {t.__name__} where a {expect.__name__} was expected")
        if resolving is not None:  # an older writer schema: fastavro resolves it
            return to_event(t, self.decode_datum(data)[1])
        try:
            event, end = self._readers[t](bytes(data), _HEADER.size)
        except Exception as exc:
            raise DecodeError("avro", f"{type(exc).__name__}: {exc}") from exc
        if end != len(data):
            raise DecodeError("avro", "trailing bytes after the record")
        return cast(Event, event)

    def warm(self, types: Iterable[type[Event]]) -> None:
        """Resolve the current writer schema of each of ``types`` now (parsed, compared with
        the reader's), so the first record of a burst is not the one that pays for it (tens of
        milliseconds on a small machine)."""
        for t in types:
            self._writer(self.ids.writer_id(t))

    def _writer(self, schema_id: int) -> tuple[type[Event], Any, Any]:
        if schema_id not in self._writers:
            schema = self.ids.writer_schema(schema_id)
            if schema is None:
                raise DecodeError("schema-id", f"unknown schema id {schema_id}")
            t = self.current.by_name.get(fullname(schema))
            if t is None:
                raise DecodeError("schema-id", f"id {schema_id} is {fullname(schema)}")
            try:
                parsed = fastavro.parse_schema(schema)
            except Exception as exc:
                raise DecodeError("schema-id", f"id {schema_id}: {exc}") from exc
            same = canonical(schema) == canonical(self.current.raw[t])
            self._writers[schema_id] = (t, parsed, None if same else self.current.parsed[t])
        return self._writers[schema_id]


def _fastavro_body(parsed: Any) -> Body:
    def body(event: Any) -> bytes:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, to_avro(event))
        return buf.getvalue()

    return body


def _fastavro_reader(t: type[Event], parsed: Any) -> Read:
    def read(data: bytes, offset: int) -> tuple[Any, int]:
        buf = io.BytesIO(data)
        buf.seek(offset)
        datum = fastavro.schemaless_reader(buf, parsed, None)
        return from_avro(t, datum), buf.tell()

    return read


_wire_mode: WireMode = "compiled"


def set_wire_mode(mode: WireMode) -> None:
    """The body code of this process's codec (see :meth:`Codec.set_mode`): ``compiled`` (the
    default) or ``fastavro``, to switch the compiled wire code off when bisecting. The caller
    (the CLI, from the ``codec`` setting; the test configuration) decides: this layer reads no
    settings for it."""
    global _wire_mode
    if mode not in get_args(WireMode):
        raise ValueError(f"wire mode {mode!r}: one of {get_args(WireMode)}")
    _wire_mode = mode
    if default_codec.cache_info().currsize:  # already built: switch it too
        default_codec().set_mode(mode)


_BUFFERS = (bytes, bytearray, memoryview)


def _schema_id(data: bytes) -> int:
    """The schema id in the Confluent framing of ``data``."""
    if not isinstance(data, _BUFFERS) or len(data) < _HEADER.size:
        raise DecodeError("framing", "shorter than the 5-byte wire header")
    magic, schema_id = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise DecodeError("framing", f"magic byte {magic}, expected {MAGIC}")
    return int(schema_id)


def to_event(t: type[E], datum: dict[str, Any]) -> E:
    """The event of type ``t`` for an Avro datum; :class:`DecodeError` ``invalid`` if it cannot be
    built (e.g. a naive timestamp or an unknown enum symbol)."""
    try:
        return cast(E, from_avro(t, datum))
    except Exception as exc:
        raise DecodeError("invalid", f"{type(exc).__name__}: {exc}") from exc


_registry_url: str | None = None


def use_schema_registry(url: str | None) -> None:
    """Take the schema ids of this process's codec from the registry at ``url`` (None: the
    committed catalogue, the default). The caller (the CLI, from the ``schema_registry_url``
    setting) decides, before the first record is encoded or decoded."""
    global _registry_url
    _registry_url = url
    default_codec.cache_clear()


@cache
def default_codec() -> Codec:
    """The process codec: the registry given to :func:`use_schema_registry`, else the
    catalogue."""
    current = CurrentSchemas.load()
    url = _registry_url
    return Codec(Registry(url, current) if url else Catalogue(current), current)


def encode(event: Event) -> bytes:
    """Framed Avro bytes of an event (see :class:`Codec`)."""
    return default_codec().encode(event)


@overload
def decode(data: bytes) -> Event: ...


@overload
def decode(data: bytes, expect: type[E]) -> E: ...


def decode(data: bytes, expect: type[Any] | None = None) -> Event:
    """The event in framed Avro bytes; raises only :class:`DecodeError`."""
    codec = default_codec()
    return codec.decode(data) if expect is None else codec.decode(data, expect)
