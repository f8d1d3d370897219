"""The API takes ``policies.action_after_completion`` on a trigger that completes and refuses it
on one that never does, naming the field."""

from __future__ import annotations

from tests.unit.api.support import cron, make_api


def test_delete_after_completion_needs_a_bounded_trigger() -> None:
    api = make_api()
    h = api.headers("acme", "author")
    policies = {"action_after_completion": "delete"}
    unbounded = api.client.post("/v1/schedules", json=cron(policies=policies), headers=h)
    assert unbounded.status_code == 422, unbounded.text
    error = unbounded.json()["errors"][0]
    assert error["field"] == "policies.action_after_completion"
    assert "never completes" in error["message"]
    body = cron(policies=policies)
    body["recurrence"]["count"] = 3
    created = api.client.post("/v1/schedules", json=body, headers=h)
    assert created.status_code == 201, created.text
    got = api.client.get("/v1/schedules/nightly", headers=h).json()
    assert got["policies"]["action_after_completion"] == "delete"
    bad = api.client.post(
        "/v1/schedules", json=cron("x", policies={"action_after_completion": "later"}), headers=h
    )
    assert bad.status_code == 422 and "action_after_completion" in bad.json()["errors"][0]["field"]
