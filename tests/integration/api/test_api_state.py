"""The API's shared state (:mod:`horae.api.state`) on the dev stack's PostgreSQL: the in-memory
and the PostgreSQL adapters pass the same contract (:class:`RecentWrites`,
:class:`VerificationStore`), the schema migrates idempotently, and two API instances sharing it
behave as one API: a write answered by one is read back by the other, a stale ``If-Match`` is
refused by the other, a host verified through one is verified for the other."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from horae.api import state
from horae.api.app import create_app
from horae.api.memory import MemoryBackend, MemoryRecentWrites
from horae.api.ports import BadValue, RecentWrites, StoredTrigger
from horae.api.verification import (
    Challenge,
    MemoryVerifications,
    VerificationStore,
    expected_answer,
)
from horae.outbound.ssrf import AddressPolicy
from horae.projections.roles import DatabaseUrls
from horae.projections.synthetic import definition
from tests.unit.api.support import NOW, Api, Clock, cron, resolve, settings

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

LATER = NOW + timedelta(minutes=5)
URL = "https://new.acme.example:8443/hook"


@pytest.fixture
def urls(database_url: str) -> DatabaseUrls:
    return DatabaseUrls.resolve(database_url, None, None)


@pytest.fixture
def schema(database_url: str, unique: str, urls: DatabaseUrls) -> Iterator[str]:
    """A migrated state schema, the API role created and granted."""
    from horae.projections.roles import ensure_roles

    name = f"apistate_{unique}"
    with psycopg.connect(database_url, autocommit=True) as conn:
        with conn.transaction():
            ensure_roles(conn, urls.roles())
        state.migrate(conn, name, urls.roles().api)
    yield name
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


@pytest.fixture
def pg(urls: DatabaseUrls, schema: str) -> Iterator[state.PostgresState]:
    """The PostgreSQL adapter, connected as the API role."""
    adapter = state.PostgresState(urls.api, schema, max_size=2)
    yield adapter
    adapter.close()


@pytest.fixture(params=["memory", "postgres"])
def store(request: pytest.FixtureRequest) -> Any:
    if request.param == "memory":
        return MemoryRecentWrites()
    return request.getfixturevalue("pg")


@pytest.fixture(params=["memory", "postgres"])
def verifications(request: pytest.FixtureRequest) -> Any:
    if request.param == "memory":
        return MemoryVerifications()
    return request.getfixturevalue("pg")


def stored(trigger: str = "nightly", version: int = 1, tenant: str = "acme") -> StoredTrigger:
    d = definition(tenant, trigger, version)
    return StoredTrigger(d, d.authored_at, d.authored_at)


def test_a_confirmed_claim_is_read_back_until_it_expires(store: RecentWrites) -> None:
    assert store.claim(stored(version=1), NOW, LATER)
    assert store.recent("acme", ["nightly"], NOW) == {}  # not confirmed yet
    store.confirm("acme", "nightly", 1, LATER)
    got = store.recent("acme", ["nightly", "other"], NOW)
    assert list(got) == ["nightly"] and got["nightly"].definition == stored().definition
    assert got["nightly"].created_at == stored().created_at
    assert store.recent("globex", ["nightly"], NOW) == {}  # another tenant's
    assert store.recent("acme", ["nightly"], LATER) == {}  # expired


def test_a_version_is_claimed_once_and_higher_versions_win(store: RecentWrites) -> None:
    assert store.claim(stored(version=2), NOW, LATER)
    assert not store.claim(stored(version=2), NOW, LATER)  # another process got there first
    assert not store.claim(stored(version=1), NOW, LATER)
    store.confirm("acme", "nightly", 1, LATER)  # not the version held: nothing changes
    assert store.recent("acme", ["nightly"], NOW) == {}
    store.confirm("acme", "nightly", 2, LATER)
    assert store.claim(stored(version=3), NOW, LATER)
    assert store.recent("acme", ["nightly"], NOW) == {}  # 3 is claimed, 2 replaced
    store.confirm("acme", "nightly", 3, LATER)
    assert store.recent("acme", ["nightly"], NOW)["nightly"].definition.version == 3


def test_a_released_or_expired_claim_no_longer_blocks(store: RecentWrites) -> None:
    assert store.claim(stored(version=1), NOW, LATER)
    store.release("acme", "nightly", 2)  # not the version held
    assert not store.claim(stored(version=1), NOW, LATER)
    store.release("acme", "nightly", 1)
    assert store.claim(stored(version=1), NOW, LATER)
    assert store.claim(stored(version=1), LATER, LATER + timedelta(minutes=1))  # expired


def test_verifications_are_recorded_and_replaced(verifications: VerificationStore) -> None:
    assert verifications.challenge("acme", "h.example") is None
    assert verifications.verified_until("acme", "h.example") is None
    first = Challenge("acme", "h.example", "t1", "https://h.example/w/t1", LATER)
    verifications.put_challenge(first)
    verifications.put_challenge(Challenge("globex", "h.example", "g", "https://h/g", LATER))
    assert verifications.challenge("acme", "h.example") == first
    second = Challenge("acme", "h.example", "t2", "https://h.example/w/t2", LATER)
    verifications.put_challenge(second)
    assert verifications.challenge("acme", "h.example") == second
    verifications.verified("acme", "h.example", NOW)
    verifications.verified("acme", "h.example", LATER)
    assert verifications.verified_until("acme", "h.example") == LATER
    assert verifications.verified_until("globex", "h.example") is None


def test_migrate_is_idempotent(database_url: str, urls: DatabaseUrls, schema: str) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        assert state.pending(conn, schema) == []
        assert state.migrate(conn, schema, urls.roles().api) == []
        assert state.pending(conn, f"{schema}_missing") == state.migration_names()
        tables = {
            str(r[0])
            for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,)
            )
        }
    assert tables == {*state.STATE_TABLES, "schema_migrations"}


def two_apis(urls: DatabaseUrls, schema: str) -> tuple[Api, Api, list[state.PostgresState]]:
    """Two API instances, each with its own connection pool to the shared state and its own
    (lagging) projection that never catches up: only the shared state can answer."""
    clock = Clock()
    served: dict[str, tuple[int, bytes]] = {}

    async def fetch(url: str) -> tuple[int, bytes]:
        return served.get(url, (404, b""))

    apis, adapters = [], []
    for _ in range(2):
        shared = state.PostgresState(urls.api, schema, max_size=2)
        backend = MemoryBackend(auto_project=False)
        app = create_app(
            settings(), backend, backend, addresses=AddressPolicy(resolver=resolve),
            verifications=shared, writes=shared, fetch=fetch, clock=clock,
            monotonic=clock.monotonic,
        )  # fmt: skip
        adapters.append(shared)
        client = TestClient(app, raise_server_exceptions=False)
        apis.append(Api(client, backend, clock, served=served))
    return apis[0], apis[1], adapters


def test_a_write_answered_by_one_api_is_read_by_the_other(urls: DatabaseUrls, schema: str) -> None:
    one, two, adapters = two_apis(urls, schema)
    try:
        adapters[0].verified("acme", "hooks.acme.example", NOW + timedelta(days=1))
        h = one.headers()
        created = one.client.post("/v1/schedules", json=cron(), headers=h)
        assert created.status_code == 201, created.text
        assert two.backend.stored == {} and one.backend.stored == {}
        assert two.client.get("/v1/schedules/nightly", headers=h).json()["version"] == 1
        assert two.client.post("/v1/schedules", json=cron(), headers=h).status_code == 409
        amended = two.client.put(
            "/v1/schedules/nightly", json=cron(expr="0 8 * * *"), headers={**h, "If-Match": '"1"'}
        )
        assert amended.status_code == 200, amended.text
        read = one.client.get("/v1/schedules/nightly", headers=h).json()
        assert read["version"] == 2 and read["recurrence"]["expr"] == "0 8 * * *"
        stale = one.client.put(
            "/v1/schedules/nightly", json=cron(expr="0 7 * * *"), headers={**h, "If-Match": '"1"'}
        )
        assert stale.status_code == 412
        assert [d.version for d in one.backend.definitions + two.backend.definitions] == [1, 2]
        one.clock.advance(301)  # past read_your_writes_s: the (empty) projection alone answers
        assert two.client.get("/v1/schedules/nightly", headers=h).status_code == 404
    finally:
        for adapter in adapters:
            adapter.close()


def test_a_host_verified_through_one_api_is_verified_for_the_other(
    urls: DatabaseUrls, schema: str
) -> None:
    one, two, adapters = two_apis(urls, schema)
    target = {"kind": "webhook", "url": URL, "secret_refs": ["acme-hook"]}
    try:
        h = one.headers()
        refused = two.client.post("/v1/schedules", json=cron(target=target), headers=h)
        assert refused.status_code == 422 and "not verified" in refused.text
        made = one.client.post("/v1/targets/verifications", json={"url": URL}, headers=h)
        assert made.status_code == 201, made.text
        challenge = made.json()
        answer = expected_answer("whsec_a", "acme", challenge["host"], challenge["challenge"])
        one.served[challenge["well_known_url"]] = (200, answer.encode())
        check = f"/v1/targets/verifications/{challenge['host']}/check"
        assert two.client.post(check, headers=h).json()["state"] == "verified"
        created = one.client.post("/v1/schedules", json=cron(target=target), headers=h)
        assert created.status_code == 201, created.text
    finally:
        for adapter in adapters:
            adapter.close()


def test_a_value_postgres_cannot_hold_is_a_bad_value(pg: state.PostgresState) -> None:
    """A NUL in a verification host reaches the adapter only past the API's edge; even then it is
    BadValue (the API's 422), never psycopg's DataError (a 500), and the pool goes on serving."""
    with pytest.raises(BadValue):
        pg.challenge("acme", "hooks\x00.example")
    with pytest.raises(BadValue):
        pg.verified_until("acme", "hooks\x00.example")
    assert pg.verified_until("acme", "hooks.example") is None
