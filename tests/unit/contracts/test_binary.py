"""The compiled writers (horae.contracts.binary) write exactly what fastavro writes, on random
events of every contract type."""

from __future__ import annotations

import dataclasses
import io
import types
import typing
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta, timezone
from enum import Enum
from typing import Any

import fastavro
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from horae.contracts import events as ev
from horae.contracts._reflect import hints, to_avro
from horae.contracts.binary import Unsupported, compile_writers, long_bytes
from horae.contracts.codec import CurrentSchemas

CURRENT = CurrentSchemas.load()
LONG = st.integers(-(2**63), 2**63 - 1)
INSTANT = st.datetimes(
    min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)
) | st.builds(
    lambda d, h: d.replace(tzinfo=timezone(timedelta(hours=h))),
    st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(2200, 1, 1)),
    st.integers(-12, 12),
)


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


def test_a_nested_record_reuses_the_bytes_just_written() -> None:
    from tests.unit.contracts.samples import all_samples

    order = next(e for e in all_samples() if isinstance(e, ev.DispatchOrder))
    fire_body = CURRENT.bodies[ev.FireRecord](order.fire)
    assert CURRENT.bodies[ev.DispatchOrder](order).startswith(fire_body)
    assert CURRENT.bodies[ev.DispatchOrder](order) == _fastavro(order)


@given(LONG)
def test_long_is_zigzag_varint(n: int) -> None:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, "long", n)
    assert long_bytes(n) == buf.getvalue()


def test_unsupported_unions_are_refused_at_compile_time() -> None:
    schema = {"type": "record", "name": "X", "fields": [{"name": "a", "type": ["string", "long"]}]}
    with pytest.raises(Unsupported, match="union"):
        compile_writers({"X": schema})
