"""The autouse fixture that runs a test module with each HTTP client the dispatcher can send with
(``HORAE_DISPATCHER_HTTP_CLIENT``): tests build their sender with :func:`new_sender`."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest

from horae.outbound import AddressPolicy, SenderConfig
from horae.streams.dispatcher.worker import Sender, make_sender

CLIENTS = ("aiohttp", "lean")
_current = ["lean"]


@pytest.fixture(autouse=True, params=CLIENTS)
def on_each_client(request: pytest.FixtureRequest) -> Iterator[str]:
    """The test runs once per client: :func:`new_sender` builds that client's sender."""
    _current[0] = str(request.param)
    try:
        yield _current[0]
    finally:
        _current[0] = "lean"


def new_sender(
    policy: AddressPolicy,
    config: SenderConfig | None = None,
    *,
    clock: Callable[[], float] = time.time,
) -> Sender:
    """A sender of the client the running test is parametrised with."""
    return make_sender(_current[0], policy, config or SenderConfig(), clock)
