"""Splitting a batch the store refuses (pure, over the in-memory store): the records it cannot
hold are set aside with their coordinates, every other record is applied exactly once, the
stored offsets only move forward and end at the batch's own."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from horae.contracts.codec import default_codec, encode
from horae.contracts.topics import Topic, topic_name
from horae.projections.isolate import STORE_CAUSE, SetAside, isolate, units
from horae.projections.rows import PROJECTED, Batch, RecordMapper, Stage
from horae.projections.store import ApplyResult
from horae.projections.synthetic import definition
from horae.testing import InMemoryStore

PREFIX = "u."
ACCEPTED = topic_name(Topic.ACCEPTED, PREFIX)
STAGE_TOPICS = {Stage.DEFINITIONS: ACCEPTED}


class Refused(ValueError):
    """What the fake store raises for a row holding a NUL byte."""


class NulRefusingStore(InMemoryStore):
    """The in-memory store, refusing (wholly, as a transaction) any batch with a NUL in text."""

    def __init__(self) -> None:
        super().__init__(STAGE_TOPICS)
        self.applies = 0
        self.offset_history: list[dict[tuple[str, int], int]] = []

    def apply(self, batch: Batch) -> ApplyResult:
        self.applies += 1
        for rows in batch.rows.values():
            for row in rows:
                if any(isinstance(v, str) and "\x00" in v for v in row):
                    raise Refused("invalid byte sequence for encoding UTF8: 0x00")
        result = super().apply(batch)
        self.offset_history.append(dict(self.offsets))
        return result


def batch_of(descriptions: list[tuple[int, str | None]]) -> Batch:
    """One definition per entry (its partition, its description), offsets per partition in
    order; a ``None`` description is a tombstone."""
    mapper = RecordMapper(default_codec(), {topic_name(t, PREFIX): t for t in PROJECTED})
    batch = Batch()
    next_offset: dict[int, int] = {}
    for n, (partition, description) in enumerate(descriptions):
        offset = next_offset.get(partition, 10)
        next_offset[partition] = offset + 1
        value = None
        if description is not None:
            d = replace(definition(f"tenant-{n}", f"t{n}"), description=description)
            value = encode(d)
        mapper.add(batch, ACCEPTED, partition, offset, f"k{n}".encode(), value, 1000 + n)
    return batch


def run(batch: Batch, store: NulRefusingStore) -> tuple[list[ApplyResult], list[SetAside]]:
    try:
        store.apply(batch)
    except Refused as exc:
        failure = exc
    else:
        pytest.fail("the whole batch was not refused")
    return isolate(
        batch,
        failure,
        store.apply,
        lambda e: isinstance(e, Refused),
        lambda stage, e: f"{stage.value}: {e}",
    )


def test_the_one_bad_record_is_set_aside_and_every_other_is_applied() -> None:
    entries = [(0, "a"), (1, "b"), (0, "before\x00after"), (1, "c"), (0, "d"), (0, None)]
    batch = batch_of(entries)
    store = NulRefusingStore()
    _, aside = run(batch, store)
    assert [(a.source.topic, a.source.partition, a.source.offset) for a in aside] == [
        (ACCEPTED, 0, 11)
    ]
    assert aside[0].source.key == b"k2" and aside[0].stage is Stage.DEFINITIONS
    kept = sorted(r[11] for r in store.rows[Stage.DEFINITIONS])
    assert kept == ["a", "b", "c", "d"]
    (error,) = store.rows[Stage.ERRORS]
    assert error[:4] == (ACCEPTED, 0, 11, STORE_CAUSE) and "0x00" in error[4]
    assert error[5] == b"k2" and error[6] is not None  # its key and value bytes are kept
    assert store.offsets == batch.next_offsets == {(ACCEPTED, 0): 14, (ACCEPTED, 1): 12}


def test_a_lone_bad_record_gets_the_detail_of_its_own_failure() -> None:
    batch = batch_of([(3, "x\x00")])
    store = NulRefusingStore()
    _, aside = run(batch, store)
    assert len(aside) == 1 and "0x00" in aside[0].detail
    assert store.offsets == {(ACCEPTED, 3): 11}


def test_a_fault_not_of_the_records_propagates() -> None:
    batch = batch_of([(0, "a"), (0, "b\x00")])
    store = NulRefusingStore()

    def apply(b: Batch) -> ApplyResult:
        raise ConnectionError("gone")

    with pytest.raises(ConnectionError):
        isolate(batch, Refused("x"), apply, lambda e: isinstance(e, Refused), str)
    assert store.offsets == {}


@given(
    st.lists(
        st.tuples(st.integers(0, 2), st.one_of(st.none(), st.sampled_from(["ok", "bad\x00"]))),
        min_size=1,
        max_size=40,
    )
)
def test_split_applies_every_good_record_once_and_offsets_only_move_forward(
    entries: list[tuple[int, str | None]],
) -> None:
    batch = batch_of(entries)
    store = NulRefusingStore()
    bad = sum(1 for _, d in entries if d is not None and "\x00" in d)
    good = sum(1 for _, d in entries if d is not None and "\x00" not in d)
    if bad == 0:
        store.apply(batch)
        return
    _, aside = run(batch, store)
    assert len(aside) == bad
    assert len(store.rows.get(Stage.DEFINITIONS, [])) == good
    assert store.offsets == batch.next_offsets
    for before, after in zip(store.offset_history, store.offset_history[1:], strict=False):
        assert all(after.get(tp, 0) >= o for tp, o in before.items())
    assert len(units(batch)) == good + bad
