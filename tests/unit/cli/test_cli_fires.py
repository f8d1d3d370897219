"""``horae fires``: the tenant's fires searched through ``GET /v1/fires`` (window, state,
label), every page followed, as a table or the API's JSON."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta

import pytest

from tests.unit.api.support import NOW, Api, fire_row, make_api
from tests.unit.cli.test_cli_commands import connect, create, horae


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Iterator[Api]:
    yield connect(make_api(), monkeypatch)


def test_fires_searches_every_page(api: Api, capsys: pytest.CaptureFixture[str]) -> None:
    create(capsys)
    create(capsys, "hourly")
    day = NOW - timedelta(days=1)
    api.backend.fire_rows += [
        *(fire_row(f"n{i}", day + timedelta(minutes=i), status="failed") for i in range(150)),
        fire_row("ok", day, status="succeeded"),
        fire_row("h1", day + timedelta(hours=5), trigger_id="hourly", status="failed"),
        fire_row("g1", day, tenant="globex", status="failed"),
    ]
    code, out, err = horae(capsys, "fires", "--state", "failed")
    assert code == 0, err
    rows = [line.split() for line in out.splitlines()]
    assert rows[0] == ["SCHEDULED", "TRIGGER", "STATE", "LANE", "LATENESS_MS", "CAUSE", "FIRE_KEY"]
    assert len(rows) == 1 + 151 and rows[-1][1] == "hourly" and rows[-1][-1] == "h1"
    assert {r[2] for r in rows[1:]} == {"failed"}
    code, out, _ = horae(capsys, "fires", "--state", "failed,succeeded", "--limit", "2", "--json")
    assert [f["fire_key"] for f in json.loads(out)] == ["n0", "ok"]
    window = ["--from", "2026-05-31T16:00:00Z", "--to", "2026-06-01T00:00:00Z"]
    code, out, _ = horae(capsys, "fires", *window, "--json")
    assert [f["fire_key"] for f in json.loads(out)] == ["h1"]
    assert horae(capsys, "fires", "--label", "nocolon")[0] == 1
