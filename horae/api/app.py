"""The HTTP API v1 (FastAPI): :func:`create_app` builds it from the settings and its ports.

Routes, roles and errors are listed in ``docs/api.md``; the OpenAPI document is served at
``/v1/openapi.json`` and the docs at ``/v1/docs``. The tenant comes from the token only; another
tenant's resource answers 404, a role that does not suffice 403.

The edge refuses what the stores cannot hold before any route runs: every path and query value
keeps the text rules of :mod:`horae.contracts.textrules` (422 naming the parameter), a body must
be ``application/json`` (415) of JSON nested at most :data:`~horae.contracts.textrules.MAX_DEPTH`
deep (422), a value the database still refuses answers 422 (:class:`~horae.api.ports.BadValue`),
an unknown path (a trailing slash included) answers 404, never a redirect. Request values reach
the log escaped (:func:`~horae.contracts.textrules.printable`): no line break from a client.
"""

import json
import logging
import time
import traceback
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Header, Path, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from horae.api import problems
from horae.api.auth import Principal, TokenError, Verifier
from horae.api.memory import MemoryRecentWrites
from horae.api.ports import (
    SHOWN_STATES,
    BadCursor,
    BadValue,
    DefinitionSink,
    HistorySource,
    LatenessRow,
    RecentWrites,
    StoredTrigger,
)
from horae.api.schemas import REPORTED, components
from horae.api.service import (
    CONFIRM_TTL_S,
    ApiError,
    Service,
    backfill_cost,
    checked,
    compare,
    invalid,
    not_found,
    upcoming,
)
from horae.api.verification import Fetch, MemoryVerifications, PinnedFetch, VerificationStore
from horae.cli.tenants import tenant_command
from horae.console.routes import router as console_router
from horae.contracts import events as ev
from horae.contracts.ingress import NAME
from horae.contracts.textrules import MAX_DEPTH, Rule, json_problem, printable, text_problem
from horae.outbound.ssrf import AddressPolicy
from horae.settings import Settings

log = logging.getLogger("horae.api")
Role = ev.Role
MAX_PAGE = 1000
#: what every path and query value of a request must be (the text rules of a line)
REQUEST_VALUE = Rule(2048)
JSON_MEDIA_TYPE = "application/json"


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


class Outer:
    """The outermost middleware of the API, plain ASGI (no task or stream per request): 413 for a
    declared body above ``max_body``, a 500 problem for an unhandled error (logged; no stack
    trace leaves), the request counter and latency histogram by route."""

    def __init__(
        self, app: ASGIApp, *, max_body: int, requests: Counter, latency: Histogram
    ) -> None:
        self.app, self.max_body, self.requests, self.latency = app, max_body, requests, latency

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        path, method = scope["path"], scope["method"]
        status, answering = 500, False

        async def sending(message: Message) -> None:
            nonlocal status, answering
            if message["type"] == "http.response.start":
                status, answering = message["status"], True
            await send(message)

        length = next((v for k, v in scope["headers"] if k == b"content-length"), None)
        try:
            if length is not None and (not length.isdigit() or int(length) > self.max_body):
                too_large = f"body larger than {self.max_body} bytes"
                await problems.problem(413, too_large, instance=path)(scope, receive, sending)
            else:
                await self.app(scope, receive, sending)
        except Exception as exc:
            log.error(  # escaped: a client's line break never starts a log line of its own
                "unhandled error on %s %s: %s\n%s",
                printable(method),
                problems.instance_of(path),
                printable(f"{type(exc).__name__}: {exc}"),
                "".join(traceback.format_tb(exc.__traceback__)).rstrip(),
            )
            if answering:
                raise
            await problems.problem(500, "internal error", instance=path)(scope, receive, sending)
        finally:
            name = getattr(scope.get("route"), "path", "unmatched")
            self.requests.labels(name, method, str(status)).inc()
            self.latency.labels(name).observe(time.perf_counter() - started)


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json_body(name: str) -> dict[str, Any]:
    return {
        "requestBody": {"required": True, "content": {"application/json": {"schema": _ref(name)}}}
    }


