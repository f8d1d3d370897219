"""The small bodies (horae.api.bodies): each refusal names its field with the sentence the API
always answered, a several-fault body is refused as before (first field first; a backfill's
window before its confirm token), and the OpenAPI components come from the same models."""

from __future__ import annotations

from typing import Any

import pytest

from horae.api import bodies
from horae.api.bodies import BackfillIn, HorizonIn, SuspensionIn, VerificationIn, WhatIfIn
from tests.unit.api.support import cron, make_api

WINDOW = {"from": "2026-05-28T00:00:00Z", "to": "2026-06-01T00:00:00Z"}


@pytest.mark.parametrize(
    ("model", "raw", "field", "message"),
    [
        (BackfillIn, [], "<body>", "expected a JSON object"),
        (BackfillIn, {}, "from", "expected an RFC 3339 instant"),
        (BackfillIn, {"from": "2026-05-28", "to": 5}, "to", "expected an RFC 3339 instant"),
        (BackfillIn, {"from": "9999-12-31T23:59:59-05:00", "to": "x"}, "from",
         "expected an RFC 3339 instant"),
        (WhatIfIn, "text", "<body>", "expected a JSON object"),
        (WhatIfIn, {"from": None, **cron()}, "from", "expected an RFC 3339 instant"),
        (HorizonIn, [], "horizon_s", "expected a non-negative integer (seconds)"),
        (HorizonIn, {"horizon_s": True}, "horizon_s", "expected a non-negative integer (seconds)"),
        (HorizonIn, {"horizon_s": 5.0}, "horizon_s", "expected a non-negative integer (seconds)"),
        (HorizonIn, {"horizon_s": -1}, "horizon_s", "expected a non-negative integer (seconds)"),
        (VerificationIn, None, "url", "expected the webhook URL"),
        (VerificationIn, {"url": 5}, "url", "expected the webhook URL"),
        (SuspensionIn, {"suspended": "yes"}, "suspended", "expected true or false"),
        (SuspensionIn, [True], "suspended", "expected true or false"),
    ],
)  # fmt: skip
def test_a_refusal_names_the_field(
    model: type[bodies.Body], raw: Any, field: str, message: str
) -> None:
    with pytest.raises(bodies.Refused) as refused:
        bodies.of(model, raw)
    assert (refused.value.field, refused.value.message) == (field, message)


def test_values_read_and_what_is_ignored() -> None:
    asked = bodies.of(BackfillIn, {**WINDOW, "reason": 7, "extra": 1})
    assert (asked.start, asked.end) == (1779926400, 1780272000)
    assert asked.confirm is None and asked.reason is None  # a reason not a string: none
    naive = {"from": "2026-05-28T00:00:00", "to": "2026-05-28T02:00:00+02:00"}
    naive_asked = bodies.of(BackfillIn, naive)
    assert naive_asked.start == naive_asked.end == 1779926400  # without an offset: UTC
    assert bodies.of(SuspensionIn, {"suspended": False, "reason": "drill"}).reason == "drill"
    assert bodies.of(HorizonIn, {"horizon_s": 0}).horizon_s == 0


def test_a_backfill_names_its_window_before_its_confirm_token() -> None:
    api = make_api()
    assert api.client.post("/v1/schedules", json=cron(), headers=api.headers()).status_code == 201
    for window, detail in [
        ({"from": "2026-05-28T00:00:00Z", "to": "2026-05-01T00:00:00Z"}, "to: must be after from"),
        ({"from": "2026-05-28T00:00:00Z", "to": "2027-05-01T00:00:00Z"},
         "to: a backfill covers the past only"),
        (WINDOW, "confirm: expected the token of the cost answer"),
    ]:  # fmt: skip
        answer = api.client.post(
            "/v1/schedules/nightly/backfill",
            json={**window, "confirm": 5},
            headers=api.headers("acme", "policy"),
        )
        assert (answer.status_code, answer.json()["detail"]) == (422, detail)


def test_the_components_are_the_models() -> None:
    schemas = bodies.schemas()
    assert set(schemas) == {m.__name__ for m in bodies.BODIES}
    what_if = schemas["WhatIfIn"]
    assert what_if["required"] == ["proposed", "from", "to"]
    assert what_if["properties"]["proposed"] == {"$ref": "#/components/schemas/TriggerIn"}
    assert schemas["BackfillIn"]["properties"]["from"] == {"type": "string", "format": "date-time"}
    doc = make_api().client.get("/v1/openapi.json").json()
    for name, schema in schemas.items():
        assert doc["components"]["schemas"][name] == schema
    body = doc["paths"]["/v1/schedules/{trigger_id}/horizon"]["post"]["requestBody"]
    schema = body["content"]["application/json"]["schema"]
    assert schema == {"$ref": "#/components/schemas/HorizonIn"}
