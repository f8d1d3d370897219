"""The API takes ``policies.retry.max_event_age_s`` / ``max_retry_duration_s`` (the definition's
fields, in its OpenAPI document) and refuses what would be out of range or without effect."""

from __future__ import annotations

import pytest

from tests.unit.api.support import cron, make_api


def test_bounded_age_fields_are_stored_and_documented() -> None:
    api = make_api()
    h = api.headers("acme", "author")
    body = cron(policies={"retry": {"max_event_age_s": 300, "max_retry_duration_s": 3600}})
    created = api.client.post("/v1/schedules", json=body, headers=h)
    assert created.status_code == 201, created.text
    got = api.client.get("/v1/schedules/nightly", headers=h).json()
    assert got["policies"]["retry"]["max_event_age_s"] == 300
    assert got["policies"]["retry"]["max_retry_duration_s"] == 3600
    schemas = api.client.get("/v1/openapi.json").json()["components"]["schemas"]
    text = str(schemas)
    assert "max_event_age_s" in text and "max_retry_duration_s" in text


@pytest.mark.parametrize(
    ("retry", "target", "field"),
    [
        ({"max_event_age_s": 0}, None, "policies.retry.max_event_age_s"),
        ({"max_retry_duration_s": 604_801}, None, "policies.retry.max_retry_duration_s"),
        (
            {"max_retry_duration_s": 60},
            {"kind": "event", "topic": "events.acme.jobs"},
            "policies.retry.max_retry_duration_s",
        ),
    ],
)
def test_out_of_range_or_without_effect_is_refused(
    retry: dict[str, int], target: dict[str, str] | None, field: str
) -> None:
    api = make_api()
    body = cron(policies={"retry": retry}, **({"target": target} if target else {}))
    r = api.client.post("/v1/schedules", json=body, headers=api.headers("acme", "author"))
    assert r.status_code == 422, r.text
    assert r.json()["errors"][0]["field"] == field, r.json()
