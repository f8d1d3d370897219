"""The autouse fixture that runs a test module on each event loop the dispatcher can send on."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
import uvloop

POLICIES = {"uvloop": uvloop.EventLoopPolicy, "asyncio": asyncio.DefaultEventLoopPolicy}


@pytest.fixture(autouse=True, params=sorted(POLICIES))
def on_each_loop(request: pytest.FixtureRequest) -> Iterator[str]:
    """The test runs once per loop: ``asyncio.run`` inside it makes a loop of this policy."""
    before = asyncio.get_event_loop_policy()
    asyncio.set_event_loop_policy(POLICIES[request.param]())
    try:
        yield str(request.param)
    finally:
        asyncio.set_event_loop_policy(before)
