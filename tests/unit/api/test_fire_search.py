"""Issue 29 item 4: ``GET /v1/fires``, the tenant's fires searched by window, state and label:
the in-memory twin keeps the search's contract (:mod:`tests.unit.api.fire_search_contract`),
and the route answers the tenant's own fires, keyset-paged, as the OpenAPI document says."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from horae.api.memory import MemoryBackend
from horae.api.ports import StoredTrigger
from horae.projections.synthetic import definition
from tests.unit.api.fire_search_contract import FIRES, LABELS, FireSearchContract
from tests.unit.api.support import NOW, cron, fire_row, make_api


def seed(backend: MemoryBackend) -> MemoryBackend:
    for (tenant, trigger_id), labels in LABELS.items():
        d = replace(definition(tenant, trigger_id), labels=labels)
        backend.stored[(tenant, trigger_id)] = StoredTrigger(d, d.authored_at, d.authored_at)
    for i, f in enumerate(FIRES):
        key = f"{f.tenant}/{f.trigger_id}/{int(f.at.timestamp())}/{i}"
        backend.fire_rows.append(
            fire_row(key, f.at, f.tenant, f.trigger_id, f.status, attempt_count=0)
        )
    return backend


class TestMemorySearch(FireSearchContract):
    @pytest.fixture
    def searched(self) -> MemoryBackend:
        return seed(MemoryBackend())


def test_the_route_searches_the_tenants_own_fires() -> None:
    api = make_api()
    api.client.post("/v1/schedules", json=cron(), headers=api.headers("acme", "author"))
    api.client.post("/v1/schedules", json=cron("hourly", labels={"team": "web"}),
                    headers=api.headers("acme", "author"))  # fmt: skip
    day = NOW - timedelta(days=1)
    api.backend.fire_rows += [
        fire_row("k1", day, status="failed"),
        fire_row("k2", day + timedelta(hours=1)),
        fire_row("k3", day + timedelta(hours=2), trigger_id="hourly", status="failed"),
        fire_row("g1", day, tenant="globex", status="failed"),
    ]
    h = api.headers("acme", "read")
    page = api.client.get("/v1/fires?state=failed&limit=1", headers=h)
    assert page.status_code == 200, page.text
    body = page.json()
    assert [i["fire_key"] for i in body["items"]] == ["k1"] and body["next_cursor"]
    assert body["items"][0]["trigger_id"] == "nightly" and body["items"][0]["state"] == "failed"
    rest = api.client.get(f"/v1/fires?state=failed&cursor={body['next_cursor']}", headers=h)
    assert [i["fire_key"] for i in rest.json()["items"]] == ["k3"]
    assert rest.json()["next_cursor"] is None
    window = "from=2026-05-31T12:30:00Z&to=2026-05-31T14:00:00.001Z"
    assert [i["fire_key"] for i in api.client.get(f"/v1/fires?{window}", headers=h).json()[
        "items"]] == ["k2", "k3"]  # fmt: skip
    web = api.client.get("/v1/fires?label=team:web", headers=h).json()
    assert [i["fire_key"] for i in web["items"]] == ["k3"]
    theirs = api.client.get("/v1/fires", headers=api.headers("globex", "read")).json()
    assert [i["fire_key"] for i in theirs["items"]] == ["g1"]  # never acme's
    bad = api.client.get("/v1/fires?cursor=bogus", headers=h)
    assert bad.status_code == 422 and bad.json()["errors"][0]["field"] == "cursor"
    assert api.client.get("/v1/fires?since=2026-01-01T00:00:00Z", headers=h).status_code == 400
    assert api.client.get("/v1/fires?label=nocolon", headers=h).status_code == 422
    assert api.client.get("/v1/fires?limit=0", headers=h).status_code == 422


def test_the_openapi_document_describes_the_search() -> None:
    api = make_api()
    doc = api.client.get("/v1/openapi.json").json()
    op = doc["paths"]["/v1/fires"]["get"]
    assert {p["name"] for p in op["parameters"]} == {
        "from", "to", "state", "label", "cursor", "limit"
    }  # fmt: skip
    items = op["responses"]["200"]["content"]["application/json"]["schema"]["properties"]["items"]
    assert items["items"] == {"$ref": "#/components/schemas/FireItem"}
    assert "FireItem" in doc["components"]["schemas"]
