"""The API publishes the identity tokens' keys without a token: the JWKS (public members only,
the keys the rotation has not retired) and the OpenID discovery document naming it; 404 when the
deployment mints no identity tokens. A webhook target with ``oidc`` round-trips; on an event
target the API refuses it naming ``target.oidc``."""

from __future__ import annotations

import warnings

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from horae.api.app import create_app
from horae.api.memory import MemoryBackend
from horae.outbound.oidc import MemoryOidcKeys
from horae.outbound.ssrf import AddressPolicy
from tests.unit.api.support import NOW, Clock, cron, make_api, resolve, settings

ISSUER = "https://api.horae.example"


def app_with(keys: MemoryOidcKeys | None, issuer: str | None = ISSUER) -> TestClient:
    backend = MemoryBackend()
    app = create_app(
        settings({"oidc_issuer": issuer} if issuer else None),
        backend,
        backend,
        addresses=AddressPolicy(resolver=resolve),
        oidc_keys=keys,
        clock=Clock(),
    )
    return TestClient(app, raise_server_exceptions=False)


def test_the_jwks_and_discovery_are_public() -> None:
    keys = MemoryOidcKeys()
    first = keys.rotate(NOW.timestamp() - 10_000, 0, 30)
    second = keys.rotate(NOW.timestamp() - 100, 60, 30)  # signs from now - 40
    client = app_with(keys)
    got = client.get("/.well-known/jwks.json")  # no Authorization header
    assert got.status_code == 200, got.text
    assert got.headers["cache-control"] == "public, max-age=300"
    listed = got.json()["keys"]
    assert [k["kid"] for k in listed] == [first.kid, second.kid]  # first: its tokens may live
    assert all(set(k) == {"kty", "crv", "x", "y", "kid", "alg", "use"} for k in listed)
    meta = client.get("/.well-known/openid-configuration").json()
    assert meta["issuer"] == ISSUER
    assert meta["jwks_uri"] == f"{ISSUER}/.well-known/jwks.json"
    assert meta["id_token_signing_alg_values_supported"] == ["ES256"]


def test_a_retired_key_leaves_the_jwks() -> None:
    keys = MemoryOidcKeys()
    keys.rotate(NOW.timestamp() - 10_000, 0, 30)
    second = keys.rotate(NOW.timestamp() - 1_000, 0, 30)  # the first retired 330 s after it
    listed = app_with(keys).get("/.well-known/jwks.json").json()["keys"]
    assert [k["kid"] for k in listed] == [second.kid]


def test_no_keys_or_no_issuer_answers_404() -> None:
    for client in (app_with(None), app_with(MemoryOidcKeys(), issuer=None)):
        for path in ("/.well-known/jwks.json", "/.well-known/openid-configuration"):
            got = client.get(path)
            assert got.status_code == 404 and "identity tokens" in got.json()["detail"]


def test_a_webhook_takes_oidc_and_an_event_target_is_refused() -> None:
    api = make_api()
    h = api.headers("acme", "author")
    body = cron()
    body["target"]["oidc"] = {"audience": "api://billing"}
    created = api.client.post("/v1/schedules", json=body, headers=h)
    assert created.status_code == 201, created.text
    shown = api.client.get("/v1/schedules/nightly", headers=h).json()
    assert shown["target"]["oidc"] == {"audience": "api://billing"}
    event = cron("ev", target={"kind": "event", "topic": "events.acme", "oidc": {}})
    refused = api.client.post("/v1/schedules", json=event, headers=h)
    assert refused.status_code == 422, refused.text
    error = refused.json()["errors"][0]
    assert error["field"] == "target.oidc" and "event target" in error["message"]
    both = cron("both")
    both["target"].update(oidc={}, headers={"Authorization": "Bearer mine"})
    refused = api.client.post("/v1/schedules", json=both, headers=h)
    assert refused.status_code == 422 and refused.json()["errors"][0]["field"] == "target.headers"
