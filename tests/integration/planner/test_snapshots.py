"""Snapshots of the compact due index against the real broker: a planner writes them to its
snapshot topic in its transactions, a new planner starts from them and the changelog after them,
and every instant is still decided once (:mod:`horae.streams.planner.snapshot`)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from horae.streams.planner.index import INDEX
from horae.streams.planner.snapshot import read_latest, snapshot_topic
from horae.streams.planner.worker import Planner
from tests.integration.planner.harness import (
    PARTITIONS,
    PlannerEnv,
    decided_since,
    definition,
    duplicates,
    ledger,
)
from tests.waiting import wait_until

IDS = [f"s{i}" for i in range(12)]


@pytest.fixture(autouse=True)
def compact_index() -> Iterator[None]:
    was = INDEX.kind
    INDEX.kind = "compact"
    try:
        yield
    finally:
        INDEX.kind = was


def _snapshots(planner: Planner) -> int:
    assert planner.snapshots is not None
    return planner.snapshots.written


def test_a_new_planner_starts_from_the_snapshots_and_decides_each_instant_once(
    planner_env: PlannerEnv,
) -> None:
    for trigger_id in IDS:
        planner_env.put(definition(trigger_id))  # every second
    first = planner_env.start_thread("a", snapshot_changes=1)
    wait_until(lambda: decided_since(planner_env, time.time(), IDS), 60, 0.2, "every trigger fires")
    wait_until(lambda: _snapshots(first) >= 2 * PARTITIONS, 60, 0.2, "snapshots written")
    planner_env.stop_threads()
    reader_topic = snapshot_topic(planner_env.prefix)
    assert first.reader is not None
    found = [read_latest(first.reader, reader_topic, p) for p in range(PARTITIONS)]
    assert all(f is not None for f in found), "a committed snapshot on every partition"

    second = planner_env.start_thread("b", snapshot_changes=1)
    restarted = time.time()
    wait_until(lambda: decided_since(planner_env, restarted + 2, IDS), 60, 0.2, "fires go on")
    planner_env.stop_threads()
    assert second.snapshots is not None
    assert second.snapshots.loaded == PARTITIONS, "every partition started from its snapshot"
    fires = ledger(planner_env)
    assert not duplicates(fires), "no instant decided twice across the restart"
    for trigger_id in IDS:
        instants = sorted(
            int(f.scheduled_at.timestamp()) for f in fires if f.trigger_id == trigger_id
        )
        assert len(instants) >= 4
