from __future__ import annotations

import pytest

from tests.unit.planner.rig import Rig, make_rig


@pytest.fixture
def rig() -> Rig:
    return make_rig()
