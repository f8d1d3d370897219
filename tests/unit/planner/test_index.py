"""The due index contract (:class:`~horae.streams.planner.index.DueIndex`), on both
representations (``conftest.py`` runs every test with ``compact`` and ``objects``), and the two
compared operation by operation on random sequences."""

from __future__ import annotations

import gc
from dataclasses import replace
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from horae.contracts import events as ev
from horae.streams.planner.index import (
    CompactIndex,
    DueIndex,
    ObjectsIndex,
    SlotTable,
    TriggerEntry,
    make_index,
)
from horae.streams.planner.sharing import SharedValues
from tests.unit.planner.builders import definition

SHARED = SharedValues()
T0 = 1_800_000_000.0


def _entry(trigger_id: str, due: float | None, **fields: object) -> TriggerEntry:
    d = SHARED.index_copy(definition(trigger_id, "0 * * * *"))
    if fields:
        d = replace(d, **fields)  # type: ignore[arg-type]
    spec, schedule = SHARED.compiled(d)
    nxt = None if due is None else int(due)
    return TriggerEntry(
        definition=d, spec=spec, schedule=schedule, next_instant=nxt, due_ts=due,
        last_decided=int(T0),
    )  # fmt: skip


def _popped(index: DueIndex, until: float, limit: int = 1000) -> list[str]:
    return [key for key, _ in index.pop_due(until, limit)]


def test_put_get_len_remove() -> None:
    index = make_index(3)
    assert index.partition == 3 and len(index) == 0 and index.get("acme/a") is None
    a = _entry("a", T0 + 60)
    index.put("acme/a", a)
    index.put("acme/b", _entry("b", T0 + 30))
    assert len(index) == 2 and index.get("acme/a") is a
    index.remove("acme/a")
    index.remove("acme/nothing")
    assert len(index) == 1 and index.get("acme/a") is None
    assert index.earliest_due() == T0 + 30


def test_an_entry_got_is_the_same_object_until_settle_and_its_changes_are_kept() -> None:
    index = make_index(0)
    index.put("acme/a", _entry("a", T0 + 60))
    index.settle()
    got = index.get("acme/a")
    assert got is not None and index.get("acme/a") is got
    got.fired, got.paused_since = 7, T0 + 1.5
    got.applied = (ev.AppliedCommand("c1", datetime.fromtimestamp(T0 + 600, UTC)),)
    assert index.get("acme/a") is got
    index.settle()
    again = index.get("acme/a")
    assert again == got and again.fired == 7 and again.paused_since == T0 + 1.5


def test_settle_keeps_every_field_of_an_entry() -> None:
    index = make_index(0)
    labels = {"team": "ops"}
    authored = datetime(2026, 3, 4, 5, 6, 7, 891_011, tzinfo=UTC)
    odd = _entry("a", None, payload=b'{"x": 1}', description="d", labels=labels)
    odd.definition = replace(odd.definition, authored_at=authored, version=9)
    odd.next_instant, odd.last_decided = None, None
    stored = _entry("b", T0 + 60.25, state=ev.DefinitionState.PAUSED)
    renamed = _entry("c", T0 + 90)  # held under a key that is not its trigger key
    for key, entry in (("acme/a", odd), ("acme/b", stored), ("other/key", renamed)):
        index.put(key, entry)
    copies = {
        k: replace(e) for k, e in (("acme/a", odd), ("acme/b", stored), ("other/key", renamed))
    }
    index.settle()
    for key, entry in copies.items():
        assert index.get(key) == entry
        assert index.get(key).definition.authored_at == entry.definition.authored_at  # type: ignore[union-attr]


def test_earliest_due_and_pop_due_in_due_then_key_order_up_to_the_limit() -> None:
    index = make_index(0)
    for name, due in (("c", T0 + 5), ("a", T0 + 5), ("b", T0 + 1), ("d", T0 + 3600 * 30)):
        index.put(f"acme/{name}", _entry(name, due))
    index.settle()
    assert index.earliest_due() == T0 + 1
    assert _popped(index, T0 + 4) == ["acme/b"]
    assert index.earliest_due() == T0 + 5  # popped: unindexed until put again
    assert _popped(index, T0 + 10, limit=1) == ["acme/a"]
    assert _popped(index, T0 + 10) == ["acme/c"]
    assert _popped(index, T0 + 10) == []
    assert index.earliest_due() == T0 + 3600 * 30
    assert _popped(index, T0 + 3600 * 30) == ["acme/d"]
    assert index.earliest_due() is None


def test_a_popped_trigger_put_back_is_due_again() -> None:
    index = make_index(0)
    index.put("acme/a", _entry("a", T0 + 1))
    for _, entry in list(index.pop_due(T0 + 1, 10)):
        entry.due_ts = T0 + 61
        index.put("acme/a", entry)
    index.settle()
    assert index.earliest_due() == T0 + 61
    assert _popped(index, T0 + 61) == ["acme/a"]


