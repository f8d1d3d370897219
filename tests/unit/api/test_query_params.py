"""A query parameter a route does not declare is refused (400 problem+json naming it), never
silently ignored: a misspelt filter would otherwise answer an unfiltered page."""

from __future__ import annotations

import pytest

from horae.api import problems
from tests.unit.api.support import cron, make_api


@pytest.mark.parametrize(
    ("path", "unknown"),
    [
        ("/v1/schedules?stat=paused", "stat"),
        ("/v1/schedules?limit=5&labels=team:x", "labels"),
        ("/v1/schedules/nightly?verbose=1", "verbose"),
        ("/v1/schedules/nightly/history?from=2026-01-01T00:00:00Z&since=x", "since"),
        ("/v1/schedules/nightly/next?count=3", "count"),
    ],
)
def test_an_unknown_query_parameter_is_a_400_naming_it(path: str, unknown: str) -> None:
    api = make_api()
    assert api.client.post("/v1/schedules", json=cron(), headers=api.headers()).status_code == 201
    r = api.client.get(path, headers=api.headers("acme", "read"))
    assert r.status_code == 400, r.text
    assert r.headers["content-type"].startswith(problems.MEDIA_TYPE)
    body = r.json()
    assert body["errors"][0]["field"] == unknown and body["detail"].startswith(f"{unknown}: ")


def test_declared_parameters_including_aliases_pass() -> None:
    api = make_api()
    assert api.client.post("/v1/schedules", json=cron(), headers=api.headers()).status_code == 201
    read = api.headers("acme", "read")
    assert api.client.get("/v1/schedules?limit=5&state=live", headers=read).status_code == 200
    window = "from=2026-06-01T00:00:00Z&to=2026-06-02T00:00:00Z&limit=3&state=fired"
    assert (
        api.client.get(f"/v1/schedules/nightly/history?{window}", headers=read).status_code == 200
    )
    r = api.client.post("/v1/schedules/nightly/pause?reason=x", headers=api.headers())
    assert r.status_code == 400 and r.json()["errors"][0]["field"] == "reason"
