"""`horae dr status | promote` through the real CLI, before any region was started: each says
what is wrong (no traceback) and exits 1; nothing is promoted. The drill
(tests/chaos/test_dr_drill.py) runs the regions, MirrorMaker 2 and a promotion for real."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

HORAE = [sys.executable, "-m", "horae.cli.main"]


def _horae(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HORAE_")}
    env["HORAE_STATE_DIR"] = str(state)
    return subprocess.run([*HORAE, *args], env=env, capture_output=True, text=True, timeout=120)


def test_status_and_promote_of_regions_not_started(tmp_path: Path) -> None:
    state = tmp_path / "state"
    st = _horae(state, "dr", "status")
    assert st.returncode == 1, st.stderr
    assert "writes: region a" in st.stdout
    assert "region a: writer, DOES NOT ANSWER" in st.stdout
    assert "region b: standby, DOES NOT ANSWER" in st.stdout
    assert "lag: unknown" in st.stdout
    refused = _horae(state, "dr", "promote", "--to", "b", "--declare-lost")
    assert refused.returncode == 1
    assert "region b does not answer; start it (`horae dr up`) first" in refused.stderr
    assert "Traceback" not in refused.stderr
    already = _horae(state, "dr", "promote", "--to", "a")
    assert already.returncode == 1 and "region a writes already" in already.stderr
    assert not (state / "dr" / "state.json").exists()
    assert json.loads((state / "dr" / "a" / "ports.json").read_text())["kafka"] > 0


def test_metrics_of_regions_not_started(tmp_path: Path) -> None:
    """`horae dr metrics` exports a region that does not answer as a figure (exit 0): the
    regions down, the lag not measurable (and absent), the standby's lateness unknown."""
    m = _horae(tmp_path / "state", "dr", "metrics")
    assert m.returncode == 0, m.stderr
    assert 'horae_dr_region_up{region="a",role="writer"} 0.0' in m.stdout
    assert 'horae_dr_region_up{region="b",role="standby"} 0.0' in m.stdout
    assert "horae_dr_replication_lag_known 0.0" in m.stdout
    assert "horae_dr_replication_lag_records{" not in m.stdout
    assert "horae_dr_standby_would_be_late_by_seconds " not in m.stdout
    assert 'horae_dr_writer{region="a"} 1.0' in m.stdout


def test_reset_standby_of_regions_not_started(tmp_path: Path) -> None:
    """`horae dr reset-standby` (fail-back's wipe) refuses, with the cause, when the standby does
    not answer; nothing is recorded."""
    state = tmp_path / "state"
    r = _horae(state, "dr", "reset-standby")
    assert r.returncode == 1
    assert "region b does not answer; start it (`horae dr up`) first" in r.stderr
    assert "Traceback" not in r.stderr
    assert not (state / "dr" / "state.json").exists()
