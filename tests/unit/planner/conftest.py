from __future__ import annotations

from collections.abc import Iterator

import pytest

from horae.contracts.memo import INGEST_MEMO
from horae.streams.planner.index import INDEX, IndexKind
from tests.unit.planner.rig import Rig, make_rig


@pytest.fixture(autouse=True, params=["compact", "objects"])
def planner_index(request: pytest.FixtureRequest) -> Iterator[IndexKind]:
    """Every planner unit test runs on both due index representations
    (:mod:`horae.streams.planner.index`)."""
    was = INDEX.kind
    INDEX.kind = request.param
    try:
        yield request.param
    finally:
        INDEX.kind = was


@pytest.fixture(params=[True, False], ids=["memo-on", "memo-off"])
def rig(request: pytest.FixtureRequest) -> Iterator[Rig]:
    """A planner rig, with the ingest memos (:mod:`horae.contracts.memo`) on and off."""
    was = INGEST_MEMO.enabled
    INGEST_MEMO.enabled = request.param
    try:
        yield make_rig()
    finally:
        INGEST_MEMO.enabled = was