def _obj_body(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    schema = {"type": "object", "properties": properties, "required": required}
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


def _ok(status: int, schema: dict[str, Any], description: str = "OK") -> dict[int | str, Any]:
    return {
        status: {"description": description, "content": {"application/json": {"schema": schema}}}
    }


PAGE_PROPERTIES: dict[str, Any] = {
    "items": {"type": "array", "items": {"type": "object"}},
    "next_cursor": {"type": ["string", "null"]},
}
PAGE = {"type": "object", "required": ["items", "next_cursor"], "properties": PAGE_PROPERTIES}
TRIGGER_PAGE = {
    "type": "object",
    "required": ["items", "next_cursor"],
    "properties": {
        "items": {"type": "array", "items": _ref("TriggerOut")},
        "next_cursor": {"type": ["string", "null"]},
    },
}
ACCEPTED = {
    "type": "object",
    "required": ["command_id"],
    "properties": {"command_id": {"type": "string"}, "fire_key": {"type": "string"}},
}
OCCURRENCES = {"type": "array", "items": _ref("Occurrence")}
LATENESS = {
    "type": "object",
    "required": ["fires", "p50_ms", "p99_ms", "max_ms", "missed"],
    "properties": {
        "fires": {"type": "integer"},
        "p50_ms": {"type": ["number", "null"]},
        "p99_ms": {"type": ["number", "null"]},
        "max_ms": {"type": ["number", "null"]},
        "missed": {"type": "integer"},
        "trigger_id": {"type": ["string", "null"]},
    },
}
PROBLEM_CODES = (400, 401, 403, 404, 409, 412, 413, 415, 422, 428, 429, 500, 503)

#: the OpenAPI patterns of path and query values: what the text rules let through
#: (``known_query`` checks them first, with a message naming the rule)
TEXT = r"^[^\x00-\x1f\x7f-\x9f]*$"
NAME_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,62}$"  # NAME for JSON Schema ("$": the end of the text)
TriggerId = Annotated[str, Path(min_length=1, max_length=63, pattern=NAME_PATTERN)]
Limit = Annotated[int, Query(ge=1, le=MAX_PAGE)]
Cursor = Annotated[str | None, Query(max_length=REQUEST_VALUE.max_len, pattern=TEXT)]


