"""The dispatcher's HTTP client choice (``HORAE_DISPATCHER_HTTP_CLIENT``): the lean client by
default, aiohttp's when switched off; the worker builds its sender with :func:`make_sender`."""

from __future__ import annotations

import pytest

from horae.outbound import AddressPolicy, HttpSender, SenderConfig
from horae.outbound.lean_http import LeanHttpSender
from horae.settings import Settings
from horae.streams.dispatcher.config import DispatcherConfig
from horae.streams.dispatcher.worker import make_sender

POLICY = AddressPolicy()


def sender_of(config: DispatcherConfig) -> object:
    return make_sender(config.http_client, POLICY, config.sender, lambda: 0.0)


def test_lean_is_the_default_and_aiohttp_switches_it_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HORAE_DISPATCHER_HTTP_CLIENT", raising=False)
    assert Settings().dispatcher.http_client == "lean"
    config = DispatcherConfig.from_settings(Settings(), "b:9092")
    assert config.http_client == "lean"
    assert isinstance(sender_of(config), LeanHttpSender)
    monkeypatch.setenv("HORAE_DISPATCHER_HTTP_CLIENT", "aiohttp")
    config = DispatcherConfig.from_settings(Settings(), "b:9092")
    assert config.http_client == "aiohttp"
    assert isinstance(sender_of(config), HttpSender)


def test_an_unknown_client_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown HTTP client"):
        make_sender("curl", POLICY, SenderConfig(), lambda: 0.0)
