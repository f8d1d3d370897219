from __future__ import annotations

from collections.abc import Iterator

import pytest

from horae.contracts.memo import INGEST_MEMO
from horae.streams.planner.index import INDEX
from tests.unit.planner.rig import Rig, make_rig

SNAPSHOTS = "compact+snapshots"


@pytest.fixture(autouse=True, params=["compact", "objects", SNAPSHOTS])
def planner_index(request: pytest.FixtureRequest) -> Iterator[str]:
    """Every planner unit test runs on both due index representations
    (:mod:`horae.streams.planner.index`), and on the compact one with a snapshot after every
    change (:mod:`horae.streams.planner.snapshot`): a restart then loads the latest snapshot and
    replays what follows it."""
    was = INDEX.kind
    INDEX.kind = "objects" if request.param == "objects" else "compact"
    try:
        yield request.param
    finally:
        INDEX.kind = was


@pytest.fixture(params=[True, False], ids=["memo-on", "memo-off"])
def rig(request: pytest.FixtureRequest, planner_index: str) -> Iterator[Rig]:
    """A planner rig, with the ingest memos (:mod:`horae.contracts.memo`) on and off."""
    was = INGEST_MEMO.enabled
    INGEST_MEMO.enabled = request.param
    try:
        yield make_rig(snapshot_changes=1 if planner_index == SNAPSHOTS else 0)
    finally:
        INGEST_MEMO.enabled = was
