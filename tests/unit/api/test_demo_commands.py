"""The commands ``horae demo`` prints next: the token verifies for the demo tenant, and the curl
body is a trigger the API accepts."""

from __future__ import annotations

import json
import shlex

from horae.api.auth import verify
from horae.cli.demo import TENANT, _api_env, next_commands
from horae.contracts.events import Role
from tests.unit.api.support import make_api, settings


def test_the_printed_commands_work() -> None:
    env = _api_env(settings())
    text = next_commands(settings(), env)
    lines = text.splitlines()
    assert lines[0].endswith("Next, in another terminal:") and len(lines) == 5
    exports = dict(kv.split("=", 1) for kv in shlex.split(lines[1])[1:])
    assert exports["HORAE_API_URL"] == "http://127.0.0.1:8089"
    keys = json.loads(env["HORAE_API_TOKEN_KEYS"])
    who = verify(exports["HORAE_API_TOKEN"], keys)
    assert who.tenant == TENANT and Role.AUTHOR in who.roles
    curl = shlex.split(lines[2])
    body = json.loads(curl[curl.index("-d") + 1])
    assert lines[3].strip() == ".venv/bin/horae history hello"
    assert "/v1/docs" in lines[4]
    api = make_api(shared={"min_interval_s": 1})
    created = api.client.post(
        "/v1/schedules",
        json={**body, "target": {"kind": "event", "topic": "events.acme"}},
        headers=api.headers(),
    )
    assert created.status_code == 201, created.text
