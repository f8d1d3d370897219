"""The faster ``__init__`` of the event dataclasses (horae.contracts._fast_init) builds what the
dataclass-generated one builds: same parameters, defaults, fresh default factories, still frozen."""

from __future__ import annotations

import dataclasses
import inspect
from datetime import UTC, datetime

import pytest

from horae.contracts import events as ev
from horae.contracts._fast_init import event, fast_init

RECORD_TYPES = [v for v in vars(ev).values() if isinstance(v, type) and dataclasses.is_dataclass(v)]
NOW = datetime(2026, 11, 29, tzinfo=UTC)


@dataclasses.dataclass(frozen=True, slots=True)
class Reference:
    a: int
    b: str = "x"
    c: dict[str, str] = dataclasses.field(default_factory=dict)


Fast = fast_init(
    dataclasses.make_dataclass(
        "Fast",
        [("a", int), ("b", str, "x"), ("c", dict, dataclasses.field(default_factory=dict))],
        frozen=True,
        slots=True,
    )
)


@pytest.mark.parametrize("record_type", RECORD_TYPES, ids=lambda t: t.__name__)
def test_every_event_record_has_the_fast_init_with_the_dataclass_signature(
    record_type: type,
) -> None:
    init = record_type.__init__  # type: ignore[misc]
    assert init.__code__.co_filename.startswith("<fast_init")
    params = list(inspect.signature(init).parameters)
    assert params == ["self", *(f.name for f in dataclasses.fields(record_type))]


def test_fast_init_behaves_like_the_generated_one() -> None:
    for cls in (Reference, Fast):
        one, two = cls(1), cls(2, "y")
        assert (one.a, one.b, one.c, two.b) == (1, "x", {}, "y")
        assert one.c is not cls(3).c  # a fresh default per instance
        assert cls(a=1, c={"k": "v"}).c == {"k": "v"}
        with pytest.raises(dataclasses.FrozenInstanceError):
            one.a = 5
        with pytest.raises(TypeError):
            cls()
        with pytest.raises(TypeError):
            cls(1, nope=2)
    assert Fast(1, "y", {"k": "v"}) == Fast(1, "y", {"k": "v"})


def test_events_built_by_fast_init_compare_hash_and_replace_as_before() -> None:
    r = ev.Recurrence(kind=ev.RecurrenceKind.CRON, expr="0 0 * * *")
    assert r == ev.Recurrence(ev.RecurrenceKind.CRON, "0 0 * * *")
    assert hash(r) == hash(ev.Recurrence(kind=ev.RecurrenceKind.CRON, expr="0 0 * * *"))
    assert dataclasses.replace(r, zone="Asia/Tokyo").zone == "Asia/Tokyo"
    assert ev.Policies().retry == ev.RetryPolicy()
    state = ev.PlannerState("t", "a", 1, ev.DefinitionState.LIVE, NOW)
    assert (state.next_sequence, state.last_decided) == (0, None)


def test_unsupported_dataclasses_are_refused() -> None:
    @dataclasses.dataclass(frozen=True)
    class NoSlots:
        a: int

    with pytest.raises(TypeError, match="not a slot"):
        fast_init(NoSlots)


def test_event_goes_over_a_frozen_slotted_dataclass_only() -> None:
    @event
    @dataclasses.dataclass(frozen=True, slots=True)
    class Good:
        a: int
        b: tuple[str, ...] = ()

    assert Good.__init__.__code__.co_filename.startswith("<fast_init")
    assert Good(1) == Good(a=1, b=())

    for cls in (
        dataclasses.dataclass(slots=True)(type("Mutable", (), {"__annotations__": {"a": int}})),
        dataclasses.dataclass(frozen=True)(type("Unslotted", (), {"__annotations__": {"a": int}})),
        type("Plain", (), {}),
    ):
        with pytest.raises(TypeError, match="@event"):
            event(cls)
