"""bench/compare.py's pure parts: the figures every run reports, the table, the goals and the
last JSON line (no run, no broker, no database)."""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

PATH = Path(__file__).resolve().parents[2] / "bench" / "compare.py"


@pytest.fixture(scope="module")
def compare() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_compare", PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module
    spec.loader.exec_module(module)
    return module


def _args(**kw: Any) -> argparse.Namespace:
    base = {"scale": 1000, "rate": 100, "steady_seconds": 10, "held": 5000, "workloads": "a,b,c"}
    return argparse.Namespace(**{**base, **kw})


def _run(system: str, fires: float, p99: int, **kw: Any) -> dict[str, Any]:
    return {
        "system": system,
        "executed": 1000,
        "timeout": False,
        "fires_per_s": fires,
        "p50_ms": p99 // 2,
        "p99_ms": p99,
        "peak_rss_mb": 100.0,
        "cpu_s_per_1k": 0.5,
        "startup_s": 1.0,
        "quantiles_ms": [p99 * k // 100 for k in range(101)],
        **kw,
    }


def _results(compare: ModuleType) -> dict[tuple[str, str, str], dict[str, Any]]:
    a, b, _ = compare.workloads(_args())
    fires = {"horae": 10_000.0, "apscheduler": 500.0, "dbscheduler": 6_000.0, "quartz": 100.0}
    out = {}
    for mode in ("dev", "durable"):
        for system, f in fires.items():
            out[("a", system, mode)] = compare.normalize(a, _run(system, f, 1000))
            p99 = 200 if system == "horae" else 400
            delivered = {"delivery_p99_ms": 350} if system == "horae" else {}
            out[("b", system, mode)] = compare.normalize(b, _run(system, 150.0, p99, **delivered))
    out[("b", "quartz", "durable")] = compare.normalize(
        b, {**_run("quartz", 5.0, 90_000), "timeout": True, "executed": 300}
    )
    return out


def test_every_figure_of_every_system_is_in_the_json_line(compare: ModuleType) -> None:
    s = compare.summary(_results(compare))
    for system in compare.SYSTEMS:
        for figure in compare.FIGURES:
            for part in ("", "steady_"):
                assert f"{system}_{part}{figure}" in s
                assert f"{system}_{part}{figure}_durable" in s
    assert s["ratio_apscheduler"] == 20.0
    assert s["ratio_dbscheduler_dev"] == pytest.approx(1.7)
    assert s["quartz_steady_timeout_durable"] is True
    assert "quartz_steady_timeout" not in s
    json.dumps(s)


def test_delivery_is_the_peers_execution_and_horaes_receipt_where_measured(
    compare: ModuleType,
) -> None:
    results = _results(compare)
    s = compare.summary(results)
    assert s["dbscheduler_delivery_p99_ms"] == s["dbscheduler_p99_ms"] == 1000
    assert s["horae_delivery_p99_ms"] is None  # (a): decided, not delivered
    assert s["horae_steady_delivery_p99_ms_durable"] == 350  # its own figure, not its p99_ms
    assert s["horae_steady_p99_ms_durable"] == 200
    assert "(b) durable delivery p99: Horae 350 ms (POST received) vs apscheduler 400 ms" in (
        "\n".join(compare.goals(results))
    )


def test_a_steady_run_counts_at_most_its_rate(compare: ModuleType) -> None:
    s = compare.summary(_results(compare))
    assert s["horae_steady_fires_per_s"] == 100.0  # rate 100, 150 measured over a short span
    assert s["horae_fires_per_s"] == 10_000.0  # (a): all at once, no cap


def test_goals_say_missed_and_a_capped_peer_counts_as_beaten(compare: ModuleType) -> None:
    lines = compare.goals(_results(compare))
    assert "goal (a) durable: 20.0x apscheduler (>= 10x): met" in lines
    assert "goal (a) durable: 1.7x dbscheduler (>= 2x): MISSED" in lines
    assert any(ln.startswith("goal (b) durable") and "quartz" in ln and "met" in ln for ln in lines)
    assert sum("MISSED" in ln for ln in lines) == 2  # db-scheduler on (a), both databases


def test_table_has_a_row_per_run_and_reports_a_timeout(compare: ModuleType) -> None:
    wls = compare.workloads(_args(workloads="a,b"))
    rows = compare.table(_results(compare), wls).splitlines()
    assert len(rows) == 2 + 2 * 4 * 2
    capped = [r for r in rows if "quartz" in r and "durable" in r and "(b)" in r]
    assert len(capped) == 1 and "TIMEOUT (300/1,000 done)" in capped[0]
    assert all(r.count("|") == rows[0].count("|") for r in rows)


def test_a_report_keeps_the_last_result_of_each_run(compare: ModuleType, tmp_path: Path) -> None:
    out = tmp_path / "results.jsonl"
    first = {"workload": "a", "mode": "durable", **_run("horae", 5_000.0, 900)}
    again = {"workload": "a", "mode": "durable", **_run("horae", 8_000.0, 700)}
    out.write_text(json.dumps(first) + "\n" + json.dumps(again) + "\n")
    results = compare.load_results(str(out), compare.workloads(_args()))
    assert list(results) == [("a", "horae", "durable")]
    assert results[("a", "horae", "durable")]["fires_per_s"] == 8_000.0
