"""The API's history source on real read models (PostgreSQL of the dev stack): rows projected by
the projector's own store, read back through every read route, scoped to the token's tenant."""

from __future__ import annotations

import base64
import json
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
from horae.api.ports import BadValue
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


def cursor_of(*parts: str) -> str:
    return base64.urlsafe_b64encode(json.dumps(list(parts)).encode()).decode().rstrip("=")


def test_values_postgres_refuses_are_422(api: Api, database_url: str, schema: str) -> None:
    """Issue 23's values, sent against the real read models: a 4xx problem naming the value,
    never a 500; under the edge, the adapter answers BadValue, never the driver's DataError."""
    nul_key = cursor_of("2026-01-01T00:00:00+00:00", "k\x00")
    cases = [
        ("/v1/schedules/a%00b", "trigger_id"),
        ("/v1/schedules/a%0A2026-01-01%2000:00:00,000%20ERROR%20api%20FORGED%00", "trigger_id"),
        ("/v1/schedules?label=team:a%00", "label"),
        ("/v1/schedules/nightly/history?state=fired%00", "state"),
        ("/v1/schedules/nightly/history?cursor=%00", "cursor"),
        ("/v1/fires/a%00", "fire_key"),
        (f"/v1/schedules?cursor={cursor_of('a' + chr(0))}", "cursor"),
        (f"/v1/schedules/nightly/history?cursor={nul_key}", "cursor"),
        (f"/v1/schedules/nightly/events?cursor={nul_key}", "cursor"),
        (f"/v1/audit?cursor={nul_key}", "cursor"),
        (f"/v1/audit?cursor={cursor_of('not a time', 'k')}", "cursor"),
    ]
    for path, field in cases:
        r = api.client.get(path, headers=api.headers("acme", "read"))
        assert r.status_code == 422, (path, r.status_code, r.text)
        assert r.headers["content-type"] == "application/problem+json"
        assert r.json()["errors"][0]["field"] == field, (path, r.json())
    history = PostgresHistory(database_url, schema, max_size=1)
    try:
        with pytest.raises(BadValue):
            history.trigger("acme", "a\x00b")
        with pytest.raises(BadValue):
            history.triggers("acme", limit=1, cursor=None, label=("team", "a\x00"), state=None)
        with pytest.raises(BadValue):
            history.fire("acme", "a\x00")
        assert history.trigger("acme", "nightly") is not None  # the pool still serves
    finally:
        history.close()


def test_last_run_from_the_read_models(api: Api) -> None:
    """Issue 29 item 3: a GET, the list and the events page carry each trigger's latest fire
    scheduled before now (``queries/last_fires.sql``), of the token's tenant only."""
    one = get(api, "/v1/schedules/nightly")["last_run"]
    assert (
        one["fire_key"]
        == get(api, "/v1/schedules/nightly/history?limit=100")["items"][-1]["fire_key"]
    )
    assert one["scheduled_at"] == "2026-03-01T00:11:00Z" and one["state"] == "succeeded"
    assert one["lateness_ms"] == 1100.0 and one["attempts"] == 1
    listed = {t["trigger_id"]: t["last_run"] for t in get(api, "/v1/schedules")["items"]}
    assert listed == {"hourly": None, "nightly": one}
    assert get(api, "/v1/schedules/nightly/events?limit=1")["last_run"] == one
    theirs = get(api, "/v1/schedules/nightly", "globex")["last_run"]
    assert theirs["scheduled_at"] == "2026-03-01T00:00:00Z"
    assert theirs["fire_key"] != one["fire_key"]
