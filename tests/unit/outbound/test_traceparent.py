"""W3C ``traceparent`` values: round trip, malformed values ignored, children keep the trace."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from horae.outbound.traceparent import (
    HEADER,
    TraceParent,
    child,
    from_headers,
    new_root,
    parse,
)

HEX = "0123456789abcdef"
trace_ids = st.text(HEX, min_size=32, max_size=32).filter(lambda s: s.strip("0"))
span_ids = st.text(HEX, min_size=16, max_size=16).filter(lambda s: s.strip("0"))
flags = st.integers(0, 255)
EXAMPLE = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


@given(trace_ids, span_ids, flags)
def test_a_value_round_trips(trace_id: str, span_id: str, flag: int) -> None:
    value = TraceParent(trace_id, span_id, flag)
    assert parse(str(value)) == value
    assert parse(str(value).encode()) == value


def test_the_recommendations_example() -> None:
    parsed = parse(EXAMPLE)
    assert parsed == TraceParent("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", 1)
    assert parsed.sampled
    assert str(parsed) == EXAMPLE


@pytest.mark.parametrize(
    "value",
    [
        None,
        "",
        "garbage",
        EXAMPLE.upper(),
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        EXAMPLE + "-extra",
        EXAMPLE[:-1],
        "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
        b"\xff\xfe",
        EXAMPLE + "0" * 600,
    ],
)
def test_a_malformed_value_is_ignored(value: str | bytes | None) -> None:
    assert parse(value) is None


@given(st.text(max_size=80))
def test_parse_never_raises_and_only_accepts_what_it_writes(value: str) -> None:
    parsed = parse(value)
    assert parsed is None or parse(str(parsed)) == parsed


def test_a_later_version_is_read_by_its_first_fields() -> None:
    parsed = parse("01" + EXAMPLE[2:] + "-more")
    assert parsed is not None and parsed.trace_id == "4bf92f3577b34da6a3ce929d0e0e4736"


@given(trace_ids, span_ids, flags, st.randoms(use_true_random=False))
def test_a_child_keeps_the_trace_and_takes_a_new_span(
    trace_id: str, span_id: str, flag: int, rng: random.Random
) -> None:
    parent = TraceParent(trace_id, span_id, flag)
    kid = child(parent, rng.randbytes)
    assert (kid.trace_id, kid.flags) == (parent.trace_id, parent.flags)
    assert parse(str(kid)) == kid


def test_zero_random_bytes_are_drawn_again() -> None:
    draws = iter([b"\0" * 8, b"\x01" * 8])
    kid = child(parse(EXAMPLE) or new_root(), lambda n: next(draws))
    assert kid.span_id == "01" * 8


def test_a_root_is_valid_and_sampled() -> None:
    root = new_root()
    assert parse(str(root)) == root and root.sampled


def test_the_header_is_read_from_a_records_headers() -> None:
    assert from_headers(None) is None
    assert from_headers([("other", b"x")]) is None
    assert from_headers([("other", b"x"), (HEADER, EXAMPLE.encode())]) == parse(EXAMPLE)
    assert from_headers([(HEADER, b"bad")]) is None
