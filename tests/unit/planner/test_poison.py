"""A record whose handling raises stops no one (in memory, on a virtual clock): it is retried
seconds apart a bounded number of times while the other partitions — and its own partition's
due instants — go on, then quarantined ``handler-error`` with its coordinates, and its
partition moves on; what its handling half did before raising is not kept."""

from __future__ import annotations

import zlib
from collections.abc import Callable

import pytest

from horae.contracts import events as ev
from horae.contracts.codec import encode
from horae.contracts.topics import Topic
from horae.ports import Emit, InputRecord
from horae.streams.planner.index import DueIndex, TriggerEntry
from horae.streams.planner.poison import CAUSE, PoisonRecords
from tests.unit.planner.builders import TENANT, command, definition
from tests.unit.planner.rig import Rig

PARTITIONS = 4  # the rig's


def on_partition(p: int, prefix: str) -> str:
    """A trigger id of the rig's tenant whose records the in-memory log puts on partition ``p``."""
    return next(
        f"{prefix}{n}"
        for n in range(1000)
        if zlib.crc32(f"{TENANT}/{prefix}{n}".encode()) % PARTITIONS == p
    )


POISON, NEIGHBOUR, ELSEWHERE = on_partition(1, "poison"), on_partition(1, "n"), on_partition(2, "e")

Apply = Callable[..., list[Emit]]


def raising(original: Apply, trigger_id: str, times: int | None = None) -> Apply:
    """``original`` (a decider's apply_definition), raising for ``trigger_id`` (``times``
    times, None: always) after it changed the index."""
    calls = {"n": 0}

    def apply(
        index: DueIndex,
        key: str,
        entry: TriggerEntry | None,
        d: ev.TriggerDefinition,
        now: float,
    ) -> list[Emit]:
        out = original(index, key, entry, d, now)
        if d.trigger_id == trigger_id and (times is None or calls["n"] < times):
            calls["n"] += 1
            raise RuntimeError(f"a bug deciding {trigger_id}")
        return out

    return apply


def fired(rig: Rig, trigger_id: str) -> list[ev.FireRecord]:
    return [f for f in rig.fires() if f.trigger_id == trigger_id]


def committed(rig: Rig, topic: Topic, partition: int) -> int:
    return rig.log.committed.get((rig.name(topic), partition), 0)


def failures(rig: Rig, kind: str) -> float:
    value = rig.planner.metrics.registry.get_sample_value(
        "horae_planner_record_failures_total", {"input": kind}
    )
    return value or 0.0


def test_a_record_whose_handling_always_raises_is_retried_then_quarantined(rig: Rig) -> None:
    decider = rig.planner.decider
    decider.apply_definition = raising(decider.apply_definition, POISON)  # type: ignore[method-assign]
    rig.put(definition(POISON))
    rig.put(definition(NEIGHBOUR))  # after it, on its partition
    rig.put(definition(ELSEWHERE))  # another partition

    rig.step()  # attempt 1 fails: its partition is held there, the other one goes on
    assert failures(rig, "definitions") == 1 and rig.quarantined() == []
    assert committed(rig, Topic.DEFINITIONS, 1) == 0, "held at the record"
    assert committed(rig, Topic.DEFINITIONS, 2) == 1
    accepted = {d.trigger_id for d in rig.read(Topic.ACCEPTED, ev.TriggerDefinition)}
    assert accepted == {ELSEWHERE}, "nothing the failed attempt produced is committed"
    rig.step(0.5)  # before the retry: nothing more tried
    assert failures(rig, "definitions") == 1

    rig.step(0.6)  # 1 s after: attempt 2 fails, attempt 3 comes 2 s later
    assert failures(rig, "definitions") == 2 and rig.quarantined() == []
    assert fired(rig, ELSEWHERE), "the other partition decides meanwhile"
    rig.step(1.5)
    assert failures(rig, "definitions") == 2
    rig.step(0.6)  # attempt 3 fails: given up
    assert failures(rig, "definitions") == 3
    (q,) = rig.read(Topic.QUARANTINE, ev.Quarantined)
    assert (q.cause, q.source_topic, q.source_partition, q.source_offset) == (
        CAUSE,
        rig.name(Topic.DEFINITIONS),
        1,
        0,
    )
    assert q.original_key == f"{TENANT}/{POISON}".encode()
    assert q.original == encode(definition(POISON))
    assert q.detail.startswith(f"handling raised 3 times: RuntimeError: a bug deciding {POISON}")
    registry = rig.planner.metrics.registry
    assert registry.get_sample_value("horae_planner_quarantined_records_total", {"cause": CAUSE})

    rig.step()  # the partition moves on: the record after it is applied
    assert committed(rig, Topic.DEFINITIONS, 1) == 2
    rig.step(1.0)
    assert fired(rig, NEIGHBOUR), "the trigger behind the poison record fires"
    assert not fired(rig, POISON), "what the failed handling did is not kept"
    rig.step(5.0)
    assert failures(rig, "definitions") == 3, "never tried again"
    accepted = {d.trigger_id for d in rig.read(Topic.ACCEPTED, ev.TriggerDefinition)}
    assert accepted == {ELSEWHERE, NEIGHBOUR}


