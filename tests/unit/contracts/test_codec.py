from __future__ import annotations

import struct

import pytest

from horae.contracts import events as ev
from horae.contracts.codec import Codec, DecodeError, decode, encode
from tests.unit.contracts.samples import all_samples, definition


def test_every_event_type_has_a_sample() -> None:
    assert {type(s) for s in all_samples()} == set(ev.EVENT_TYPES)


@pytest.mark.parametrize("event", all_samples(), ids=lambda e: type(e).__name__)
def test_round_trip(event: ev.Event) -> None:
    data = encode(event)
    assert data[0] == 0
    assert decode(data) == event
    assert decode(data, type(event)) == event


def test_minimal_definition_round_trips_with_defaults() -> None:
    d = definition()
    minimal = ev.TriggerDefinition(
        tenant="t",
        trigger_id="x",
        version=1,
        state=ev.DefinitionState.LIVE,
        recurrence=ev.Recurrence(kind=ev.RecurrenceKind.EVERY, interval_s=300),
        target=ev.Target(kind=ev.TargetKind.EVENT, topic="t.events"),
        authored_at=d.authored_at,
        author="a",
    )
    assert decode(encode(minimal)) == minimal


def test_schema_ids_are_stable() -> None:
    ids = {type(e).__name__: struct.unpack(">I", encode(e)[1:5])[0] for e in all_samples()}
    assert ids["TriggerDefinition"] == 35  # v8; v1 (1), v2 (11), v3 (15), v5 (23), v6 (32), v7 (34)
    assert ids["DispatchOrder"] == 36  # v8 (Target.oidc); v6 (33) too
    assert ids["AuditEntry"] == 31  # v5; v1 (10) data still decodes
    assert ids["Quarantined"] == 9  # no enum: no v5
    assert len(set(ids.values())) == len(ids)


def test_naive_datetime_is_refused_on_encode() -> None:
    from dataclasses import replace

    naive = replace(definition(), authored_at=definition().authored_at.replace(tzinfo=None))
    with pytest.raises(ValueError, match="naive"):
        encode(naive)


GOOD = encode(definition())


@pytest.mark.parametrize(
    ("data", "cause"),
    [
        (b"", "framing"),
        (b"\x00\x00", "framing"),
        (b"\x01" + GOOD[1:], "framing"),
        (b"\x00\x00\x00\x03\xe7" + GOOD[5:], "schema-id"),
        (GOOD[:5] + b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", "avro"),
        (GOOD[:-3], "avro"),
        (GOOD + b"\x00", "avro"),
        (b'{"tenant": "acme"}', "framing"),
    ],
)
def test_bad_bytes_raise_only_decode_error(data: bytes, cause: str) -> None:
    with pytest.raises(DecodeError) as info:
        decode(data)
    assert info.value.cause == cause


def test_expected_type_mismatch() -> None:
    with pytest.raises(DecodeError) as info:
        decode(GOOD, ev.FireRecord)
    assert info.value.cause == "type"


def test_bad_enum_symbol_index() -> None:
    # the state enum (after tenant, trigger id, version) gets an out-of-range index
    d = definition()
    body = bytearray(GOOD)
    prefix = len(encode(d)) - len(encode(d)[5:])  # header
    idx = prefix + 1 + len(d.tenant) + 1 + len(d.trigger_id) + 1
    body[idx] = 0x7E  # zigzag 63
    with pytest.raises(DecodeError):
        decode(bytes(body))


def test_encode_refuses_a_non_event() -> None:
    with pytest.raises(TypeError):
        Codec().encode(ev.Signature("k", "v"))  # type: ignore[arg-type]


def test_warm_resolves_the_writer_schema_a_first_record_would_pay_for() -> None:
    codec = Codec()
    sid = codec.ids.writer_id(ev.DispatchOrder)
    assert sid not in codec._writers
    codec.warm([ev.DispatchOrder])
    assert codec._writers[sid][0] is ev.DispatchOrder
    order = next(s for s in all_samples() if isinstance(s, ev.DispatchOrder))
    assert codec.decode(codec.encode(order), ev.DispatchOrder) == order
