"""The cross-tenant and role matrix over every route: another tenant's ids answer 404 (never
403), a role that does not suffice 403, and nothing is produced by a refused request."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi import APIRouter, FastAPI
from fastapi.routing import iter_route_contexts

from tests.unit.api.support import NOW, Api, cron, make_api
from tests.unit.api.test_dead_letters import dead_rows, order

WINDOW = {"from": "2026-05-28T00:00:00Z", "to": "2026-06-01T00:00:00Z"}
WHAT_IF = {"proposed": cron(expr="0 7 * * *"), **WINDOW}

#: (method, path, body, role needed) of every tenant route naming acme's trigger "nightly"
SCOPED: list[tuple[str, str, Any, str]] = [
    ("GET", "/v1/schedules/nightly", None, "read"),
    ("PUT", "/v1/schedules/nightly", cron(expr="0 8 * * *"), "author"),
    ("DELETE", "/v1/schedules/nightly", None, "author"),
    ("POST", "/v1/schedules/nightly/pause", None, "author"),
    ("POST", "/v1/schedules/nightly/resume", None, "author"),
    ("POST", "/v1/schedules/nightly/run", None, "author"),
    ("GET", "/v1/schedules/nightly/next?n=2", None, "read"),
    ("POST", "/v1/schedules/nightly/what-if", WHAT_IF, "read"),
    ("GET", "/v1/schedules/nightly/history", None, "read"),
    ("GET", "/v1/schedules/nightly/lateness", None, "read"),
    ("GET", "/v1/schedules/nightly/events", None, "read"),
    ("POST", "/v1/schedules/nightly/backfill", WINDOW, "policy"),
    ("POST", "/v1/schedules/nightly/horizon", {"horizon_s": 90_000}, "policy"),
    ("GET", "/v1/fires/acme-fire", None, "read"),
    ("POST", "/v1/schedules/nightly/cancel?fire_key=acme-fire", None, "author"),
    ("GET", "/v1/dead-letters/1-10", None, "read"),
    ("POST", "/v1/redrives", {"ids": ["1-10"], "dry_run": True}, "author"),
    ("POST", "/v1/targets/verifications/hooks.acme.example/check", None, "author"),
]
#: routes of the token's own tenant (no id to steal)
UNSCOPED: list[tuple[str, str, Any, str]] = [
    ("POST", "/v1/schedules", cron("fresh"), "author"),
    ("POST", "/v1/targets/verifications", {"url": "https://hooks.acme.example/x"}, "author"),
    ("GET", "/v1/schedules", None, "read"),
    ("POST", "/v1/dry-run", cron("dry"), "read"),
    ("GET", "/v1/lateness", None, "read"),
    ("GET", "/v1/fires?state=failed", None, "read"),
    ("GET", "/v1/audit", None, "read"),
    ("GET", "/v1/dead-letters", None, "read"),
    ("POST", "/v1/groups/pause", {"selector": "team=ops", "dry_run": True}, "author"),
    ("GET", "/v1/admin/tenants", None, "platform"),
    ("PUT", "/v1/admin/tenants/acme/suspension", {"suspended": True}, "platform"),
]
WEAKER = {
    "read": ["author", "policy", "platform"],
    "author": ["read", "policy", "platform"],
    "policy": ["read", "author", "platform"],
    "platform": ["read", "author", "policy"],
}
SATISFIED = {"read": ["read", "author", "policy"], "author": ["author"], "policy": ["policy"],
             "platform": ["platform"]}  # fmt: skip


def seeded() -> Api:
    api = make_api()
    r = api.client.post("/v1/schedules", json=cron(), headers=api.headers("acme", "author"))
    assert r.status_code == 201
    api.backend.fire_rows.append(
        {
            "fire_key": "acme-fire",
            "tenant": "acme",
            "trigger_id": "nightly",
            "state": "fired",
            "scheduled_at": NOW,
            "due_at": NOW,
            "lateness_ms": 5.0,
        }
    )
    made = api.client.post(
        "/v1/targets/verifications",
        json={"url": "https://hooks.acme.example/x"},
        headers=api.headers("acme", "author"),
    )
    assert made.status_code == 201
    api.backend.dead_letter_rows += dead_rows([(order("acme", "nightly", 1), 10, "exhausted")])
    return api


def call(api: Api, method: str, path: str, body: Any, tenant: str, *roles: str) -> int:
    headers = api.headers(tenant, *roles)
    if method == "PUT" and "schedules" in path:
        headers["If-Match"] = '"1"'
    return api.client.request(method, path, json=body, headers=headers).status_code


@pytest.mark.parametrize(("method", "path", "body", "role"), SCOPED)
def test_another_tenants_trigger_is_not_found(method: str, path: str, body: Any, role: str) -> None:
    api = seeded()
    produced = (len(api.backend.definitions), len(api.backend.commands))
    for roles in (("read",), ("author", "read", "policy")):
        status = call(api, method, path, body, "globex", *roles)
        assert status == 404 or (status == 403 and role not in roles), (roles, status)
    assert call(api, method, path, body, "globex", *SATISFIED[role]) == 404
    assert (len(api.backend.definitions), len(api.backend.commands)) == produced


@pytest.mark.parametrize(("method", "path", "body", "role"), SCOPED + UNSCOPED)
def test_roles(method: str, path: str, body: Any, role: str) -> None:
    api = seeded()
    produced = (len(api.backend.definitions), len(api.backend.commands))
    for weaker in WEAKER[role]:
        if weaker in SATISFIED[role]:
            continue
        assert call(api, method, path, body, "acme", weaker) == 403, weaker
    assert (len(api.backend.definitions), len(api.backend.commands)) == produced
    status = call(api, method, path, body, "acme", *SATISFIED[role][:1])
    assert 200 <= status < 300, status


#: the app's own routes no token scopes (service, the identity tokens' JWKS and discovery,
#: OpenAPI document and docs; FastAPI serves the docs' OAuth2 redirect page at its default path)
UNTOKENED = {"/healthz", "/readyz", "/metrics", "/v1/openapi.json", "/v1/docs",
             "/docs/oauth2-redirect", "/.well-known/jwks.json",
             "/.well-known/openid-configuration"}  # fmt: skip
#: the console's routes: a session, not a bearer token (tests/unit/console/test_console.py)
CONSOLE = "/console"


def served(app: FastAPI) -> set[tuple[str, str]]:
    """(method, path) of every route ``app`` serves with a token, found from its router through
    every router it includes (however deep), whatever kind of route it is."""
    out = set()
    for route in iter_route_contexts(app.router.routes):
        path = route.path
        if path is None or path in UNTOKENED or path.startswith(CONSOLE):
            continue
        assert route.methods, f"{path}: a route the matrix cannot list (a mount?)"
        out |= {(method, path) for method in route.methods}
    return out


def unlisted(app: FastAPI) -> set[tuple[str, str]]:
    """The routes ``app`` serves with a token that no row of the matrix names; every row must
    name exactly one route."""
    routes = [r for r in iter_route_contexts(app.router.routes) if r.path is not None]
    listed = set()
    for method, path, *_ in SCOPED + UNSCOPED:
        bare = path.partition("?")[0]
        matches = [
            r.path for r in routes if method in (r.methods or ()) and r.path_regex.match(bare)
        ]
        assert len(matches) == 1, (method, path, matches)
        listed.add((method, matches[0]))
    assert len(SCOPED + UNSCOPED) == len(listed)  # one row per route
    return served(app) - listed


def test_the_matrix_lists_every_route_of_the_app() -> None:
    """Every (method, route) the app serves with a token is in SCOPED or UNSCOPED: a route added
    without a row fails here (its roles and tenant scoping would go untested)."""
    app = make_api().client.app
    assert isinstance(app, FastAPI)
    assert len(served(app)) == len(SCOPED + UNSCOPED)
    assert unlisted(app) == set(), "routes without a row in the matrix"


def test_a_route_without_a_row_is_found() -> None:
    """The check above sees a route however it is added: on a router the app includes, or on
    one included in that."""
    app = make_api().client.app
    assert isinstance(app, FastAPI)
    outer, inner = APIRouter(), APIRouter()

    @outer.get("/v1/unlisted")
    def unlisted_route() -> None: ...

    @inner.post("/v1/schedules/{trigger_id}/unlisted")
    def nested_route() -> None: ...

    outer.include_router(inner)
    app.include_router(outer)
    assert unlisted(app) == {
        ("GET", "/v1/unlisted"),
        ("POST", "/v1/schedules/{trigger_id}/unlisted"),
    }


@pytest.mark.parametrize("path", sorted(UNTOKENED))
def test_the_untokened_routes_answer_without_a_token(path: str) -> None:
    got = make_api().client.get(path)
    if path.startswith("/.well-known/"):  # this app mints no identity tokens: a 404 saying so
        # (served with keys: tests/unit/api/test_identity.py)
        assert got.status_code == 404 and "identity tokens" in got.json()["detail"]
    else:
        assert got.status_code == 200