def _utc(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _text(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    if isinstance(value, dict):
        return {k: _text(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_text(v) for v in value]
    return value


def _window(
    since: datetime | None, until: datetime | None, now: datetime, back: timedelta
) -> tuple[datetime, datetime]:
    """``[from, to)``: ``to`` defaults to a day ahead, ``from`` to ``back`` before ``to``."""
    try:
        end = _utc(until) or now + timedelta(days=1)
        start = _utc(since) or end - back
    except OverflowError:
        raise invalid("from", "out of range") from None
    if end < start:
        raise invalid("to", "before from")
    return start, end


def _lateness(row: LatenessRow) -> dict[str, Any]:
    return {
        "fires": row.fires,
        "p50_ms": row.p50_ms,
        "p99_ms": row.p99_ms,
        "max_ms": row.max_ms,
        "missed": row.missed,
        "trigger_id": row.trigger_id,
    }


def _history_item(r: dict[str, Any]) -> dict[str, Any]:
    item: dict[str, Any] = _text(
        {
            "fire_key": r["fire_key"],
            "scheduled_at": r.get("scheduled_at"),
            "due_at": r.get("due_at"),
            "state": r.get("status") or r.get("state"),
            "decision": r.get("state"),
            "origin": r.get("origin"),
            "cause": r.get("cause"),
            "lane": r.get("lane"),
            "lateness_ms": r.get("lateness_ms"),
            "tzdata_version": r.get("tzdata_version"),
            "attempts": r.get("attempt_count", 0),
            "outcome": r.get("outcome"),
            "trigger_version": r.get("trigger_version"),
        }
    )
    return item


def _etag(s: StoredTrigger) -> dict[str, str]:
    return {"ETag": f'"{s.definition.version}"'}


def _version_of(if_match: str) -> int | None:
    text = if_match.strip().removeprefix("W/").strip('"')
    return int(text) if text.isdigit() else None


def _epoch(value: Any, field: str) -> int:
    if not isinstance(value, str):
        raise invalid(field, "expected an RFC 3339 instant")
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        return int((_utc(moment) or moment).timestamp())
    except (ValueError, OverflowError):
        raise invalid(field, "expected an RFC 3339 instant") from None


def _query_names(route: APIRoute) -> frozenset[str]:
    """The query parameters ``route`` declares (its dependencies' included, by alias)."""
    names: set[str] = set()
    todo = [route.dependant]
    while todo:
        dependant = todo.pop()
        names.update(p.alias for p in dependant.query_params)
        todo.extend(dependant.dependencies)
    return frozenset(names)


def create_app(
    settings: Settings,
    sink: DefinitionSink,
    history: HistorySource,
    *,
    addresses: AddressPolicy | None = None,
    verifications: VerificationStore | None = None,
    fetch: Fetch | None = None,
    writes: RecentWrites | None = None,
    clock: Callable[[], datetime] | None = None,
    monotonic: Callable[[], float] = time.monotonic,
) -> FastAPI:
    """The API over ``sink`` (definitions and commands topics) and ``history`` (read models);
    ``addresses``: the SSRF policy (default: the dispatcher's allowlist, system resolver);
    ``verifications`` / ``fetch``: target ownership records (default: in this process) and how
    the well-known answer is fetched (default: :class:`PinnedFetch` under ``addresses``, the
    dispatcher's lean sender pinned to the addresses the policy approved); ``writes``: the
    versions written, for read-your-writes (default: in this process; ``horae api`` shares them
    in PostgreSQL)."""
    api = settings.api
    keys = {kid: secret.get_secret_value() for kid, secret in api.token_keys.items()}
    verifier = Verifier(keys)
    policy = addresses or AddressPolicy(settings.dispatcher.allow)
    service = Service(
        settings,
        sink,
        history,
        policy,
        verifications or MemoryVerifications(),
        fetch or PinnedFetch(policy),
        writes or MemoryRecentWrites(),
        clock or (lambda: datetime.now(UTC)),
        monotonic,
    )
    # each of the api.workers processes enforces its share of a tenant's rate and burst
    limiter = RateLimiter(
        api.rate_per_s / api.workers, max(1, -(-api.burst // api.workers)), monotonic
    )
    registry = CollectorRegistry()
    requests = Counter(
        "horae_api_requests",
        "API requests answered",
        ["route", "method", "status"],
        registry=registry,
    )
    latency = Histogram(
        "horae_api_request_seconds", "API request latency", ["route"], registry=registry
    )
    error_responses: dict[int | str, Any] = {
        code: {
            "description": problems.TITLES[code],
            "content": {problems.MEDIA_TYPE: {"schema": _ref("Problem")}},
        }
        for code in PROBLEM_CODES
    }
    declared: dict[str, frozenset[str]] = {}  # route path + methods -> its query parameters

    async def known_query(request: Request) -> None:
        """400 naming the first query parameter the route does not declare (a misspelt filter
        is an error, never silently ignored); 422 naming the first path or query value that
        breaks the text rules (a NUL never reaches the database, a line break never a log)."""
        route = request.scope.get("route")
        if not isinstance(route, APIRoute):
            return
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

    app = FastAPI(
        title="Horae API",
        version="1",
        openapi_url="/v1/openapi.json",
        docs_url="/v1/docs",
        redoc_url=None,
        responses=error_responses,
        dependencies=[Depends(known_query)],
        redirect_slashes=False,  # an unknown trailing slash is a 404, never a redirect by Host
    )
    app.state.service = service
    problems.install(app)

    app.add_middleware(Outer, max_body=api.max_body_bytes, requests=requests, latency=latency)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            doc = get_openapi(title=app.title, version=app.version, routes=app.routes)
            doc.setdefault("components", {}).setdefault("schemas", {}).update(components())
            doc["components"]["securitySchemes"] = {
                "bearer": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"}
            }
            doc["security"] = [{"bearer": []}]
            app.openapi_schema = doc
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]

    async def principal(  # async: checked on the event loop, no worker thread hop per request
        authorization: Annotated[str | None, Header(include_in_schema=False)] = None,
    ) -> Principal:
        challenge = {"WWW-Authenticate": 'Bearer realm="horae"'}
        if not authorization or not authorization.lower().startswith("bearer "):
            raise ApiError(401, "Unauthorized", "a Bearer token is required", headers=challenge)
        try:
            who = verifier(authorization[7:].strip())
        except TokenError as exc:
            raise ApiError(401, "Unauthorized", str(exc), headers=challenge) from None
        wait = limiter.take(who.tenant)
        if wait is not None:
            headers = {"Retry-After": str(max(1, round(wait + 0.5)))}
            raise ApiError(
                429,
                "Too many requests",
                f"tenant {who.tenant!r} is over its request rate",
                headers=headers,
            )
        return who

    def need(role: Role) -> Callable[..., Awaitable[Principal]]:
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

    async def body_of(request: Request) -> Any:
        """The JSON body: 415 unless ``application/json``, 413 above the limit, 400 unless JSON,
        422 naming the path nested too deep or holding text that is not Unicode."""
        media = request.headers.get("content-type", "").partition(";")[0].strip().lower()
        if media != JSON_MEDIA_TYPE:
            got = printable(media) or "none"
            raise ApiError(415, "Unsupported media type", f"expected {JSON_MEDIA_TYPE} (got {got})")
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > api.max_body_bytes:
                raise ApiError(
                    413, "Content too large", f"body larger than {api.max_body_bytes} bytes"
                )
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

    def reading(func: Callable[..., Any], *args: Any, cursor: str | None) -> Any:
        """``func``'s page; a cursor it refuses, or whose parts the database refuses, is 422
        (another value the database refuses is the handler's 422)."""
        try:
            return func(*args)
        except BadCursor:
            raise invalid("cursor", "not a cursor of this API") from None
        except BadValue:
            if cursor is None:
                raise
            raise invalid("cursor", "not a cursor of this API") from None

    # --- service -------------------------------------------------------------------------
    @app.get("/healthz", tags=["service"], openapi_extra={"security": []})
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get(
        "/readyz",
        tags=["service"],
        responses=_ok(200, {"type": "object"}),
        openapi_extra={"security": []},
    )
    def readyz() -> Response:
        broken = {
            name: p for name, p in (("kafka", sink.problem()), ("postgres", history.problem())) if p
        }
        if broken:
            detail = "; ".join(f"{k}: {v}" for k, v in broken.items())
            return problems.problem(503, detail, instance="/readyz")
        return JSONResponse({"kafka": "ok", "postgres": "ok"})

    @app.get(
        "/metrics",
        tags=["service"],
        openapi_extra={"security": []},
        response_class=Response,
        responses={200: {"description": "Prometheus text", "content": {"text/plain": {}}}},
    )
    def metrics() -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    # --- management ----------------------------------------------------------------------
    @app.post(
        "/v1/schedules",
        tags=["schedules"],
        status_code=201,
        openapi_extra=_json_body("TriggerIn"),
        responses=_ok(201, _ref("TriggerOut"), "Created"),
    )
    async def create(request: Request, who: Author) -> Response:
        body = await body_of(request)
        trigger_id = body.get("trigger_id") if isinstance(body, dict) else None
        if not isinstance(trigger_id, str) or not NAME.match(trigger_id):
            raise invalid("trigger_id", "expected 1-63 chars of a-z 0-9 . _ - ")
        async with service.writing(who.tenant, trigger_id):
            prior = await run_in_threadpool(service.current, who.tenant, trigger_id)
            if prior is not None and prior.definition.state is not ev.DefinitionState.DELETED:
                raise ApiError(
                    409, "Conflict", f"trigger {trigger_id!r} exists (amend it with PUT)"
                )
            version = prior.definition.version + 1 if prior else 1
            d = service.parse(who, body, trigger_id=None, version=version, state="live")
            service.authorize(who, d, None)
            await service.check_target(d)
            stored = await service.publish(d, None)
        headers = {**_etag(stored), "Location": f"/v1/schedules/{trigger_id}"}
        return JSONResponse(service.out(stored), status_code=201, headers=headers)

    @app.get("/v1/schedules", tags=["schedules"], responses=_ok(200, TRIGGER_PAGE))
    def list_schedules(
        who: Reader,
        cursor: Cursor = None,
        limit: Limit = 100,
        label: Annotated[
            str | None,
            Query(
                pattern=r"^[^:\x00-\x1f\x7f-\x9f]+:[^\x00-\x1f\x7f-\x9f]*$",
                max_length=REQUEST_VALUE.max_len,
                description="key:value",
            ),
        ] = None,
        state: Annotated[str | None, Query(pattern=f"^({'|'.join(SHOWN_STATES)})$")] = None,
    ) -> Response:
        pair = None
        if label is not None:
            k, _, v = label.partition(":")
            pair = (k, v)
        page = reading(
            lambda: history.triggers(
                who.tenant, limit=limit, cursor=cursor, label=pair, state=state
            ),
            cursor=cursor,
        )
        items = [
            s
            for s in service.merged_page(who.tenant, page.items)
            if (s.state == state if state else s.state != "deleted")
            and (pair is None or s.labels.get(pair[0]) == pair[1])
        ]
        now = service.now_s()
        rendered = ",".join(service.listed_out(s, now) for s in items)
        text = f'{{"items":[{rendered}],"next_cursor":{json.dumps(page.next_cursor)}}}'
        return Response(text.encode(), media_type="application/json")

    @app.get(
        "/v1/schedules/{trigger_id}", tags=["schedules"], responses=_ok(200, _ref("TriggerOut"))
    )
    def get_schedule(trigger_id: TriggerId, who: Reader) -> Response:
        held = service.current(who.tenant, trigger_id)
        if held is None:
            raise not_found(f"trigger {trigger_id!r}")
        return JSONResponse(service.out(held), headers=_etag(held))

    @app.put(
        "/v1/schedules/{trigger_id}",
        tags=["schedules"],
        openapi_extra=_json_body("TriggerIn"),
        responses=_ok(200, _ref("TriggerOut")),
    )
    async def amend(
        request: Request,
        trigger_id: TriggerId,
        who: Author,
        if_match: Annotated[str | None, Header()] = None,
    ) -> Response:
        body = await body_of(request)
        async with service.writing(who.tenant, trigger_id):
            held = await run_in_threadpool(service.existing, who.tenant, trigger_id)
            if if_match is None:
                raise ApiError(428, "Precondition required", 'If-Match: "<version>" is required')
            version = held.definition.version
            if _version_of(if_match) != version:
                raise ApiError(
                    412,
                    "Precondition failed",
                    f"stale version: the trigger is at version {version}",
                    headers=_etag(held),
                )
            state = held.definition.state.value
            d = service.parse(who, body, trigger_id=trigger_id, version=version + 1, state=state)
            service.authorize(who, d, held)
            await service.check_target(d)
            stored = await service.publish(d, held)
        return JSONResponse(service.out(stored), headers=_etag(stored))

    @app.delete(
        "/v1/schedules/{trigger_id}",
        tags=["schedules"],
        status_code=204,
        response_class=Response,
        responses={204: {"description": "Deleted"}},
    )
    async def delete(
        trigger_id: TriggerId, who: Author, if_match: Annotated[str | None, Header()] = None
    ) -> Response:
        async with service.writing(who.tenant, trigger_id):
            await _delete(trigger_id, who, if_match)
        return Response(status_code=204)

    async def _delete(trigger_id: str, who: Principal, if_match: str | None) -> None:
        held = await run_in_threadpool(service.existing, who.tenant, trigger_id)
        if if_match is not None and _version_of(if_match) != held.definition.version:
            raise ApiError(
                412,
                "Precondition failed",
                f"stale version: the trigger is at version {held.definition.version}",
            )
        d = held.definition
        gone = ev.TriggerDefinition(
            **{
                **{f: getattr(d, f) for f in d.__dataclass_fields__},
                "version": d.version + 1,
                "state": ev.DefinitionState.DELETED,
                "authored_at": service.clock().astimezone(UTC),
                "author": who.actor,
                "role": Role.AUTHOR,
                "signature": None,
            }
        )
        service.authorize(who, gone, held)
        await service.publish(gone, held)

    async def _command(
        who: Principal, trigger_id: str, kind: ev.CommandKind, role: Role, **kw: Any
    ) -> ev.Command:
        await run_in_threadpool(service.existing, who.tenant, trigger_id)
        return await service.command(who, trigger_id, kind, role, **kw)

    @app.post(
        "/v1/schedules/{trigger_id}/pause",
        tags=["schedules"],
        status_code=202,
        responses=_ok(202, ACCEPTED, "Accepted"),
    )
    async def pause(trigger_id: TriggerId, who: Author) -> dict[str, str]:
        command = await _command(who, trigger_id, ev.CommandKind.PAUSE, Role.AUTHOR)
        return {"command_id": command.command_id}

    @app.post(
        "/v1/schedules/{trigger_id}/resume",
        tags=["schedules"],
        status_code=202,
        responses=_ok(202, ACCEPTED, "Accepted"),
    )
    async def resume(trigger_id: TriggerId, who: Author) -> dict[str, str]:
        command = await _command(who, trigger_id, ev.CommandKind.RESUME, Role.AUTHOR)
        return {"command_id": command.command_id}

    @app.post(
        "/v1/schedules/{trigger_id}/run",
        tags=["schedules"],
        status_code=202,
        responses=_ok(202, ACCEPTED, "Accepted"),
    )
    async def run(trigger_id: TriggerId, who: Author) -> dict[str, str]:
        command = await _command(who, trigger_id, ev.CommandKind.MANUAL_RUN, Role.AUTHOR)
        return {"command_id": command.command_id, "fire_key": service.manual_fire_key(command)}

    # --- dry-run and what-if -------------------------------------------------------------
    N = Annotated[int, Query(ge=1, le=1000)]

    @app.get("/v1/schedules/{trigger_id}/next", tags=["dry-run"], responses=_ok(200, OCCURRENCES))
    def next_of(trigger_id: TriggerId, who: Reader, n: N = 10) -> Response:
        held = service.existing(who.tenant, trigger_id)
        now = int(service.clock().timestamp())
        return JSONResponse(upcoming(held.definition, now, n))

    @app.post(
        "/v1/dry-run",
        tags=["dry-run"],
        openapi_extra=_json_body("TriggerIn"),
        responses=_ok(200, OCCURRENCES),
    )
    async def dry_run(request: Request, who: Reader, n: N = 10) -> Response:
        body = await body_of(request)
        d = service.parse(who, body, trigger_id=None, version=1, state="live")
        return JSONResponse(upcoming(d, int(service.clock().timestamp()), n))

    what_if_body = _obj_body(
        {
            "proposed": _ref("TriggerIn"),
            "from": {"type": "string", "format": "date-time"},
            "to": {"type": "string", "format": "date-time"},
        },
        ["proposed", "from", "to"],
    )
    what_if_out = {
        "type": "object",
        "required": ["current", "proposed", "added", "removed"],
        "properties": {
            k: {"type": "array", "items": {"type": "string"}}
            for k in ("current", "proposed", "added", "removed")
        },
    }

    @app.post(
        "/v1/schedules/{trigger_id}/what-if",
        tags=["dry-run"],
        openapi_extra=what_if_body,
        responses=_ok(200, what_if_out),
    )
    async def what_if(request: Request, trigger_id: TriggerId, who: Reader) -> Response:
        held = await run_in_threadpool(service.existing, who.tenant, trigger_id)
        body = await body_of(request)
        if not isinstance(body, dict):
            raise invalid("<body>", "expected a JSON object")
        start, end = _epoch(body.get("from"), "from"), _epoch(body.get("to"), "to")
        d = held.definition
        proposed = service.parse(
            who, body.get("proposed"), trigger_id=trigger_id, version=d.version + 1, state="live"
        )
        return JSONResponse(compare(d, proposed, start, end))

    # --- history -------------------------------------------------------------------------
    Since = Annotated[datetime | None, Query(alias="from")]
    Until = Annotated[datetime | None, Query(alias="to")]

    history_page = {
        "type": "object",
        "required": ["items", "next_cursor", "trigger_state"],
        "properties": {
            **PAGE_PROPERTIES,
            "trigger_state": {"type": "string", "enum": list(SHOWN_STATES)},
        },
    }

    @app.get(
        "/v1/schedules/{trigger_id}/history", tags=["history"], responses=_ok(200, history_page)
    )
    def history_of(
        trigger_id: TriggerId,
        who: Reader,
        since: Since = None,
        until: Until = None,
        state: Annotated[str | None, Query(max_length=256, pattern=TEXT)] = None,
        cursor: Cursor = None,
        limit: Limit = 100,
    ) -> Response:
        held = service.current(who.tenant, trigger_id)
        if held is None:
            raise not_found(f"trigger {trigger_id!r}")
        start, end = _window(since, until, service.clock(), timedelta(days=7))
        states = [s for s in (state or "").split(",") if s] or None
        page = reading(
            history.fires, who.tenant, trigger_id, start, end, states, limit, cursor, cursor=cursor
        )
        return JSONResponse(
            {
                "items": [_history_item(r) for r in page.items],
                "next_cursor": page.next_cursor,
                "trigger_state": held.shown,
            }
        )

    fire_out = {
        "type": "object",
        "required": ["fire", "attempts", "outcome", "outcomes"],
        "properties": {
            "fire": {"type": "object"},
            "attempts": {"type": "array", "items": {"type": "object"}},
            "outcome": {"type": ["object", "null"]},
            "outcomes": {"type": "array", "items": {"type": "object"}},
        },
    }

    @app.get("/v1/fires/{fire_key:path}", tags=["history"], responses=_ok(200, fire_out))
    def fire(
        fire_key: Annotated[str, Path(max_length=REQUEST_VALUE.max_len, pattern=TEXT)],
        who: Reader,
    ) -> Response:
        story = history.fire(who.tenant, fire_key)
        if story is None:
            raise not_found(f"fire {fire_key!r}")
        return JSONResponse(
            _text(
                {
                    "fire": _history_item(story.fire)
                    | {
                        "trigger_id": story.fire["trigger_id"],
                        "command_id": story.fire.get("command_id"),
                    },
                    "attempts": story.attempts,
                    "outcome": story.outcome,
                    "outcomes": story.outcomes,
                }
            )
        )

    @app.get("/v1/schedules/{trigger_id}/lateness", tags=["history"], responses=_ok(200, LATENESS))
    def lateness_of(
        trigger_id: TriggerId, who: Reader, since: Since = None, until: Until = None
    ) -> Response:
        if service.current(who.tenant, trigger_id) is None:
            raise not_found(f"trigger {trigger_id!r}")
        start, end = _window(since, until, service.clock(), timedelta(days=7))
        summary, _ = history.lateness(who.tenant, start, end, trigger_id)
        return JSONResponse(_lateness(summary))

    tenant_lateness = {
        "type": "object",
        "required": ["tenant", "summary", "triggers"],
        "properties": {
            "tenant": {"type": "string"},
            "summary": LATENESS,
            "triggers": {"type": "array", "items": LATENESS},
        },
    }

    @app.get("/v1/lateness", tags=["history"], responses=_ok(200, tenant_lateness))
    def lateness(who: Reader, since: Since = None, until: Until = None) -> Response:
        start, end = _window(since, until, service.clock(), timedelta(days=7))
        summary, rows = history.lateness(who.tenant, start, end, None)
        return JSONResponse(
            {
                "tenant": who.tenant,
                "summary": _lateness(summary),
                "triggers": [_lateness(r) for r in rows],
            }
        )

    @app.get("/v1/schedules/{trigger_id}/events", tags=["history"], responses=_ok(200, PAGE))
    def events(
        trigger_id: TriggerId, who: Reader, cursor: Cursor = None, limit: Limit = 100
    ) -> Response:
        if service.current(who.tenant, trigger_id) is None:
            raise not_found(f"trigger {trigger_id!r}")
        page = reading(history.events, who.tenant, trigger_id, limit, cursor, cursor=cursor)
        return JSONResponse({"items": _text(page.items), "next_cursor": page.next_cursor})

    @app.get("/v1/audit", tags=["history"], responses=_ok(200, PAGE))
    def audit(
        who: Reader,
        since: Since = None,
        until: Until = None,
        cursor: Cursor = None,
        limit: Limit = 100,
    ) -> Response:
        start, end = _window(since, until, service.clock(), timedelta(days=30))
        page = reading(history.audit, who.tenant, start, end, limit, cursor, cursor=cursor)
        return JSONResponse({"items": _text(page.items), "next_cursor": page.next_cursor})

    # --- privileged ----------------------------------------------------------------------
    backfill_body = _obj_body(
        {
            "from": {"type": "string", "format": "date-time"},
            "to": {"type": "string", "format": "date-time"},
            "confirm": {"type": "string"},
            "reason": {"type": "string"},
        },
        ["from", "to"],
    )
    backfill_out = {
        "type": "object",
        "properties": {
            "fires": {"type": "integer"},
            "confirm": {"type": "string"},
            "expires_in_s": {"type": "integer"},
            "command_id": {"type": "string"},
        },
    }

    @app.post(
        "/v1/schedules/{trigger_id}/backfill",
        tags=["privileged"],
        openapi_extra=backfill_body,
        responses={
            **_ok(200, backfill_out, "The cost and a confirm token"),
            **_ok(202, backfill_out, "Accepted"),
        },
    )
    async def backfill(request: Request, trigger_id: TriggerId, who: Policy) -> Response:
        held = await run_in_threadpool(service.existing, who.tenant, trigger_id)
        body = await body_of(request)
        if not isinstance(body, dict):
            raise invalid("<body>", "expected a JSON object")
        start, end = _epoch(body.get("from"), "from"), _epoch(body.get("to"), "to")
        if end <= start:
            raise invalid("to", "must be after from")
        if end > int(service.clock().timestamp()):
            raise invalid("to", "a backfill covers the past only")
        d = held.definition
        ceiling = min(
            d.quotas.backfill_max_fires,
            service.settings.grants().grant(who.tenant).backfill_max_fires,
        )
        fires, over = backfill_cost(d, start, end, ceiling)
        if over:
            raise invalid(
                "to", f"the window has more than {ceiling} fires (the tenant's backfill ceiling)"
            )
        confirm = body.get("confirm")
        if confirm is None:
            token = service.confirm_token(who.tenant, trigger_id, d.version, start, end)
            return JSONResponse({"fires": fires, "confirm": token, "expires_in_s": CONFIRM_TTL_S})
        if not isinstance(confirm, str):
            raise invalid("confirm", "expected the token of the cost answer")
        service.check_confirm(confirm, who.tenant, trigger_id, d.version, start, end)
        reason = body.get("reason") if isinstance(body.get("reason"), str) else None
        window = (datetime.fromtimestamp(start, UTC), datetime.fromtimestamp(end, UTC))
        command = await service.command(
            who, trigger_id, ev.CommandKind.BACKFILL, Role.POLICY, reason=reason, window=window
        )
        return JSONResponse({"fires": fires, "command_id": command.command_id}, status_code=202)

    horizon_body = _obj_body({"horizon_s": {"type": "integer", "minimum": 0}}, ["horizon_s"])
    horizon_out = {
        "type": "object",
        "required": ["version"],
        "properties": {"version": {"type": "integer"}},
    }

    async def _horizon(trigger_id: str, who: Principal, value: int) -> StoredTrigger:
        held = await run_in_threadpool(service.existing, who.tenant, trigger_id)
        d = held.definition
        current = service.out(held)
        for name in REPORTED:
            current.pop(name, None)
        current["policies"]["horizon_s"] = value
        amended = service.parse(
            who,
            current,
            trigger_id=trigger_id,
            version=d.version + 1,
            state=d.state.value,
            role=Role.POLICY,
        )
        service.authorize(who, amended, held, also=frozenset({Role.AUTHOR}))
        stored = await service.publish(amended, held)
        return stored

    @app.post(
        "/v1/schedules/{trigger_id}/horizon",
        tags=["privileged"],
        openapi_extra=horizon_body,
        responses=_ok(202, horizon_out, "Accepted"),
    )
    async def horizon(request: Request, trigger_id: TriggerId, who: Policy) -> Response:
        body = await body_of(request)
        value = body.get("horizon_s") if isinstance(body, dict) else None
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise invalid("horizon_s", "expected a non-negative integer (seconds)")
        async with service.writing(who.tenant, trigger_id):
            stored = await _horizon(trigger_id, who, value)
        return JSONResponse(
            {"version": stored.definition.version}, status_code=202, headers=_etag(stored)
        )

    # --- target ownership ----------------------------------------------------------------
    challenge_out = {
        "type": "object",
        "required": ["host", "challenge", "well_known_url", "expires_at"],
        "properties": {
            "host": {"type": "string"},
            "challenge": {"type": "string"},
            "well_known_url": {"type": "string"},
            "expires_at": {"type": "string", "format": "date-time"},
            "answer": {"type": "string"},
        },
    }
    check_out = {
        "type": "object",
        "required": ["host", "state", "detail"],
        "properties": {
            "host": {"type": "string"},
            "state": {"type": "string", "enum": ["verified", "failed"]},
            "detail": {"type": "string"},
            "verified_until": {"type": ["string", "null"], "format": "date-time"},
        },
    }

    @app.post(
        "/v1/targets/verifications",
        tags=["targets"],
        status_code=201,
        openapi_extra=_obj_body({"url": {"type": "string"}}, ["url"]),
        responses=_ok(201, challenge_out, "Created"),
    )
    async def verification(request: Request, who: Author) -> Response:
        body = await body_of(request)
        made = await service.challenge(
            who.tenant, body.get("url") if isinstance(body, dict) else None
        )
        answer = "hex HMAC-SHA256(one of the tenant's webhook secrets, "
        answer += f"'horae-verification:{who.tenant}:{made.host}:{made.token}')"
        return JSONResponse(
            _text(
                {
                    "host": made.host,
                    "challenge": made.token,
                    "well_known_url": made.well_known_url,
                    "expires_at": made.expires_at,
                    "answer": answer,
                }
            ),
            status_code=201,
        )

    @app.post(
        "/v1/targets/verifications/{host}/check",
        tags=["targets"],
        responses=_ok(200, check_out),
    )
    async def verification_check(
        host: Annotated[str, Path(max_length=300, pattern=TEXT)], who: Author
    ) -> Response:
        ok, why, until = await service.check_challenge(who.tenant, host)
        return JSONResponse(
            _text(
                {
                    "host": host.lower(),
                    "state": "verified" if ok else "failed",
                    "detail": why,
                    "verified_until": until,
                }
            )
        )

    # --- platform ------------------------------------------------------------------------
    tenants_out = {
        "type": "object",
        "required": ["items"],
        "properties": {"items": {"type": "array", "items": {"type": "object"}}},
    }

    @app.get("/v1/admin/tenants", tags=["platform"], responses=_ok(200, tenants_out))
    def tenants(who: Platform) -> dict[str, Any]:
        grants = settings.grants()
        items = []
        for tenant in sorted(settings.tenant_keys):
            g = grants.grant(tenant)
            items.append(
                {
                    "tenant": tenant,
                    "grant": {
                        "horizon_max_s": g.horizon_max_s,
                        "backfill_max_fires": g.backfill_max_fires,
                        "dispatch_per_s": g.dispatch_per_s,
                        "catchup_share": g.catchup_share,
                    },
                }
            )
        return {"items": items}

    suspension_body = _obj_body(
        {"suspended": {"type": "boolean"}, "reason": {"type": "string"}}, ["suspended"]
    )

    @app.put(
        "/v1/admin/tenants/{tenant}/suspension",
        tags=["platform"],
        status_code=202,
        openapi_extra=suspension_body,
        responses=_ok(202, ACCEPTED, "Accepted"),
    )
    async def suspension(
        request: Request,
        tenant: Annotated[str, Path(max_length=63, pattern=NAME_PATTERN)],
        who: Platform,
    ) -> dict[str, str]:
        if tenant not in settings.tenant_keys:
            raise not_found(f"tenant {tenant!r}")
        body = await body_of(request)
        suspended = body.get("suspended") if isinstance(body, dict) else None
        if not isinstance(suspended, bool):
            raise invalid("suspended", "expected true or false")
        reason = body.get("reason") if isinstance(body.get("reason"), str) else None
        kind = ev.CommandKind.PAUSE if suspended else ev.CommandKind.RESUME
        try:
            command = tenant_command(
                settings, tenant, kind, f"{who.actor}: {reason or ''}".strip(": "), service.clock()
            )
        except ValueError as exc:
            raise ApiError(503, "Not configured", str(exc)) from None
        checked(command)
        try:
            await sink.put_command(command, every_partition=True)
        except Exception as exc:
            raise ApiError(503, "Unavailable", f"the command was not acknowledged: {exc}") from None
        return {"command_id": command.command_id}

    app.include_router(console_router)  # the console, /console (docs/console.md)
    return app
