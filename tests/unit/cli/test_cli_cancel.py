"""``horae fires cancel FIRE_KEY``: the cancel through ``POST /v1/fires/{fire_key}/cancel``, its
answer as a line or the API's JSON; a fire with nothing left to cancel exits 1 with the API's
reason; ``horae fires`` without an action still searches."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta

import pytest

from horae.domain.keys import FireKey
from tests.unit.api.support import NOW, Api, fire_row, make_api
from tests.unit.cli.test_cli_commands import connect, create, horae

AT = NOW - timedelta(minutes=5)
KEY = FireKey("acme", "nightly", int(AT.timestamp())).canonical()
DONE = FireKey("acme", "nightly", int(AT.timestamp()) - 60).canonical()


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Iterator[Api]:
    yield connect(make_api(), monkeypatch)


def test_fires_cancel(api: Api, capsys: pytest.CaptureFixture[str]) -> None:
    create(capsys)
    api.backend.fire_rows += [
        fire_row(KEY, AT, status="dispatching", outcome=None),
        fire_row(DONE, AT, status="succeeded"),
    ]
    code, out, err = horae(capsys, "fires", "cancel", KEY)
    assert code == 0, err
    ((command, _),) = api.backend.commands
    assert command.cancel_fire_key == KEY
    assert out.strip() == f"cancel {KEY}: accepted (command {command.command_id})"
    code, out, err = horae(capsys, "fires", "cancel", DONE, "--json")
    assert code == 1 and out == "" and "already ended succeeded" in err
    assert len(api.backend.commands) == 1
    api.backend.fire_rows[-2]["outcome"] = "cancelled"
    code, out, _ = horae(capsys, "fires", "cancel", KEY, "--json")
    assert code == 0 and json.loads(out)["state"] == "cancelled"
    assert len(api.backend.commands) == 1, "nothing sent for a fire already cancelled"
    code, out, _ = horae(capsys, "fires", "--json")  # the search, as before
    assert code == 0 and {f["fire_key"] for f in json.loads(out)} == {KEY, DONE}
