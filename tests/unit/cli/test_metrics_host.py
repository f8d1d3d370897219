"""Where a worker's ``/metrics`` listens: ``metrics_host`` of its section (loopback unless told),
from ``HORAE_<PROCESS>_METRICS_HOST`` or ``--metrics-host``; the image's probe asks it there."""

from __future__ import annotations

import importlib.util
import socket
import sys
import types
import urllib.request

import pytest
from prometheus_client import CollectorRegistry, Counter

from horae.cli.common import serve_metrics, settings_from_args
from horae.cli.main import build_parser
from horae.settings import Settings
from tests.paths import REPO_ROOT

WORKERS = ("planner", "dispatcher", "projector")


def test_loopback_by_default_for_every_worker() -> None:
    s = Settings()
    assert {getattr(s, w).metrics_host for w in WORKERS} == {"127.0.0.1"}


@pytest.mark.parametrize("worker", WORKERS)
def test_the_env_and_the_flag_set_it(worker: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(f"HORAE_{worker.upper()}_METRICS_HOST", "0.0.0.0")
    assert getattr(Settings(), worker).metrics_host == "0.0.0.0"
    args = build_parser().parse_args([worker, "--metrics-host", "::"])
    assert getattr(settings_from_args(args, Settings()), worker).metrics_host == "::"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_served_on_the_host_given() -> None:
    registry = CollectorRegistry()
    Counter("horae_probe_total", "a counter", registry=registry).inc()
    port = _free_port()
    serve_metrics(port, registry, "0.0.0.0")
    # a wildcard: reachable on loopback and listening beyond it
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()
    assert b"horae_probe_total 1.0" in body
    # the port is taken on every address, not on loopback only
    with socket.socket() as probe, pytest.raises(OSError):
        probe.bind(("0.0.0.0", port))


def _healthcheck() -> types.ModuleType:
    path = REPO_ROOT / "deploy" / "image" / "healthcheck.py"
    spec = importlib.util.spec_from_file_location("horae_image_healthcheck", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("host", "asked"),
    [(None, "127.0.0.1"), ("0.0.0.0", "127.0.0.1"), ("::", "[::1]"), ("10.1.2.3", "10.1.2.3")],
)
def test_the_image_probe_asks_where_it_listens(host: str | None, asked: str) -> None:
    assert _healthcheck()._reachable(host) == asked
