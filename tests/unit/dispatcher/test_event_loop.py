"""The dispatcher's loop choice (``HORAE_DISPATCHER_EVENT_LOOP``): uvloop by default, asyncio's
own when switched off; the worker builds its loop from :func:`loop_factory`."""

from __future__ import annotations

import asyncio

import pytest
import uvloop

from horae.settings import Settings
from horae.streams.dispatcher.config import DispatcherConfig
from horae.streams.dispatcher.worker import loop_factory


def test_uvloop_is_the_default_and_asyncio_switches_it_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("HORAE_DISPATCHER_EVENT_LOOP", raising=False)
    assert Settings().dispatcher.event_loop == "uvloop"
    assert DispatcherConfig.from_settings(Settings(), "b:9092").event_loop == "uvloop"
    monkeypatch.setenv("HORAE_DISPATCHER_EVENT_LOOP", "asyncio")
    assert DispatcherConfig.from_settings(Settings(), "b:9092").event_loop == "asyncio"


@pytest.mark.parametrize(("name", "kind"), [("uvloop", uvloop.Loop), ("asyncio", None)])
def test_the_factory_makes_the_named_loop(name: str, kind: type | None) -> None:
    loop = loop_factory(name)()
    try:
        if kind is None:
            assert not isinstance(loop, uvloop.Loop)
            assert isinstance(loop, asyncio.BaseEventLoop)
        else:
            assert isinstance(loop, kind)
    finally:
        loop.close()
