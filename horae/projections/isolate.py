"""A batch the store refuses: find the records it cannot hold, set them aside, project the rest.

Pure (no I/O of its own): :func:`isolate` is handed the store's ``apply`` (one transaction: rows
and offsets, see :mod:`.store`), a predicate saying whether a failure is the records' fault (a
value the database cannot hold, such as a NUL byte in text) rather than the database's (a lost
connection, a swapped schema), and a function describing that fault.

Contract, for a batch whose ``apply`` failed with a record fault:

- the batch is split in halves, each applied on its own, in the order it was read: a record's
  half commits before any later record of its partition (so the offsets stored only move
  forward, and no row is dropped as already applied); a half that fails is split again, down to
  one record;
- a single record that still fails is *set aside*: its ``projection_errors`` row (topic,
  partition, offset, cause ``store``, the described fault, its key and value bytes, its
  timestamp) is applied in place of its row, in one transaction with the offset after it;
- every other record of the batch is projected; a last ``apply`` of no rows stores the batch's
  own next offsets (records that stage no row, tombstones, come after the last row);
- a failure that is not a record fault propagates at once (whatever committed before it stays
  committed: the caller re-reads from the stored offsets).

The description must not depend on where the record sat in the batch (a rebuild splits other
batches and must set aside the same row), so it comes from the one-record ``apply``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from horae.projections.rows import Batch, Source, Stage, error_row
from horae.projections.rows import SetAside as SetAside

#: the cause of a record set aside because the store could not hold it
STORE_CAUSE = "store"

T = TypeVar("T")
Unit = tuple[Stage, int]  # a staged row: its stage and its index in ``Batch.rows[stage]``


def units(batch: Batch) -> list[Unit]:
    """Every staged row of ``batch``, in the order its records were read per partition."""
    found = [(stage, i) for stage, rows in batch.rows.items() for i in range(len(rows))]

    def position(unit: Unit) -> tuple[str, int, int]:
        s = batch.sources[unit[0]][unit[1]]
        return s.topic, s.partition, s.offset

    return sorted(found, key=position)


def subset(batch: Batch, chosen: list[Unit]) -> Batch:
    """The batch of the ``chosen`` rows alone, with next offsets just past them."""
    part = Batch()
    for stage, i in chosen:
        source = batch.sources[stage][i]
        part.add_row(stage, batch.rows[stage][i], source)
        tp = (source.topic, source.partition)
        part.next_offsets[tp] = max(part.next_offsets.get(tp, 0), source.offset + 1)
    part.records = len(chosen)
    return part


def set_aside_batch(source: Source, detail: str) -> Batch:
    """The batch that records ``source`` in ``projection_errors`` and moves past it."""
    part = Batch()
    part.add_row(Stage.ERRORS, error_row(source, STORE_CAUSE, detail), source)
    part.next_offsets[(source.topic, source.partition)] = source.offset + 1
    part.records = 1
    return part


def isolate(
    batch: Batch,
    failure: BaseException,
    apply: Callable[[Batch], T],
    is_record_fault: Callable[[BaseException], bool],
    describe: Callable[[Stage, BaseException], str],
) -> tuple[list[T], list[SetAside]]:
    """Apply ``batch``, whose ``apply`` as a whole failed with the record fault ``failure``,
    part by part (see the module docstring); returns the results of every ``apply`` made and
    the records set aside."""
    results: list[T] = []
    aside: list[SetAside] = []

    def attempt(chosen: list[Unit]) -> None:
        try:
            results.append(apply(subset(batch, chosen)))
        except Exception as exc:
            if not is_record_fault(exc):
                raise
            split(chosen, exc)

    def split(chosen: list[Unit], exc: BaseException) -> None:
        if len(chosen) == 1:
            stage, i = chosen[0]
            source = batch.sources[stage][i]
            detail = describe(stage, exc)
            results.append(apply(set_aside_batch(source, detail)))
            aside.append(SetAside(source, stage, detail))
            return
        middle = len(chosen) // 2
        attempt(chosen[:middle])
        attempt(chosen[middle:])

    every = units(batch)
    if every:
        split(every, failure)
    results.append(apply(Batch(next_offsets=dict(batch.next_offsets))))
    return results, aside
