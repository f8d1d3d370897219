"""Bounded transactions: a peak is committed in transactions of about ``txn_max_decisions``
decisions (or ``txn_max_s`` of deciding) each — the first after one chunk, growing —, so the
ledger streams while the peak is decided; every instant is still decided exactly once, also
across a restart after the peak."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from horae.streams.planner.worker import DECIDE_CHUNK, TXN_GROWTH
from tests.unit.planner.builders import definition
from tests.unit.planner.rig import Rig

TRIGGERS = 1_200
MAX = 300


def test_a_peak_streams_in_bounded_transactions_and_is_decided_once(rig: Rig) -> None:
    rig.planner.config = replace(rig.planner.config, txn_max_decisions=MAX, txn_max_s=3600.0)
    for i in range(TRIGGERS):
        rig.put(definition(f"t{i}", "0 * * * * *"))
    rig.step()  # ingested (1,000 records an iteration) a minute before the instant they share
    rig.step()
    assert rig.fires() == []
    before = rig.log.commits
    rig.step(60.5)
    fires = rig.fires()
    assert len(fires) == TRIGGERS
    assert len({f.fire_key for f in fires}) == TRIGGERS
    # the chunks a transaction is checked between are DECIDE_CHUNK triggers each
    per_txn = -(-MAX // DECIDE_CHUNK) * DECIDE_CHUNK
    assert rig.log.commits - before >= TRIGGERS // per_txn
    rig.restart()
    rig.step(0.5)
    assert len(rig.fires()) == TRIGGERS  # the committed state holds every decision


def test_a_transaction_also_ends_when_it_has_been_filling_for_its_time(rig: Rig) -> None:
    rig.planner.config = replace(rig.planner.config, txn_max_decisions=10**9, txn_max_s=0.0)
    for i in range(1_000):
        rig.put(definition(f"t{i}", "0 * * * * *"))
    rig.step()
    before = rig.log.commits
    rig.step(60.5)
    assert len(rig.fires()) == 1_000
    assert rig.log.commits - before >= 1_000 // DECIDE_CHUNK  # one per chunk: none waits


def test_the_first_transaction_of_a_peak_holds_one_chunk_and_the_next_ones_grow(rig: Rig) -> None:
    cap = 8 * DECIDE_CHUNK
    rig.planner.config = replace(rig.planner.config, txn_max_decisions=cap, txn_max_s=3600.0)
    for i in range(4_000):
        rig.put(definition(f"t{i}", "0 * * * * *"))
    for _ in range(4):
        rig.step()
    committed: list[int] = []
    commit = rig.planner._commit

    def counted(*args: Any, **kwargs: Any) -> bool:
        ok = commit(*args, **kwargs)
        committed.append(len(rig.fires()))
        return ok

    rig.planner._commit = counted  # type: ignore[method-assign]
    rig.step(60.5)
    sizes = [b - a for a, b in zip([0, *committed], committed, strict=False)]
    assert sum(sizes) == 4_000
    assert sizes[0] == DECIDE_CHUNK  # visible one chunk after the instant
    assert sizes[1] == TXN_GROWTH * DECIDE_CHUNK
    assert sizes[1] < sizes[2] < sizes[3]  # (a partition's last chunk may be short)
    assert max(sizes) < cap + DECIDE_CHUNK  # never above the bound (checked between chunks)
    assert max(sizes) > cap // 2
