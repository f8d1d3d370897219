from __future__ import annotations

from collections.abc import Iterator

import pytest

from horae.contracts.memo import INGEST_MEMO
from tests.unit.planner.rig import Rig, make_rig


@pytest.fixture(params=[True, False], ids=["memo-on", "memo-off"])
def rig(request: pytest.FixtureRequest) -> Iterator[Rig]:
    """A planner rig, with the ingest memos (:mod:`horae.contracts.memo`) on and off."""
    was = INGEST_MEMO.enabled
    INGEST_MEMO.enabled = request.param
    try:
        yield make_rig()
    finally:
        INGEST_MEMO.enabled = was
