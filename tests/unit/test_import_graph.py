"""The decision cores depend on ports and contracts only: importing one of them (with everything it
imports in turn) loads no Kafka client, no database driver, no HTTP client. So does the outbound
edge's package with its pure parts (its aiohttp sender is imported on first use), and so do the
in-memory twins of the ports (``horae.testing``). Each is imported in a fresh interpreter, so what
the test process already loaded does not hide an import."""

from __future__ import annotations

import subprocess
import sys

import pytest

IO_LIBRARIES = ("confluent_kafka", "psycopg", "aiohttp")
DECISION_CORES = (
    "horae.ports",
    "horae.contracts.routing",
    "horae.contracts.quarantine",
    "horae.streams.planner.decide",
    "horae.streams.planner.commands",
    "horae.streams.planner.records",
    "horae.streams.planner.index",
    "horae.streams.dispatcher.conclude",
    "horae.projections.rows",
    "horae.outbound",
    "horae.outbound.retry_decision",
    "horae.outbound.signing",
    "horae.testing",
)


def _loaded_io(module: str) -> list[str]:
    code = f"import sys, {module}; print(' '.join(m for m in {IO_LIBRARIES!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.split()


@pytest.mark.parametrize("module", DECISION_CORES)
def test_a_decision_core_imports_no_io_library(module: str) -> None:
    assert _loaded_io(module) == []


def test_the_check_sees_an_io_import() -> None:
    """The same check on an adapter finds its library (the test can fail)."""
    assert _loaded_io("horae.kafka.txn") == ["confluent_kafka"]
