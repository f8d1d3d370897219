"""The API's history source on real read models (PostgreSQL of the dev stack): rows projected by
the projector's own store, read back through every read route, scoped to the token's tenant."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from horae.api.adapters import PostgresHistory
from horae.api.app import create_app
from horae.api.memory import MemoryBackend
from horae.contracts import events as ev
from horae.contracts.codec import default_codec
from horae.contracts.routing import Router
from horae.contracts.topics import topic_name
from horae.outbound.ssrf import AddressPolicy
from horae.ports import Emit
from horae.projections.rows import PROJECTED, Batch, RecordMapper
from horae.projections.store import ProjectionStore
from horae.projections.synthetic import (
    START,
    attempt,
    audit,
    definition,
    fire,
    outcome,
    schedule_event,
)
from tests.unit.api.support import Api, Clock, resolve, settings

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

PREFIX = "q."
ROUTER = Router(PREFIX)


def project(database_url: str, schema: str, outs: list[Emit]) -> None:
    mapper = RecordMapper(default_codec(), {topic_name(t, PREFIX): t for t in PROJECTED})
    batch, offsets = Batch(), dict[str, int]()
    for o in outs:
        offsets[o.topic] = offsets.get(o.topic, -1) + 1
        mapper.add(batch, o.topic, 0, offsets[o.topic], o.key, o.value, 0)
    store = ProjectionStore(database_url, schema)
    try:
        store.apply(batch, {s: topic_name(t, PREFIX) for t, (_, s) in PROJECTED.items()})
    finally:
        store.close()


@pytest.fixture
def schema(database_url: str, unique: str) -> Iterator[str]:
    name = f"api_{unique}"
    yield name
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


@pytest.fixture
def api(database_url: str, schema: str) -> Iterator[Api]:
    outs: list[Emit] = []
    for tenant in ("acme", "globex"):
        for trig in ("nightly", "hourly"):
            d = replace(definition(tenant, trig), labels={"team": trig})
            outs.append(ROUTER.emit(d, 0))
        outs.append(ROUTER.emit(replace(definition(tenant, "nightly", 2), payload=b"\x00hi"), 0))
        outs.append(ROUTER.emit(audit(tenant, 1), 0))
    for i in range(12):
        state = ev.FireState.EXPIRED if i % 4 == 0 else ev.FireState.FIRED
        f = fire("acme", "nightly", START + timedelta(minutes=i), state)
        outs.append(ROUTER.emit(f, 0))
        outs.append(ROUTER.emit(schedule_event(f, 1), 0))
        if state is ev.FireState.FIRED:
            a = attempt(f, 1, timedelta(milliseconds=100 * i))
            outs += [ROUTER.emit(a, 0), ROUTER.emit(outcome(f, [a]), 0)]
    outs.append(ROUTER.emit(fire("globex", "nightly", START), 0))
    project(database_url, schema, outs)
    history = PostgresHistory(database_url, schema, max_size=2)
    clock = Clock(now=START + timedelta(hours=1))
    backend = MemoryBackend()
    app = create_app(
        settings(), backend, history, addresses=AddressPolicy(resolver=resolve), clock=clock,
        monotonic=clock.monotonic,
    )  # fmt: skip
    try:
        yield Api(TestClient(app, raise_server_exceptions=False), backend, clock)
    finally:
        history.close()


def get(api: Api, path: str, tenant: str = "acme") -> Any:
    r = api.client.get(path, headers=api.headers(tenant, "read"))
    assert r.status_code == 200, r.text
    return r.json()


def test_triggers_from_the_read_models(api: Api) -> None:
    one = get(api, "/v1/schedules/nightly")
    assert one["version"] == 2 and one["tenant"] == "acme"
    assert one["payload"] == {"base64": "AGhp"} and one["recurrence"]["expr"] == "* * * * *"
    assert [i["trigger_id"] for i in get(api, "/v1/schedules")["items"]] == ["hourly", "nightly"]
    assert [i["trigger_id"] for i in get(api, "/v1/schedules?label=team:hourly")["items"]] == [
        "hourly"
    ]
    page = get(api, "/v1/schedules?limit=1")
    assert (
        get(api, f"/v1/schedules?limit=1&cursor={page['next_cursor']}")["items"][0]["trigger_id"]
        == "nightly"
    )
    r = api.client.get("/v1/schedules?cursor=bogus", headers=api.headers("acme", "read"))
    assert r.status_code == 422


def test_history_fire_lateness_events_audit(api: Api) -> None:
    window = "from=2026-03-01T00:00:00Z&to=2026-03-02T00:00:00Z"
    first = get(api, f"/v1/schedules/nightly/history?{window}&limit=5")
    rest = get(api, f"/v1/schedules/nightly/history?{window}&cursor={first['next_cursor']}")
    keys = [i["fire_key"] for i in first["items"] + rest["items"]]
    assert len(keys) == 12 == len(set(keys))
    item = first["items"][1]
    assert item["state"] == "succeeded" and item["tzdata_version"] and item["lateness_ms"] == 100.0
    assert (
        get(api, f"/v1/schedules/nightly/history?{window}&state=expired")["items"][0]["decision"]
        == "expired"
    )
    story = get(api, f"/v1/fires/{keys[1]}")
    assert story["attempts"][0]["n"] == 1 and story["outcome"]["state"] == "succeeded"
    r = api.client.get(f"/v1/fires/{keys[1]}", headers=api.headers("globex", "read"))
    assert r.status_code == 404
    late = get(api, f"/v1/schedules/nightly/lateness?{window}")
    assert late["fires"] == 9 and late["missed"] == 3 and late["max_ms"] == 1100.0
    tenant = get(api, f"/v1/lateness?{window}")
    assert tenant["summary"]["fires"] == 9 and [t["trigger_id"] for t in tenant["triggers"]] == [
        "nightly"
    ]
    events = get(api, "/v1/schedules/nightly/events?limit=10")
    assert len(events["items"]) == 10 and events["next_cursor"]
    more = get(api, f"/v1/schedules/nightly/events?cursor={events['next_cursor']}")
    assert len(more["items"]) == 2
    assert [a["audit_id"] for a in get(api, f"/v1/audit?{window}")["items"]] == ["acme-audit-1"]
    assert [a["audit_id"] for a in get(api, f"/v1/audit?{window}", "globex")["items"]] == [
        "globex-audit-1"
    ]