def test_stale_due_times_are_dropped_lazily() -> None:
    index = make_index(0)
    index.put("acme/a", _entry("a", T0 + 10))
    index.put("acme/b", _entry("b", T0 + 20))
    got = index.get("acme/a")
    assert got is not None
    got.due_ts = T0 + 15  # changed without a put: due at no time
    assert index.earliest_due() == T0 + 20
    index.put("acme/a", got)
    index.settle()
    assert index.earliest_due() == T0 + 15
    index.remove("acme/a")
    assert index.earliest_due() == T0 + 20
    paused = index.get("acme/b")
    assert paused is not None
    paused.due_ts = None
    index.put("acme/b", paused)
    assert index.earliest_due() is None and _popped(index, T0 + 100) == []


def test_a_trigger_put_twice_at_one_time_is_popped_once() -> None:
    index = make_index(0)
    entry = _entry("a", T0 + 10)
    index.put("acme/a", entry)
    index.put("acme/a", entry)
    index.settle()
    index.put("acme/a", index.get("acme/a"))  # type: ignore[arg-type]
    assert _popped(index, T0 + 10) == ["acme/a"]


def test_a_freed_slot_reused_by_another_trigger_at_the_same_time_is_popped_once() -> None:
    index = make_index(0)
    index.put("acme/a", _entry("a", T0 + 10))
    index.settle()
    index.remove("acme/a")
    index.put("acme/b", _entry("b", T0 + 10))
    index.settle()
    assert len(index) == 1 and _popped(index, T0 + 10) == ["acme/b"]


def test_make_index_builds_the_chosen_representation(planner_index: str) -> None:
    expected = ObjectsIndex if planner_index == "objects" else CompactIndex
    assert type(make_index(0)) is expected


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.integers(0, 7), st.one_of(st.none(), st.integers(0, 400))),
        st.tuples(st.just("shift"), st.integers(0, 7), st.integers(0, 400)),
        st.tuples(st.just("remove"), st.integers(0, 7), st.just(0)),
        st.tuples(st.just("pop"), st.integers(0, 400), st.integers(1, 4)),
        st.tuples(st.just("settle"), st.just(0), st.just(0)),
        st.tuples(st.just("fired"), st.integers(0, 7), st.integers(0, 9)),
    ),
    max_size=60,
)


@pytest.mark.parametrize("far_s", [3600, 120])
@settings(max_examples=200, deadline=None)
@given(ops=OPS)
def test_both_representations_agree_operation_by_operation(
    ops: list[tuple[str, int, int | None]], far_s: int
) -> None:
    """Random puts (due times spread over several timing-wheel buckets, and with ``far_s`` 120
    over several far buckets split as they are reached), due times changed without a put,
    removals, pops with limits (popped triggers put back later, at the same time, not due, or
    not at all), settles: every answer is the same."""
    indexes = [CompactIndex(0, bucket_s=60, far_s=far_s), ObjectsIndex(0)]
    entries = [_entry(f"t{i}", None) for i in range(8)]
    for op, a, b in ops:
        answers = []
        for index in indexes:
            pops: list[tuple[str, float | None, int]] = []
            key = f"acme/t{a}"
            if op == "put":
                held = index.get(key) or replace(entries[a])
                held.due_ts = None if b is None else T0 + b * 1.5
                index.put(key, held)
            elif op in ("shift", "fired"):
                held = index.get(key)
                if held is not None and op == "shift":
                    held.due_ts = T0 + (b or 0) * 1.5
                elif held is not None:
                    held.fired = b or 0
            elif op == "remove":
                index.remove(key)
            elif op == "pop":
                popped = list(index.pop_due(T0 + a * 1.5, b or 1))
                pops = [(k, e.due_ts, e.fired) for k, e in popped]
                for k, e in popped if a % 3 else ():  # put back (the decider always does)
                    e.due_ts = None if e.fired % 2 else (e.due_ts or 0) + 90 * (a % 2)
                    index.put(k, e)
            else:
                index.settle()
            held = index.get(key)
            answers.append(
                (
                    pops,
                    len(index),
                    index.earliest_due(),
                    None if held is None else (held.due_ts, held.fired),
                )
            )
        assert answers[0] == answers[1], (op, a, b)


