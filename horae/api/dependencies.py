"""What the API's routes depend on (FastAPI ``Depends``): the service and the settings, the
token and the role a route needs, the edge's checks of every request, the JSON body, and the
types of path and query values.

The routers (:mod:`horae.api.routes`) are module-level and shared by every app
:func:`~horae.api.app.create_app` builds, so nothing here closes over one app: a dependency reads
the app's own objects from the request, ``app.state.service`` (the :class:`Service`, which the
console reads too) and ``app.state.edge`` (:class:`Edge`: the token verifier, the rate limiter,
the metrics registry).

- :func:`principal`: 401 without a valid Bearer token (with ``WWW-Authenticate``), then 429
  with ``Retry-After`` for a tenant over its rate. :data:`Reader`, :data:`Author`,
  :data:`Policy`, :data:`Platform`: the principal, 403 unless its roles satisfy the route's
  (:data:`horae.api.auth.SATISFIES`).
- :func:`known_query`, a dependency of every route: 400 naming a query parameter the route does
  not declare, 422 naming a path or query value that breaks the text rules.
- :func:`body_of` / :func:`read`: 415 unless ``application/json``, 413 above
  ``api.max_body_bytes`` (however the body is sent), 400 unless JSON, 422 for JSON nested too
  deep or holding text that is not Unicode; :func:`read` then validates a small body into its
  model (:mod:`horae.api.bodies`), 422 naming the field.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Header, Path, Query, Request
from fastapi.routing import APIRoute
from prometheus_client import CollectorRegistry

from horae.api import bodies
from horae.api.auth import Principal, TokenError, Verifier
from horae.api.service import ApiError, Service, invalid
from horae.contracts import events as ev
from horae.contracts.textrules import MAX_DEPTH, Rule, json_problem, printable, text_problem
from horae.settings import Settings

Role = ev.Role
MAX_PAGE = 1000
#: what every path and query value of a request must be (the text rules of a line)
REQUEST_VALUE = Rule(2048)
JSON_MEDIA_TYPE = "application/json"
#: the OpenAPI patterns of path and query values: what the text rules let through
#: (:func:`known_query` checks them first, with a message naming the rule)
TEXT = r"^[^\x00-\x1f\x7f-\x9f]*$"
NAME_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,62}$"  # NAME for JSON Schema ("$": the end of the text)


class RateLimiter:
    """A token bucket per tenant: ``rate`` per second, ``burst`` at once."""

    def __init__(self, rate: float, burst: int, monotonic: Callable[[], float]) -> None:
        self.rate, self.burst, self.monotonic = rate, float(burst), monotonic
        self.buckets: dict[str, tuple[float, float]] = {}

    def take(self, tenant: str) -> float | None:
        """``None`` when allowed, else the seconds to wait."""
        now = self.monotonic()
        tokens, at = self.buckets.get(tenant, (self.burst, now))
        tokens = min(self.burst, tokens + (now - at) * self.rate)
        if tokens < 1.0:
            self.buckets[tenant] = (tokens, now)
            return (1.0 - tokens) / self.rate if self.rate > 0 else 60.0
        self.buckets[tenant] = (tokens - 1.0, now)
        return None


@dataclass
class Edge:
    """One app's objects at its edge: the token verifier, the per-tenant rate limiter, the
    metrics registry, and the query parameters each route declares (found once per route)."""

    verifier: Verifier
    limiter: RateLimiter
    registry: CollectorRegistry
    declared: dict[str, frozenset[str]] = field(default_factory=dict)


def edge(request: Request) -> Edge:
    """The request's app's :class:`Edge`."""
    held: Edge = request.app.state.edge
    return held


def service(request: Request) -> Service:
    """The request's app's :class:`Service`."""
    held: Service = request.app.state.service
    return held


def settings(request: Request) -> Settings:
    """The request's app's settings."""
    return service(request).settings


# the dependencies are async: resolved on the event loop, no worker thread hop per request
async def _service(request: Request) -> Service:
    return service(request)


async def _settings(request: Request) -> Settings:
    return settings(request)


ServiceDep = Annotated[Service, Depends(_service)]
SettingsDep = Annotated[Settings, Depends(_settings)]


# --- every request -------------------------------------------------------------------------
def _query_names(route: APIRoute) -> frozenset[str]:
    """The query parameters ``route`` declares (its dependencies' included, by alias)."""
    names: set[str] = set()
    todo = [route.dependant]
    while todo:
        dependant = todo.pop()
        names.update(p.alias for p in dependant.query_params)
        todo.extend(dependant.dependencies)
    return frozenset(names)


async def known_query(request: Request) -> None:
    """400 naming the first query parameter the route does not declare (a misspelt filter is an
    error, never silently ignored); 422 naming the first path or query value that breaks the text
    rules (a NUL never reaches the database, a line break never a log)."""
    route = request.scope.get("route")
    if not isinstance(route, APIRoute):
        return
    declared = edge(request).declared
    key = f"{sorted(route.methods or ())} {route.path}"
    known = declared.get(key)
    if known is None:
        known = declared[key] = _query_names(route)
    for name in request.query_params:
        if name not in known:
            takes = ", ".join(sorted(known)) or "none"
            message = f"unknown query parameter (this route takes: {takes})"
            errors = [{"field": printable(name), "message": message}]
            raise ApiError(400, "Bad request", f"{printable(name)}: {message}", errors)
    values = [*request.path_params.items(), *request.query_params.multi_items()]
    for name, value in values:
        problem = text_problem(value, REQUEST_VALUE)
        if problem is not None:
            raise invalid(name, problem)


# --- the token and its roles ----------------------------------------------------------------
async def principal(  # async: checked on the event loop, no worker thread hop per request
    request: Request,
    authorization: Annotated[str | None, Header(include_in_schema=False)] = None,
) -> Principal:
    """The token's principal (401 without a valid one), within its tenant's rate (429)."""
    challenge = {"WWW-Authenticate": 'Bearer realm="horae"'}
    if not authorization or not authorization.lower().startswith("bearer "):
        raise ApiError(401, "Unauthorized", "a Bearer token is required", headers=challenge)
    held = edge(request)
    try:
        who = held.verifier(authorization[7:].strip())
    except TokenError as exc:
        raise ApiError(401, "Unauthorized", str(exc), headers=challenge) from None
    wait = held.limiter.take(who.tenant)
    if wait is not None:
        headers = {"Retry-After": str(max(1, round(wait + 0.5)))}
        detail = f"tenant {who.tenant!r} is over its request rate"
        raise ApiError(429, "Too many requests", detail, headers=headers)
    return who


def need(role: Role) -> Callable[..., Awaitable[Principal]]:
    """The dependency of a route that needs ``role``: the principal, 403 unless it may."""

    async def check(who: Annotated[Principal, Depends(principal)]) -> Principal:
        if not who.may(role):
            have = ",".join(sorted(r.value for r in who.roles))
            raise ApiError(403, "Forbidden", f"needs role {role.value!r} (token grants {have})")
        return who

    return check


Reader = Annotated[Principal, Depends(need(Role.READ))]
Author = Annotated[Principal, Depends(need(Role.AUTHOR))]
Policy = Annotated[Principal, Depends(need(Role.POLICY))]
Platform = Annotated[Principal, Depends(need(Role.PLATFORM))]


# --- the body -------------------------------------------------------------------------------
async def body_of(request: Request) -> Any:
    """The JSON body: 415 unless ``application/json``, 413 above the limit, 400 unless JSON,
    422 naming the path nested too deep or holding text that is not Unicode."""
    media = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if media != JSON_MEDIA_TYPE:
        got = printable(media) or "none"
        raise ApiError(415, "Unsupported media type", f"expected {JSON_MEDIA_TYPE} (got {got})")
    limit = settings(request).api.max_body_bytes
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ApiError(413, "Content too large", f"body larger than {limit} bytes")
        chunks.append(chunk)
    try:
        body = json.loads(b"".join(chunks))
    except RecursionError:
        raise invalid("<body>", f"nested deeper than {MAX_DEPTH} levels") from None
    except ValueError:
        raise ApiError(400, "Bad request", "the body is not JSON") from None
    problem = json_problem(body)
    if problem is not None:
        raise invalid(*problem)
    return body


B = TypeVar("B", bound=bodies.Body)


async def read(request: Request, model: type[B]) -> B:
    """The body (:func:`body_of`) as ``model``: 422 naming the field it refuses."""
    raw = await body_of(request)
    try:
        return bodies.of(model, raw)
    except bodies.Refused as exc:
        raise invalid(exc.field, exc.message) from None


# --- path and query values ------------------------------------------------------------------
TriggerId = Annotated[str, Path(min_length=1, max_length=63, pattern=NAME_PATTERN)]
Limit = Annotated[int, Query(ge=1, le=MAX_PAGE)]
Cursor = Annotated[str | None, Query(max_length=REQUEST_VALUE.max_len, pattern=TEXT)]
Since = Annotated[datetime | None, Query(alias="from")]
Until = Annotated[datetime | None, Query(alias="to")]
#: how many next instants
N = Annotated[int, Query(ge=1, le=1000)]
