"""bench/compare.py's pure parts and its receiver: the figures every run reports, the cells of
repeated runs, the tables, the goals, the last JSON line; each peer's settings are the ones
docs/performance.md names; the delivered count is the receiver's distinct keys for every system
(no broker, no database)."""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import re
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
from aiohttp import web

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
DOCS = ROOT / "docs" / "performance.md"


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def compare() -> ModuleType:
    return _load("bench_compare", BENCH / "compare.py")


@pytest.fixture(scope="module")
def receiver() -> ModuleType:
    return _load("bench_receiver", BENCH / "receiver.py")


def _args(**kw: Any) -> argparse.Namespace:
    base = {"scale": 1000, "rate": 100, "steady_seconds": 10, "held": 5000, "workloads": "a,b,c"}
    return argparse.Namespace(**{**base, **kw})


def _run(system: str, fires: float, p99: int, **kw: Any) -> dict[str, Any]:
    return {
        "system": system,
        "delivered": 1000,
        "received": 1000,
        "refused": 0,
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


FIRES = {
    "horae": 10_000.0,
    "apscheduler": 500.0,
    "dbscheduler": 6_000.0,
    "quartz": 100.0,
    "quartz_partitioned": 400.0,
}


def _runs(compare: ModuleType) -> list[dict[str, Any]]:
    """Three repeats of every (a) and (b) cell, one of (c), on both durabilities."""
    out: list[dict[str, Any]] = []
    for mode in ("nosync", "sync"):
        for k, spread in enumerate((0.9, 1.0, 1.2)):
            for system, f in FIRES.items():
                decided = {"decided_per_s": 50_000} if system == "horae" else {}
                out.append(
                    {
                        "kind": "run",
                        "workload": "a",
                        "mode": mode,
                        "repeat": k,
                        **_run(system, f * spread, 1000, **decided),
                    }
                )
                p99 = 200 if system == "horae" else 400
                out.append(
                    {
                        "kind": "run",
                        "workload": "b",
                        "mode": mode,
                        "repeat": k,
                        **_run(system, 150.0, p99),
                    }
                )
        for system in FIRES:
            rss = 300.0 if system == "horae" else 100.0
            out.append(
                {
                    "kind": "run",
                    "workload": "c",
                    "mode": mode,
                    "repeat": 0,
                    **_run(system, 50.0, 100, peak_rss_mb=rss, startup_s=1.5),
                }
            )
    out.append(
        {
            "kind": "run",
            "workload": "b",
            "mode": "sync",
            "repeat": 3,
            **_run("quartz", 5.0, 90_000, timeout=True, received=300),
        }
    )
    return out


def _cells(compare: ModuleType) -> dict[tuple[str, str, str], dict[str, Any]]:
    cells: dict[tuple[str, str, str], dict[str, Any]] = compare.cells(
        _runs(compare), compare.workloads(_args())
    )
    return cells


# --- each peer's settings are the ones the docs name ------------------------------------------
def _settings_text(settings: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in settings.items())


def test_every_peers_settings_are_the_ones_docs_performance_names(compare: ModuleType) -> None:
    """docs/performance.md's settings table has one row per peer, ``| <peer> | `k=v, ...` |``,
    with exactly the values bench/compare.py hands the peer."""
    docs = DOCS.read_text()
    for peer, settings in compare.PEER_SETTINGS.items():
        rows = re.findall(rf"^\| `{peer}` \| `([^`]*)` \|", docs, re.MULTILINE)
        assert rows == [_settings_text(settings)], peer
    sweep = compare.DBSCHEDULER_SWEEP
    grid = (
        f"threads {' / '.join(map(str, sweep['threads']))} × limits "
        + " / ".join(f"({lo}, {up})" for lo, up in sweep["limits"])
        + f" × pool threads+{' / threads+'.join(map(str, sweep['pool_extra']))}"
    )
    assert grid in docs


def test_every_setting_reaches_its_peer_by_name(compare: ModuleType) -> None:
    """Each setting is on the peer's command line and read by the peer under that name (none is
    a constant of the harness the docs would not see)."""
    db = compare.Database("postgresql://postgres@127.0.0.1:1/x", "sync")
    wl = compare.workloads(_args())[0]
    sources = {
        "apscheduler": (BENCH / "peers" / "apscheduler_peer.py").read_text(),
        "dbscheduler": (BENCH / "peers/src/main/java/horae/bench/DbSchedulerPeer.java").read_text(),
        "quartz": (BENCH / "peers/src/main/java/horae/bench/QuartzPeer.java").read_text(),
    }
    sources["quartz_partitioned"] = sources["quartz"]
    for peer, settings in compare.PEER_SETTINGS.items():
        cmd = compare.peer_command(peer, wl, db, "bench_x", 60, settings)
        for key, value in settings.items():
            assert f"{key}={value}" in cmd, (peer, key)
            assert f'"{key}"' in sources[peer], (peer, key)
    assert compare.peer_command("quartz_partitioned", wl, db, "b", 60, {})[5] == "quartz"


def test_the_sweep_holds_the_readme_advice_and_the_library_default(compare: ModuleType) -> None:
    cells = compare.sweep_cells()
    assert len(cells) == 18
    assert {(c["lower"], c["upper"]) for c in cells} == {(0.5, 1.0), (1.0, 4.0), (4.0, 20.0)}
    assert {c["pool"] - c["threads"] for c in cells} == {2, 10}
    assert compare.PEER_SETTINGS["dbscheduler"] in cells  # the default is a cell of the sweep


# --- the delivered count is the receiver's distinct keys --------------------------------------
def _call(receiver: ModuleType, system: str, key: str, due_ms: int) -> tuple[dict[str, str], bytes]:
    """A call as each system sends it: Horae's envelope (its fire key), a peer's ``due_ms``."""
    if system == "horae":
        due = datetime.fromtimestamp(due_ms / 1000, UTC).isoformat().replace("+00:00", "Z")
        body = json.dumps({"type": "schedule.triggered", "data": {"due_at": due}}).encode()
    else:
        body = json.dumps({"key": key, "due_ms": due_ms}).encode()
    msg_id = f"{system}:{key}"
    sig = receiver.sign(receiver.secret_key(), msg_id, 1_700_000_000, body)
    headers = {
        "Idempotency-Key": msg_id,
        "webhook-id": msg_id,
        "webhook-timestamp": "1700000000",
        "webhook-signature": sig,
    }
    return headers, body


def test_the_delivered_count_equals_the_receivers_distinct_keys_for_every_system(
    compare: ModuleType, receiver: ModuleType
) -> None:
    wl = compare.workloads(_args())[0]
    for system in compare.SYSTEMS:
        receipts = receiver.Receipts(receiver.secret_key())
        own = 0  # the system's own count of calls answered 2xx
        for i in range(50):
            headers, body = _call(receiver, system, f"t{i}", 1_700_000_000_000)
            own += receipts.take(headers, body, True) == 200
        headers, body = _call(receiver, system, "t3", 1_700_000_000_000)
        assert receipts.take(headers, body, True) == 200  # a retry: the same key again
        headers, body = _call(receiver, system, "t99", 1_700_000_000_000)
        forged = {**headers, "webhook-signature": "v1,AAAA"}
        assert receipts.take(forged, body, True) == 401  # not counted
        stats = receipts.stats()
        assert (stats["distinct"], stats["posts"], stats["refused"]) == (50, 51, 1)
        result = compare.with_receipts({"system": system, "delivered": own}, stats)
        assert compare.normalize(wl, result)["count_ok"] is False  # a forged call was seen
        assert compare.normalize(wl, {**result, "refused": 0})["count_ok"] is True
        wrong = compare.normalize(wl, {**result, "refused": 0, "delivered": own - 1})
        assert wrong["count_ok"] is False
        assert compare.status(wrong).startswith("MISMATCH")


def test_lateness_is_receipt_minus_due_shifted_by_a_virtual_clock(receiver: ModuleType) -> None:
    receipts = receiver.Receipts(receiver.secret_key())
    now_ms = int(datetime.now(UTC).timestamp() * 1000)
    for system, due in (("horae", now_ms + 3_600_000), ("dbscheduler", now_ms - 2000)):
        receipts.reset()
        headers, body = _call(receiver, system, "t0", due)
        receipts.take(headers, body, True)
        shift = 3_600_000 if system == "horae" else 0  # Horae's clock an hour ahead
        late = receipts.stats(shift_ms=shift)["p99_ms"]
        assert late == pytest.approx(0 if system == "horae" else 2000, abs=1500)


@pytest.fixture
def served(receiver: ModuleType) -> Iterator[tuple[int, Any]]:
    """bench/receiver.py's app on a free port in a thread; its state."""
    receipts = receiver.Receipts(receiver.secret_key())
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(receiver.app(receipts))
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = runner.addresses[0][1]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield port, receipts
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.run_until_complete(runner.cleanup())
        loop.close()


def test_the_receiver_counts_signed_calls_over_keep_alive_http(
    receiver: ModuleType, served: tuple[int, Any]
) -> None:
    port, receipts = served
    with httpx.Client(limits=httpx.Limits(max_connections=4)) as client:
        for i in range(20):
            headers, body = _call(receiver, "dbscheduler", f"t{i}", 1_700_000_000_000)
            client.post(f"http://127.0.0.1:{port}/hook", content=body, headers=headers)
        headers, body = _call(receiver, "dbscheduler", "w0", 1_700_000_000_000)
        assert client.post(f"http://127.0.0.1:{port}/warm", content=body, headers=headers)
        bad = client.post(f"http://127.0.0.1:{port}/hook", content=b"{}", headers={})
        assert bad.status_code == 401
        stats = client.get(f"http://127.0.0.1:{port}/stats").json()
        assert (stats["distinct"], stats["posts"], stats["refused"]) == (20, 20, 1)
        client.post(f"http://127.0.0.1:{port}/reset")
        assert client.get(f"http://127.0.0.1:{port}/stats").json()["distinct"] == 0
    assert receipts.posts == 0


# --- cells, tables, goals, the JSON line ------------------------------------------------------
def test_a_cell_is_the_median_of_its_repeats_with_min_and_max(compare: ModuleType) -> None:
    cell = _cells(compare)[("a", "dbscheduler", "sync")]
    assert cell["fires_per_s"] == 6_000.0
    assert (cell["fires_per_s_min"], cell["fires_per_s_max"]) == (5_400.0, 7_200.0)
    assert cell["repeats"] == 3
    capped = _cells(compare)[("b", "quartz", "sync")]
    assert capped["repeats"] == 4 and capped["failed_repeats"] == ["TIMEOUT (300/1,000)"]


def test_every_figure_of_every_system_is_in_the_json_line(compare: ModuleType) -> None:
    s = compare.summary(_cells(compare))
    for system in compare.SYSTEMS:
        for figure in compare.FIGURES:
            for part in ("", "steady_", "held_"):
                for mode in ("nosync", "sync"):
                    assert f"{system}_{part}{figure}_{mode}" in s
    assert s["ratio_apscheduler_sync"] == 20.0
    assert s["ratio_dbscheduler_nosync"] == pytest.approx(1.67)
    assert s["ratio_quartz_sync"] == 25.0  # against the better Quartz setup, named
    assert s["ratio_quartz_setup_sync"] == "quartz_partitioned"
    assert s["ratio_dbscheduler"] == s["ratio_dbscheduler_sync"]  # the headline: sync
    assert s["decided_ratio_dbscheduler_sync"] == pytest.approx(50_000 / 6_000, abs=0.01)
    json.dumps(s)


def test_a_steady_run_counts_at_most_its_rate(compare: ModuleType) -> None:
    s = compare.summary(_cells(compare))
    assert s["horae_steady_fires_per_s_sync"] == 100.0  # rate 100, 150 measured
    assert s["horae_fires_per_s_sync"] == 10_000.0  # (a): all at once, no cap


def test_goals_say_missed_and_a_capped_peer_counts_as_beaten(compare: ModuleType) -> None:
    lines = dict(compare.goals(_cells(compare)))
    assert lines["goal (a) sync: 20.0x apscheduler (>= 10x)"] is True
    assert lines["goal (a) sync: 1.67x dbscheduler (>= 2x)"] is False
    assert lines["goal (b) sync: p99 200 ms vs quartz 400 ms"] is True
    assert lines["goal (c) sync: peak RSS 300.0 vs best apscheduler 100.0 (3.0x, <= 2x)"] is False
    assert lines["goal (c) sync: start-up 1.5 vs best apscheduler 1.5 (1.0x, <= 2x)"] is True
    missed = [line for line, met in lines.items() if not met]
    assert len(missed) == 4  # db-scheduler on (a) and RSS on (c), both durabilities


def test_the_slow_peers_run_a_at_the_slow_scale_and_b_is_capped(compare: ModuleType) -> None:
    a, b, _ = compare.workloads(_args(scale=100_000))
    assert compare.scaled(a, "quartz", 20_000).n == 20_000
    assert compare.scaled(a, "dbscheduler", 20_000).n == 100_000
    assert compare.scaled(a, "apscheduler", 0).n == 100_000
    assert compare.scaled(b, "apscheduler", 20_000) is b
    assert compare.cap_of(b, 600) == 40 and compare.cap_of(a, 600) == 600
    args = _args(repeats=3, other_repeats=2)
    contest = [compare.repeats_of(a, s, "sync", args) for s in ("horae", "dbscheduler", "quartz")]
    assert contest == [3, 3, 2]
    assert compare.repeats_of(a, "horae", "nosync", args) == 2
    assert compare.repeats_of(b, "horae", "sync", args) == 2
    assert compare.rotated(["x", "y", "z"], 4) == ["y", "z", "x"]


def test_tables_have_a_row_per_cell_and_report_a_timeout(compare: ModuleType) -> None:
    wls = compare.workloads(_args())
    cells = _cells(compare)
    cells[("b", "quartz", "sync")] = compare.normalize(
        wls[1], _run("quartz", 5.0, 90_000, timeout=True, received=300)
    )
    rows = compare.table(cells, wls).splitlines()
    assert len(rows) == 2 + 3 * 2 * len(compare.SYSTEMS)
    capped = [r for r in rows if "| quartz " in r and "| sync" in r and "(b)" in r]
    assert len(capped) == 1 and "TIMEOUT (300/1,000)" in capped[0]
    assert all(r.count("|") == rows[0].count("|") for r in rows)
    decided = compare.decided_table(cells, wls).splitlines()
    assert "decided, not delivered" in decided[2] and "50,000" in decided[2]


def test_a_report_is_built_from_an_out_file(
    compare: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "runs.jsonl"
    runs = _runs(compare)
    best = {"kind": "sweep-best", "mode": "sync", "settings": {"threads": 10}, "sweep": []}
    out.write_text("\n".join(json.dumps(r) for r in [*runs, best]) + "\n")
    compare.report(
        [json.loads(line) for line in out.read_text().splitlines()],
        compare.workloads(_args()),
        str(tmp_path / "p.png"),
        {"calibration_loop_s": 0.2},
    )
    last = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert last["dbscheduler_best_sync"] == {"threads": 10}
    assert last["calibration_loop_s"] == 0.2
    assert last["settings"]["dbscheduler"] == compare.PEER_SETTINGS["dbscheduler"]


def test_the_replicated_row_is_horae_alone_raced_against_the_peers_sync_rows(
    compare: ModuleType,
) -> None:
    runs = _runs(compare)
    runs.append({"kind": "run", "workload": "a", "mode": "replicated", "repeat": 0,
                 **_run("horae", 3_000.0, 1000)})  # fmt: skip
    cells: dict[tuple[str, str, str], dict[str, Any]] = compare.cells(
        runs, compare.workloads(_args())
    )
    s = compare.summary(cells)
    assert s["ratio_dbscheduler_replicated"] == 0.5  # over db-scheduler's sync 6,000
    assert s["ratio_quartz_setup_replicated"] == "quartz_partitioned"
    lines = dict(compare.goals(cells))
    assert lines["goal (a) replicated: 0.5x dbscheduler (>= 2x)"] is False
    assert lines["goal (a) replicated: 7.5x quartz_partitioned (>= 2x)"] is True
    rows = compare.table(cells, compare.workloads(_args())).splitlines()
    cells_of = [[c.strip() for c in r.split("|")[2:4]] for r in rows if "replicated" in r]
    assert cells_of == [["horae", "replicated"]]