def test_many_triggers_removed_and_put_again_keep_their_keys_and_payloads() -> None:
    """Past a reserve and several growths of the compact index's slot table and columns, with
    removals (freed slots reused by other keys) and payloads replaced: every trigger held
    answers with its own entry, every one removed with none, and the due order is (due, key)."""
    index = make_index(0)
    n = 3000
    index.reserve(1000)  # a hint: more are put
    model: dict[str, TriggerEntry] = {}
    for i in range(n):
        key = f"acme/t{i}" if i % 7 else f"acme/tø{i}-" + "x" * (i % 50)  # lengths, UTF-8
        entry = _entry(
            key.split("/", 1)[1], T0 + (i * 37) % 500, payload=f"p{i}".encode() * (i % 3)
        )
        index.put(key, entry)
        model[key] = replace(entry)
        if i % 500 == 0:
            index.settle()
    index.settle()
    for i, key in enumerate(list(model)):
        if i % 3 == 0:
            index.remove(key)
            del model[key]
    index.settle()
    for i, key in enumerate(list(model)[::5]):  # new payloads, some longer, some empty
        held = index.get(key)
        assert held is not None
        held.definition = replace(held.definition, payload=b"new" * (i % 4), version=2)
        index.put(key, held)
        model[key] = replace(held)
    for i in range(n, n + 500):  # new keys take the freed slots
        key = f"acme/n{i}"
        model[key] = replace(entry := _entry(f"n{i}", T0 + i % 500, payload=b"%d" % i))
        index.put(key, entry)
    index.settle()
    assert len(index) == len(model)
    for key, entry in model.items():
        assert index.get(key) == entry, key
    for i in range(0, n, 3):
        assert index.get(f"acme/t{i}" if i % 7 else f"acme/tø{i}-" + "x" * (i % 50)) is None
    index.settle()
    popped = list(index.pop_due(T0 + 1000, 10 * n))
    expected = sorted((e.due_ts, k) for k, e in model.items() if e.due_ts is not None)
    assert [(e.due_ts, k) for k, e in popped] == expected


KEYS = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["take", "remove", "payload"]),
            st.integers(0, 11),
            st.integers(0, 40),  # payload kB
        ),
        min_size=20,
        max_size=200,
    ),
    st.lists(KEYS, min_size=11, max_size=11, unique=True).map(lambda k: [*k, "\udc80"]),
)
def test_slot_table_agrees_with_a_dict(ops: list[tuple[str, int, bytes]], keys: list[str]) -> None:
    """The compact index's :class:`SlotTable` (keys and payloads in one buffer, an
    open-addressing table of slots) under random takes, removes and payload changes, past its
    table's growths and rebuilds with removal marks and its buffer's compactions (payloads up to
    40 kB; one key with a lone surrogate): every key's slot, key and payload are what a dict
    of them says."""
    table = SlotTable()
    model: dict[str, tuple[int, bytes]] = {}
    freed: set[int] = set()
    for op, i, kb in ops:
        key, payload = keys[i], bytes([kb]) * (kb * 1000 + kb % 3)
        if op == "take":
            slot = table.take(key)
            if key in model:
                assert slot == model[key][0]
            else:
                assert slot not in {s for s, _ in model.values()}
                assert slot in freed or slot == table.size - 1  # a freed slot first
                assert not freed or slot in freed
                freed.discard(slot)
                model[key] = (slot, b"")
        elif op == "remove":
            slot = table.remove(key)
            assert slot == (model.pop(key)[0] if key in model else -1)
            if slot >= 0:
                freed.add(slot)
        elif op == "payload" and key in model:
            table.set_payload(model[key][0], payload)
            model[key] = (model[key][0], payload)
        assert len(table) == len(model)
        assert table.garbage * 2 <= len(table.blob) or table.garbage < 1 << 16
        for k in keys:
            slot, held = model.get(k, (-1, b""))
            assert table.find(k) == slot
            if slot >= 0:
                assert table.key(slot) == k and table.payload(slot) == held
    for slot in freed:
        assert table.key(slot) is None


def test_the_compact_indexes_of_a_planner_share_their_plans_until_dropped() -> None:
    """The parts of definitions (plans: recurrence and policies with their compiled schedule;
    rests) are interned once per planner (its SharedValues), used by every partition's compact
    index, and released when the slots using them are removed or their index is dropped."""
    shared = SharedValues()
    a, b = CompactIndex(0, shared), CompactIndex(1, shared)
    a.put("acme/a", _entry("a", T0 + 60))
    b.put("acme/b", _entry("b", T0 + 60))
    b.put("acme/c", _entry("c", T0 + 60, description="other rest"))
    a.settle()
    b.settle()
    plans, rests = a._plans, a._rests
    assert plans is b._plans and rests is b._rests and CompactIndex(2)._plans is not plans
    assert len(plans.ids) == 1 and list(plans.uses) == [3] and len(rests.ids) == 2
    assert b.get("acme/c") == _entry("c", T0 + 60, description="other rest")
    del a
    gc.collect()
    assert list(plans.uses) == [2] and len(rests.ids) == 2
    b.remove("acme/b")
    assert list(plans.uses) == [1] and len(rests.ids) == 1
    del b
    gc.collect()
    assert not plans.ids and not rests.ids
