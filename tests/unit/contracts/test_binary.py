"""The compiled writers (horae.contracts.binary) write exactly what fastavro writes, on random
events of every contract type."""

from __future__ import annotations

import dataclasses
import io
import types
import typing
from collections.abc import Mapping
from datetime import UTC, datetime
from enum import Enum
from typing import Any

import fastavro
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from horae.contracts import events as ev
from horae.contracts._reflect import from_avro, hints, to_avro
from horae.contracts.codec import (
    Codec,
    CurrentSchemas,
    DecodeError,
    decode,
    default_codec,
    encode,
    set_wire_mode,
)
from tests.unit.contracts.samples import all_samples
from tests.unit.contracts.strategies import INSTANT, LONG

CURRENT = CurrentSchemas.load()


def strategy(tp: Any) -> st.SearchStrategy[Any]:
    """Values of a declared event field type."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        (inner,) = [a for a in typing.get_args(tp) if a is not type(None)]
        return st.none() | strategy(inner)
    origin = typing.get_origin(tp)
    if origin is tuple:
        return st.lists(strategy(typing.get_args(tp)[0]), max_size=3).map(tuple)
    if origin in (dict, Mapping):
        return st.dictionaries(st.text(max_size=5), strategy(typing.get_args(tp)[1]), max_size=3)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        fields = {name: strategy(t) for name, t in hints(tp).items()}
        return st.builds(tp, **fields)
    if isinstance(tp, type) and issubclass(tp, Enum):
        return st.sampled_from(list(tp))
    table: dict[Any, st.SearchStrategy[Any]] = {
        str: st.text(max_size=20),
        bytes: st.binary(max_size=20),
        int: LONG,
        float: st.floats(allow_nan=False),
        bool: st.booleans(),
        datetime: INSTANT,
    }
    return table[tp]


def _fastavro(event: ev.Event) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, CURRENT.parsed[type(event)], to_avro(event))
    return buf.getvalue()


@pytest.mark.parametrize("event_type", ev.EVENT_TYPES, ids=lambda t: t.__name__)
def test_compiled_writer_equals_fastavro(event_type: type[ev.Event]) -> None:
    @settings(max_examples=150, deadline=None)
    @given(strategy(event_type))
    def check(event: ev.Event) -> None:
        assert CURRENT.bodies[event_type](event) == _fastavro(event)

    check()


@pytest.mark.parametrize("event_type", ev.EVENT_TYPES, ids=lambda t: t.__name__)
def test_compiled_reader_equals_fastavro_and_from_avro(event_type: type[ev.Event]) -> None:
    parsed = CURRENT.parsed[event_type]

    @settings(max_examples=150, deadline=None)
    @given(strategy(event_type))
    def check(event: ev.Event) -> None:
        body = _fastavro(event)
        read, end = CURRENT.readers[event_type](body, 0)
        assert end == len(body)
        expected = from_avro(event_type, fastavro.schemaless_reader(io.BytesIO(body), parsed, None))
        assert read == expected == _normal(event)

    check()


def _normal(event: Any) -> Any:
    """What a value reads back as: instants in UTC (the wire keeps the instant, not the zone)."""
    if isinstance(event, datetime):
        return event.astimezone(UTC)
    if dataclasses.is_dataclass(event) and not isinstance(event, type):
        changes = {f.name: _normal(getattr(event, f.name)) for f in dataclasses.fields(event)}
        return dataclasses.replace(event, **changes)
    if isinstance(event, tuple):
        return tuple(_normal(x) for x in event)
    if isinstance(event, dict):
        return {k: _normal(v) for k, v in event.items()}
    return event


HEADERS = {encode(e)[:5]: type(e) for e in all_samples()}
SAMPLE_BYTES = [encode(e) for e in all_samples()]


@st.composite
def damaged(draw: st.DrawFn) -> bytes:
    """A sample record with one byte changed, cut short or one byte longer: often still a whole
    record, often not."""
    data = draw(st.sampled_from(SAMPLE_BYTES))
    at = draw(st.integers(5, len(data) - 1))
    how = draw(st.sampled_from(["change", "cut", "extend"]))
    if how == "change":
        return data[:at] + bytes([draw(st.integers(0, 255))]) + data[at + 1 :]
    return data[:at] if how == "cut" else data + bytes([draw(st.integers(0, 255))])


GARBAGE = st.builds(bytes.__add__, st.sampled_from(sorted(HEADERS)), st.binary(max_size=64))


def _fastavro_read(event_type: type[ev.Event], body: bytes) -> ev.Event | None:
    """What fastavro reads from ``body`` as a whole record, or None where it cannot."""
    buf = io.BytesIO(body)
    try:
        datum = fastavro.schemaless_reader(buf, CURRENT.parsed[event_type], None)
        event = from_avro(event_type, datum)
    except Exception:
        return None
    return event if buf.tell() == len(body) else None


@given(GARBAGE | damaged())
def test_compiled_reader_reads_garbage_as_fastavro_does_or_refuses_it(data: bytes) -> None:
    """Bytes behind a known schema id: the compiled reader returns exactly the event fastavro
    reads from them, or refuses them with a DecodeError whose cause is "avro" — always where
    fastavro cannot read one whole record, and where fastavro is lax (it takes a negative enum
    index as counting from the end)."""
    expected = _fastavro_read(HEADERS[data[:5]], data[5:])
    try:
        event = decode(data)
    except DecodeError as refused:
        assert refused.cause == "avro", refused
        return
    assert expected is not None, f"read {event!r} where fastavro reads no record"
    assert event == expected


def test_remembered_bytes_belong_to_their_own_object() -> None:
    """Writers reuse the bytes of an object written before (a shared target, the fire record
    inside its order); alternating objects, equal or not, still write their own bytes."""
    orders = [s for s in all_samples() if isinstance(s, ev.DispatchOrder)]
    assert orders
    base = orders[0]
    targets = [dataclasses.replace(base.target, url=f"https://t{i}.example/") for i in range(3)]
    for target in [*targets, targets[0], targets[2], dataclasses.replace(targets[1])]:
        order = dataclasses.replace(base, target=target)
        assert CURRENT.bodies[ev.DispatchOrder](order) == _fastavro(order)
        assert CURRENT.bodies[ev.FireRecord](order.fire) == _fastavro(order.fire)


def _broken(*_: object) -> Any:
    raise AssertionError("compiled code used")


@pytest.mark.parametrize("event", all_samples(), ids=lambda e: type(e).__name__)
def test_both_wire_modes_write_the_same_bytes_and_read_equal_events(event: ev.Event) -> None:
    compiled = Codec(current=CURRENT, mode="compiled")
    data = compiled.encode(event)
    no_compiled_code = dataclasses.replace(
        CURRENT,
        bodies={t: _broken for t in CURRENT.bodies},
        readers={t: _broken for t in CURRENT.readers},
    )
    plain = Codec(current=no_compiled_code, mode="fastavro")
    assert plain.encode(event) == data
    assert plain.decode(data) == compiled.decode(data) == _normal(event)


@pytest.mark.parametrize("event", all_samples(), ids=lambda e: type(e).__name__)
def test_a_type_without_compiled_code_goes_through_fastavro(event: ev.Event) -> None:
    t = type(event)
    without = dataclasses.replace(
        CURRENT,
        bodies={k: v for k, v in CURRENT.bodies.items() if k is not t},
        readers={k: v for k, v in CURRENT.readers.items() if k is not t},
    )
    codec = Codec(current=without, mode="compiled")
    data = codec.encode(event)
    assert data == Codec(current=CURRENT, mode="compiled").encode(event)
    assert codec.decode(data) == _normal(event)


def test_set_wire_mode_switches_the_process_codec_and_refuses_unknown_modes() -> None:
    event = all_samples()[0]
    data = encode(event)
    try:
        set_wire_mode("fastavro")
        assert default_codec().mode == "fastavro"
        assert encode(event) == data and decode(data) == _normal(event)
    finally:
        set_wire_mode("compiled")
    assert default_codec().mode == "compiled"
    with pytest.raises(ValueError, match="wire mode"):
        set_wire_mode("fast")  # type: ignore[arg-type]
