"""The compiled canonical-JSON writers (horae.contracts.canonical_json) write byte for byte what
the generic walk (horae.contracts.jsonform.canonical over to_avro) writes, or fail as it does."""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Callable, Mapping
from datetime import datetime
from enum import Enum
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from horae.contracts import events as ev
from horae.contracts import signing
from horae.contracts._reflect import hints, to_avro
from horae.contracts.binary import Unsupported
from horae.contracts.canonical_json import canonical_writer, compile_canonical
from horae.contracts.codec import CurrentSchemas
from horae.contracts.jsonform import canonical
from horae.contracts.memo import INGEST_MEMO
from tests.unit.contracts.samples import all_samples
from tests.unit.contracts.strategies import INSTANT, LONG

CURRENT = CurrentSchemas.load()
#: values of other types than declared, which the dataclasses do not refuse
ODD: dict[Any, st.SearchStrategy[Any]] = {
    float: st.integers(-(2**60), 2**60) | st.sampled_from([math.nan, math.inf, -math.inf, -0.0]),
    int: st.booleans(),
    datetime: st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(2200, 1, 1)),
}


def strategy(tp: Any, default: Any = dataclasses.MISSING) -> st.SearchStrategy[Any]:
    """Values of a declared event field type; often its default (so that the default tests of
    nested records are met both ways), sometimes a value of another type."""
    values = _values(tp)
    if default is not dataclasses.MISSING:
        values = st.just(default) | values
    return values


def _values(tp: Any) -> st.SearchStrategy[Any]:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        (inner,) = [a for a in typing.get_args(tp) if a is not type(None)]
        return st.none() | _values(inner)
    origin = typing.get_origin(tp)
    if origin is tuple:
        items = st.lists(_values(typing.get_args(tp)[0]), max_size=3)
        return items.map(tuple) | items
    if origin in (dict, Mapping):
        keys = st.text(max_size=5)
        return st.dictionaries(keys, _values(typing.get_args(tp)[1]), max_size=3)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        fields = {}
        for f in dataclasses.fields(tp):
            default = f.default
            if f.default_factory is not dataclasses.MISSING:
                default = f.default_factory()
            fields[f.name] = strategy(hints(tp)[f.name], default)
        return st.builds(tp, **fields)
    if isinstance(tp, type) and issubclass(tp, Enum):
        return st.sampled_from(list(tp))
    table: dict[Any, st.SearchStrategy[Any]] = {
        str: st.text(max_size=20),
        bytes: st.binary(max_size=20),
        int: LONG,
        float: st.floats(),
        bool: st.booleans(),
        datetime: INSTANT,
    }
    found = table[tp]
    return found | ODD[tp] if tp in ODD else found


def outcome(write: Callable[[], bytes]) -> bytes | type[BaseException]:
    try:
        return write()
    except Exception as exc:
        return type(exc)


def walk(event: Any, omit: tuple[str, ...] = ()) -> bytes:
    return canonical(CURRENT.raw[type(event)], to_avro(event), omit)


CASES = [(ev.TriggerDefinition, ("signature",)), (ev.Command, ("signature",))]
CASES += [(t, ()) for t in ev.EVENT_TYPES]


@pytest.mark.parametrize(("event_type", "omit"), CASES, ids=lambda c: getattr(c, "__name__", c))
def test_compiled_writer_equals_the_walk(event_type: type[ev.Event], omit: tuple[str, ...]) -> None:
    write = compile_canonical(event_type, CURRENT.raw[event_type], omit)
    shared = compile_canonical(event_type, CURRENT.raw[event_type], omit, ev.INTERNED)

    @settings(max_examples=300 if omit else 60, deadline=None)
    @given(strategy(event_type))
    def check(event: ev.Event) -> None:
        expected = outcome(lambda: walk(event, omit))
        assert outcome(lambda: write(event)) == expected
        for _ in range(2):  # the second time from the memo of the shared value objects
            assert outcome(lambda: shared(event)) == expected

    check()


def test_shared_value_objects_are_written_from_the_memo_alike() -> None:
    write = canonical_writer(ev.TriggerDefinition, CURRENT.raw[ev.TriggerDefinition])
    d = next(e for e in all_samples() if isinstance(e, ev.TriggerDefinition))
    policies = [ev.Policies(), ev.Policies(jitter_s=5), ev.Policies(retry=ev.RetryPolicy(2))]
    for p in policies * 2:  # the same objects again: remembered
        for changed in (
            dataclasses.replace(d, policies=p),
            dataclasses.replace(d, policies=p, version=9),
        ):
            assert write(changed) == walk(changed)


@pytest.mark.parametrize("event", all_samples(), ids=lambda e: type(e).__name__)
def test_samples_and_their_defaults(event: ev.Event) -> None:
    write = compile_canonical(type(event), CURRENT.raw[type(event)])
    assert write(event) == walk(event)
    defaults = {
        f.name: f.default if f.default_factory is dataclasses.MISSING else f.default_factory()
        for f in dataclasses.fields(event)  # type: ignore[arg-type]
        if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
    }
    bare = dataclasses.replace(event, **defaults)  # type: ignore[type-var]
    assert write(bare) == walk(bare)


def test_a_naive_instant_is_refused_both_ways() -> None:
    d = next(e for e in all_samples() if isinstance(e, ev.TriggerDefinition))
    naive = dataclasses.replace(d, authored_at=datetime(2026, 1, 1))
    write = compile_canonical(ev.TriggerDefinition, CURRENT.raw[ev.TriggerDefinition])
    with pytest.raises(ValueError, match="naive"):
        walk(naive)
    with pytest.raises(ValueError, match="naive"):
        write(naive)


def test_a_schema_it_does_not_compile_goes_through_the_walk() -> None:
    @dataclasses.dataclass(frozen=True)
    class Odd:
        name: str | None = "x"

    schema = {
        "type": "record",
        "name": "Odd",
        "fields": [{"name": "name", "type": ["string", "null"], "default": "x"}],
    }
    with pytest.raises(Unsupported):
        compile_canonical(Odd, schema)
    write = canonical_writer(Odd, schema)
    for value in (Odd(), Odd("y"), Odd(None)):
        assert write(value) == canonical(schema, to_avro(value))


@pytest.mark.parametrize("event", all_samples(), ids=lambda e: type(e).__name__)
def test_signing_bytes_are_the_same_with_the_memo_on_and_off(event: ev.Event) -> None:
    if not isinstance(event, ev.TriggerDefinition | ev.Command):
        return
    was = INGEST_MEMO.enabled
    try:
        INGEST_MEMO.enabled = False
        off = signing.signing_bytes(event)
        INGEST_MEMO.enabled = True
        assert signing.signing_bytes(event) == off
    finally:
        INGEST_MEMO.enabled = was
