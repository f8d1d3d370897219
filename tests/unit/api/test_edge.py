"""The API's edge refuses what the stores cannot hold, answering 4xx problems (never a 500, never
a redirect), and writes no client line break into its log (issue 23's examples, sent as written)."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from horae.api.ports import BadValue
from tests.unit.api.support import cron, make_api

PROBLEM = "application/problem+json"
JSON = {"Content-Type": "application/json"}


def webhook(**target: Any) -> dict[str, Any]:
    base = {"kind": "webhook", "url": "https://hooks.acme.example/x", "secret_refs": ["acme-hook"]}
    return {**base, **target}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"description": "before\u0000after"}, "description"),
        ({"description": "\x1b[2J"}, "description"),
        ({"labels": {"team": "a\nb"}}, "labels.team"),
        ({"labels": {"a\x00": "b"}}, "labels"),
        ({"target": webhook(method="FOO BAR")}, "target.method"),
        ({"target": webhook(method="CONNECT")}, "target.method"),
        ({"target": webhook(method="post")}, "target.method"),
        ({"target": webhook(headers={"x-a\r\nInjected": "1"})}, "target.headers"),
        ({"target": webhook(headers={"x-a": "1\r\nInjected: 1"})}, "target.headers.x-a"),
        ({"target": webhook(url="https://hooks.acme.example/\x00")}, "target.url"),
        ({"content_type": "text/plain\r\nX: y"}, "content_type"),
        (
            {"recurrence": {"kind": "cron", "expr": "0 9 * * *\x00", "zone": "UTC"}},
            "recurrence.expr",
        ),
        ({"recurrence": {"kind": "cron", "expr": "0 9 * * *", "zone": "UTC\n"}}, "recurrence.zone"),
        ({"description": "x" * 4097}, "description"),
    ],
)
def test_a_text_field_the_stores_cannot_hold_is_a_422_naming_it(
    change: dict[str, Any], field: str
) -> None:
    api = make_api()
    r = api.client.post("/v1/schedules", json=cron(**change), headers=api.headers())
    assert r.status_code == 422, r.text
    assert r.headers["content-type"] == PROBLEM
    assert r.json()["errors"][0]["field"] == field, r.json()
    assert api.backend.definitions == []


def test_lone_surrogates_and_deep_nesting_are_422_at_every_depth() -> None:
    api = make_api()
    h = JSON | api.headers()
    text = json.dumps(cron(description="\ud800"))
    r = api.client.post("/v1/schedules", content=text, headers=h)
    assert r.status_code == 422 and r.json()["errors"][0]["field"] == "description", r.text
    for depth in (33, 500, 900, *range(950, 1000, 3), 1100, 10_000):
        nested = '{"a":' * depth + '"x"' + "}" * depth
        text = json.dumps(cron()).replace('"labels": {"team": "ops"}', f'"labels": {nested}')
        r = api.client.post("/v1/schedules", content=text, headers=h)
        assert r.status_code == 422, (depth, r.text)
        assert "nested deeper than 32 levels" in r.json()["detail"]
        r = api.client.post("/v1/dry-run", content=text, headers=h)
        assert r.status_code == 422, (depth, r.text)
    assert api.backend.definitions == []


def test_a_body_that_is_not_application_json_is_415() -> None:
    api = make_api()
    text = json.dumps(cron())
    for content_type in ("text/plain", "application/x-www-form-urlencoded", None):
        h = api.headers() | ({"Content-Type": content_type} if content_type else {})
        r = api.client.post("/v1/schedules", content=text, headers=h)
        assert r.status_code == 415 and r.headers["content-type"] == PROBLEM, r.text
    assert api.backend.definitions == []
    h = api.headers() | {"Content-Type": "Application/JSON; charset=utf-8"}
    assert api.client.post("/v1/schedules", content=text, headers=h).status_code == 201


def test_an_unknown_trailing_slash_is_a_404_problem_not_a_redirect() -> None:
    api = make_api()
    h = api.headers("acme", "author", "read") | {"Host": "evil.example"}
    for path in ("/v1/schedules/", "/v1/audit/", "/v1/schedules/nightly/history/"):
        r = api.client.get(path, headers=h, follow_redirects=False)
        assert r.status_code == 404 and r.headers["content-type"] == PROBLEM, (path, r.status_code)
        assert "location" not in r.headers
    r = api.client.post("/v1/schedules/", json=cron(), headers=h, follow_redirects=False)
    assert r.status_code == 404 and "location" not in r.headers
    assert api.backend.definitions == []


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/v1/schedules/a%00b", "trigger_id"),
        ("/v1/schedules/a%0A2026-01-01%2000:00:00,000%20ERROR%20api%20FORGED%00", "trigger_id"),
        ("/v1/schedules?label=team:o%00ps", "label"),
        ("/v1/schedules?cursor=%00", "cursor"),
        ("/v1/schedules/nightly/history?state=fired%00", "state"),
        ("/v1/schedules/nightly/history?cursor=a%0Ab", "cursor"),
        ("/v1/schedules/nightly/events?cursor=%1b", "cursor"),
        ("/v1/audit?cursor=%00", "cursor"),
        ("/v1/fires/acme%00fire", "fire_key"),
    ],
)
def test_a_control_character_in_a_path_or_query_is_a_422_naming_it(path: str, field: str) -> None:
    api = make_api()
    api.client.post("/v1/schedules", json=cron(), headers=api.headers())
    r = api.client.get(path, headers=api.headers("acme", "read"))
    assert r.status_code == 422 and r.headers["content-type"] == PROBLEM, r.text
    assert r.json()["errors"][0]["field"] == field
    assert "\x00" not in r.json()["instance"] and "\n" not in r.json()["instance"]


def test_a_control_character_in_a_verification_host_or_a_reason_is_a_422() -> None:
    api = make_api()
    h = api.headers("acme", "author")
    r = api.client.post("/v1/targets/verifications/hooks%00.acme.example/check", headers=h)
    assert r.status_code == 422 and r.json()["errors"][0]["field"] == "host"
    api.client.post("/v1/schedules", json=cron(), headers=h)
    window = {"from": "2026-05-28T00:00:00Z", "to": "2026-06-01T00:00:00Z"}
    policy = api.headers("acme", "policy")
    cost = api.client.post("/v1/schedules/nightly/backfill", json=window, headers=policy).json()
    body = window | {"confirm": cost["confirm"], "reason": "before\x00after"}
    r = api.client.post("/v1/schedules/nightly/backfill", json=body, headers=policy)
    assert r.status_code == 422 and r.json()["errors"][0]["field"] == "reason", r.text
    platform = api.headers("acme", "platform")
    body = {"suspended": True, "reason": "a\x00b"}
    r = api.client.put("/v1/admin/tenants/acme/suspension", json=body, headers=platform)
    assert r.status_code == 422 and r.json()["errors"][0]["field"] == "reason", r.text
    assert api.backend.commands == []


def test_a_value_the_store_refuses_is_a_422_never_a_500() -> None:
    api = make_api()
    api.client.post("/v1/schedules", json=cron("x"), headers=api.headers())

    def refuses(*args: object, **kwargs: object) -> None:
        raise BadValue("DataError: invalid input syntax for type timestamp with time zone")

    api.backend.fires = refuses  # type: ignore[method-assign]
    h = api.headers("acme", "read")
    r = api.client.get("/v1/schedules/x/history?cursor=WyJ4Il0", headers=h)
    assert r.status_code == 422 and r.json()["errors"][0]["field"] == "cursor"
    r = api.client.get("/v1/schedules/x/history", headers=h)
    assert r.status_code == 422 and r.headers["content-type"] == PROBLEM
    assert "timestamp" not in r.text  # the store's words stay in the API
    api.backend.trigger = refuses  # type: ignore[method-assign]
    assert api.client.get("/v1/schedules/x", headers=h).status_code == 422


def test_no_client_line_break_reaches_the_log(caplog: pytest.LogCaptureFixture) -> None:
    api = make_api()

    def boom(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the store said: a\n2026-01-01 00:00:00,000 ERROR api FORGED\x00")

    api.backend.fires = boom  # type: ignore[method-assign]
    api.client.post("/v1/schedules", json=cron("x"), headers=api.headers())
    forged = "/v1/schedules/x/history?state=%0A2026-01-01%2000:00:00,000%20ERROR%20api%20FORGED"
    with caplog.at_level(logging.ERROR, logger="horae.api"):
        r = api.client.get(forged.replace("%0A", "fired"), headers=api.headers("acme", "read"))
        assert r.status_code == 500 and "FORGED" not in r.text
        r = api.client.get(forged, headers=api.headers("acme", "read"))
        assert r.status_code == 422
    text = "\n".join(record.getMessage() for record in caplog.records)
    assert "unhandled error on GET /v1/schedules/x/history" in text
    for line in text.splitlines():
        assert not line.startswith("2026-01-01"), line
    assert "\x00" not in text
