"""The API takes Quartz's L W # cron terms (the domain's parser) and refuses malformed ones."""

from __future__ import annotations

import pytest

from tests.unit.api.support import cron, make_api


def test_create_and_dry_run_take_l_w_and_hash() -> None:
    api = make_api()
    h = api.headers("acme", "author")
    made = [("last", "0 9 L * *"), ("payday", "0 9 LW * *"), ("mid", "0 9 15W * *")]
    for trigger_id, expr in made:
        created = api.client.post("/v1/schedules", json=cron(trigger_id, expr=expr), headers=h)
        assert created.status_code == 201, created.text
    # Europe/Berlin, from 2026-06-01: the last weekday of June is Tuesday the 30th, of July
    # Friday the 31st; the weekday nearest 15 August (a Saturday) is Friday the 14th.
    rows = api.client.get("/v1/schedules/payday/next?n=2", headers=h).json()
    assert [r["utc"] for r in rows] == ["2026-06-30T07:00:00Z", "2026-07-31T07:00:00Z"]
    rows = api.client.get("/v1/schedules/mid/next?n=3", headers=h).json()
    assert [r["local"][:10] for r in rows] == ["2026-06-15", "2026-07-15", "2026-08-14"]
    third_saturday = api.client.post(
        "/v1/dry-run?n=2", json=cron("sat", expr="0 9 * * 6#3"), headers=h
    ).json()
    assert [r["local"][:10] for r in third_saturday] == ["2026-06-20", "2026-07-18"]
    last_friday = api.client.post(
        "/v1/dry-run?n=1", json=cron("fri", expr="0 9 * * FRIL"), headers=h
    ).json()
    assert [r["local"][:10] for r in last_friday] == ["2026-06-26"]


@pytest.mark.parametrize(
    ("expr", "fragment"),
    [
        ("0 9 L-31 * *", "offset 31 out of range 0-30"),
        ("0 9 32W * *", "day 32 out of range 1-31"),
        ("0 9 1-L * *", "'L' is allowed only as a whole term"),
        ("0 9 * * 5#6", "occurrence 6 out of range 1-5"),
        ("0 9 * * L", "'L' alone is ambiguous"),
        ("0 9 * * 5W", "'W' is allowed only in day_of_month"),
        ("0 L * * *", "'L' is allowed only in day_of_month or day_of_week"),
        ("0 9 ? * *", "'?' is not supported"),
    ],
)
def test_malformed_terms_are_refused_naming_recurrence_expr(expr: str, fragment: str) -> None:
    api = make_api()
    h = api.headers("acme", "author")
    for path in ("/v1/schedules", "/v1/dry-run?n=1"):
        r = api.client.post(path, json=cron(expr=expr), headers=h)
        assert r.status_code == 422, r.text
        error = r.json()["errors"][0]
        assert error["field"].startswith("recurrence.expr"), error
        assert fragment in error["message"], error
    assert api.backend.definitions == []


def test_a_day_that_never_comes_is_refused() -> None:
    api = make_api()
    r = api.client.post("/v1/schedules", json=cron(expr="0 9 L-29 2 *"), headers=api.headers())
    assert r.status_code == 422
    assert r.json()["errors"][0]["field"] == "recurrence"
    assert "no instant" in r.json()["errors"][0]["message"]