def test_a_record_that_fails_once_is_applied_on_its_retry(rig: Rig) -> None:
    decider = rig.planner.decider
    decider.apply_definition = raising(decider.apply_definition, POISON, times=1)  # type: ignore[method-assign]
    rig.put(definition(NEIGHBOUR))
    rig.step()
    rig.put(definition(POISON))
    rig.step(1.0)
    assert failures(rig, "definitions") == 1
    rig.step(1.0)  # its retry
    rig.step(1.0)
    assert rig.quarantined() == []
    assert fired(rig, POISON), "applied on the retry"
    instants = [int(f.scheduled_at.timestamp()) for f in fired(rig, NEIGHBOUR)]
    assert instants == list(range(instants[0], instants[0] + len(instants)))
    assert len(instants) == 3, "its partition's due instants were decided while it was held"


def test_a_command_that_raises_after_changing_its_trigger_changes_nothing(rig: Rig) -> None:
    decider = rig.planner.decider
    original = decider.on_command_record

    def pause_then_raise(index: DueIndex, msg: InputRecord, now: float) -> list[Emit]:
        original(index, msg, now)  # the trigger is paused in the index, then:
        raise KeyError("a bug after the pause")

    decider.on_command_record = pause_then_raise  # type: ignore[method-assign]
    rig.put(definition(NEIGHBOUR))
    rig.step()
    rig.send(command(NEIGHBOUR, ev.CommandKind.PAUSE, rig.clock.now()))
    for _ in range(4):
        rig.step(1.0)
    assert rig.quarantined() == [CAUSE]
    assert failures(rig, "commands") == 3
    assert ev.ScheduleEventType.PAUSED not in rig.events()
    rig.step(1.0)
    instants = sorted(int(f.scheduled_at.timestamp()) for f in fired(rig, NEIGHBOUR))
    assert instants == list(range(instants[0], int(rig.clock.now()) + 1)), "never paused"


def test_held_records_release_and_retry_times() -> None:
    poison = PoisonRecords(attempts=3, backoff_s=2.0)
    tp = ("t.definitions", 0)
    assert poison.failed(tp, 5, 100.0) == 1
    assert poison.blocks(tp, 5, 101.9) and poison.blocks(tp, 6, 200.0)
    assert not poison.blocks(tp, 5, 102.0) and not poison.blocks(("t.commands", 0), 5, 0.0)
    assert poison.commit_offset(tp, 9) == 5 and poison.commit_offset(("x", 0), 9) == 9
    assert poison.next_retry() == 102.0
    assert not poison.rewind_due(101.0) and poison.rewind_due(102.0)
    assert not poison.rewind_due(102.0), "once per retry"
    assert poison.failed(tp, 5, 102.0) == 2 and poison.next_retry() == 106.0
    assert poison.failed(tp, 5, 106.0) is None, "the third failure gives up"
    assert poison.held == {} and poison.commit_offset(tp, 9) == 9
    poison.failed(tp, 7, 0.0)
    poison.succeeded(tp, 7)
    assert poison.held == {}
    poison.failed(tp, 7, 0.0)
    poison.forget({0})
    assert poison.held == {}


@pytest.mark.parametrize("exc", [RuntimeError("x"), ValueError("y"), AssertionError()])
def test_any_exception_of_the_decider_is_a_poison_record(rig: Rig, exc: Exception) -> None:
    def broken(*_: object) -> list[Emit]:
        raise exc

    rig.planner.decider.on_definition_record = broken  # type: ignore[method-assign]
    rig.put(definition(NEIGHBOUR))
    for _ in range(4):
        rig.step(2.0)
    assert rig.quarantined() == [CAUSE]
