"""Bounded transactions: a peak is committed in transactions of about ``txn_max_decisions``
decisions (or ``txn_max_s`` of deciding) each, so the ledger streams while the peak is decided;
every instant is still decided exactly once, also across a restart after the peak."""

from __future__ import annotations

from dataclasses import replace

from horae.streams.planner.worker import DECIDE_CHUNK
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
