"""Interned reading (horae.contracts.binary_readers): equal encodings give the very same object
(the last one read recognised by its bytes), block-encoded maps and arrays are skipped right, and
malformed input raises instead of looping."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal

import pytest

from horae.contracts import events as ev
from horae.contracts.binary import compile_writers, long_bytes
from horae.contracts.binary_readers import compile_readers, intern_stats
from horae.contracts.codec import CurrentSchemas

CURRENT = CurrentSchemas.load()
READ_TARGET = compile_readers([ev.Target], ev.INTERNED)[ev.Target]
READ_DEFINITION = CURRENT.readers[ev.TriggerDefinition]


def _definition(i: int, expr: str = "0 0 * * *") -> ev.TriggerDefinition:
    return ev.TriggerDefinition(
        tenant="acme",
        trigger_id=f"t{i}",
        version=1,
        state=ev.DefinitionState.LIVE,
        recurrence=ev.Recurrence(kind=ev.RecurrenceKind.CRON, expr=expr, zone="Europe/Berlin"),
        target=ev.Target(
            kind=ev.TargetKind.WEBHOOK, url="https://hooks.example/x", headers={"a": "b"}
        ),
        authored_at=datetime(2026, 11, 29, tzinfo=UTC),
        author="ops",
    )


def _body(event: ev.TriggerDefinition) -> bytes:
    return CURRENT.bodies[type(event)](event)


def test_equal_value_objects_are_decoded_once_and_shared() -> None:
    one, _ = READ_DEFINITION(_body(_definition(1)), 0)
    two, _ = READ_DEFINITION(_body(_definition(2)), 0)
    other, _ = READ_DEFINITION(_body(_definition(3, "5 4 * * *")), 0)
    assert one.trigger_id != two.trigger_id
    for name in ("recurrence", "target", "policies", "quotas"):
        assert getattr(one, name) is getattr(two, name)
    assert other.recurrence is not one.recurrence
    assert other.recurrence.expr == "5 4 * * *"
    assert other.policies is one.policies


def test_the_last_record_read_is_recognised_by_its_bytes_at_any_offset() -> None:
    read = compile_readers([ev.TriggerDefinition], ev.INTERNED)[ev.TriggerDefinition]
    table = read.__globals__["_table_Target"]
    first, _ = read(_body(_definition(1)), 0)
    body = _body(_definition(2))
    second, end = read(b"padding" + body + b"more", 7)  # the same target bytes, elsewhere
    assert second.target is first.target and end == 7 + len(body)
    assert table.misses == 1 and second == _definition(2)
    with pytest.raises((ValueError, IndexError)):  # truncated: refused as before
        read(body[: len(body) // 2], 0)
    moved = _definition(3, "5 4 * * *")
    assert read(_body(moved), 0)[0] == moved


def _string(s: str) -> bytes:
    return long_bytes(len(s.encode())) + s.encode()


def test_a_map_written_in_sized_blocks_is_skipped_and_read_alike() -> None:
    target = ev.Target(
        kind=ev.TargetKind.WEBHOOK, url="https://blocks.example/", headers={"x": "1", "y": "2"}
    )
    head = b"\x00" + b"\x02" + _string("https://blocks.example/") + _string("POST")
    entries = _string("x") + _string("1") + _string("y") + _string("2")
    tail = b"\x00" + b"\x00" + long_bytes(10_000) + _string("envelope") + b"\x00"  # no topic,
    # no refs, no oidc
    plain = head + long_bytes(2) + entries + b"\x00" + tail
    # A writer may emit a block as (-count, byte size, entries): the skip jumps over it whole.
    blocked = head + long_bytes(-2) + long_bytes(len(entries)) + entries + b"\x00" + tail
    for body in (plain, blocked, plain + b"more"):
        read, end = READ_TARGET(body, 0)
        assert (read, end) == (target, len(plain if body is not blocked else blocked))


@pytest.mark.parametrize(
    "body",
    [
        b"\x00\x02" + long_bytes(-3) + b"abc",  # a negative string length
        b"\x00\x02" + long_bytes(40) + b"short",  # a length past the end
        b"\x00",  # the record stops after its first field
    ],
    ids=["negative-length", "past-the-end", "truncated"],
)
def test_malformed_interned_records_raise(body: bytes) -> None:
    with pytest.raises((ValueError, IndexError)):
        READ_TARGET(body, 0)


def test_the_intern_table_is_bounded_keeps_recent_encodings_and_counts() -> None:
    readers = compile_readers([ev.TriggerDefinition], ev.INTERNED)
    read = readers[ev.TriggerDefinition]
    table = read.__globals__["_table_Recurrence"]
    table.limit = 2
    bodies = [_body(_definition(i, f"{i} 0 * * *")) for i in range(4)]
    first, _ = read(bodies[0], 0)
    read(bodies[1], 0)
    again, _ = read(bodies[0], 0)  # young: the same object
    assert again.recurrence is first.recurrence
    read(bodies[2], 0)  # young was full: it turns old
    read(bodies[3], 0)
    assert read(bodies[0], 0)[0].recurrence is first.recurrence  # from the old generation
    stats = intern_stats(readers)["Recurrence"]  # that turn dropped bodies[1]'s
    assert (stats.misses, stats.size, stats.evictions) == (4, 3, 1)
    read(bodies[1], 0)  # decoded anew
    assert intern_stats(readers)["Recurrence"].misses == 5


@dataclass(frozen=True, slots=True)
class _Odd:
    name: str
    amount: Decimal


def test_a_type_the_readers_do_not_compile_is_left_out() -> None:
    readers = compile_readers([ev.Quotas, _Odd], ev.INTERNED)
    assert list(readers) == [ev.Quotas]


def test_a_schema_the_writers_do_not_compile_is_left_out() -> None:
    odd = {
        "type": "record",
        "name": "Odd",
        "namespace": "t",
        "fields": [{"name": "x", "type": ["null", "string", "long"]}],
    }
    name = "horae.events.TriggerDefinition"
    writers = compile_writers({"t.Odd": odd, name: CURRENT.raw[ev.TriggerDefinition]})
    assert list(writers) == [name]
    assert writers[name](_definition(1)) == _body(_definition(1))
