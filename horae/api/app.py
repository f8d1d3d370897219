"""The HTTP API v1 (FastAPI): :func:`create_app` builds it from the settings and its ports.

Routes, roles and errors are listed in ``docs/api.md``; the OpenAPI document is served at
``/v1/openapi.json`` and the docs at ``/v1/docs``. The tenant comes from the token only; another
tenant's resource answers 404, a role that does not suffice 403.

The app is assembled here and nothing else: the :class:`~horae.api.service.Service` over the
ports and the :class:`~horae.api.dependencies.Edge` (token verifier, rate limiter, metrics) on
``app.state``, the problem handlers, the outermost middleware (:class:`Outer`), the OpenAPI
document (the components: :mod:`horae.api.schemas`, :mod:`horae.api.bodies`), one router per
resource (:data:`horae.api.routes.ROUTERS`) and the console (``/console``, docs/console.md).
What each route does is in the service; what every request must be, in the dependencies.

The edge refuses what the stores cannot hold before any route runs: every path and query value
keeps the text rules of :mod:`horae.contracts.textrules` (422 naming the parameter), a body must
be ``application/json`` (415) of JSON nested at most :data:`~horae.contracts.textrules.MAX_DEPTH`
deep (422), a value the database still refuses answers 422 (:class:`~horae.api.ports.BadValue`),
an unknown path (a trailing slash included) answers 404, never a redirect. Request values reach
the log escaped (:func:`~horae.contracts.textrules.printable`): no line break from a client.
"""

import logging
import time
import traceback
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from fastapi import Depends, FastAPI
from fastapi.openapi.utils import get_openapi
from prometheus_client import CollectorRegistry, Counter, Histogram
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from horae.api import bodies, problems
from horae.api.auth import Verifier
from horae.api.dependencies import Edge, RateLimiter, known_query
from horae.api.memory import MemoryRecentWrites
from horae.api.ports import DefinitionSink, HistorySource, RecentWrites
from horae.api.routes import ROUTERS
from horae.api.routes.common import ref
from horae.api.schemas import components
from horae.api.service import Service
from horae.api.verification import Fetch, MemoryVerifications, PinnedFetch, VerificationStore
from horae.console.routes import router as console_router
from horae.contracts.textrules import printable
from horae.outbound.oidc import OidcKeys
from horae.outbound.oidc_files import OidcKeyFiles
from horae.outbound.ssrf import AddressPolicy
from horae.settings import Settings

log = logging.getLogger("horae.api")
PROBLEM_CODES = (400, 401, 403, 404, 409, 412, 413, 415, 422, 428, 429, 500, 503)


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


def create_app(
    settings: Settings,
    sink: DefinitionSink,
    history: HistorySource,
    *,
    addresses: AddressPolicy | None = None,
    verifications: VerificationStore | None = None,
    fetch: Fetch | None = None,
    writes: RecentWrites | None = None,
    oidc_keys: OidcKeys | None = None,
    clock: Callable[[], datetime] | None = None,
    monotonic: Callable[[], float] = time.monotonic,
) -> FastAPI:
    """The API over ``sink`` (definitions and commands topics) and ``history`` (read models);
    ``addresses``: the SSRF policy (default: the dispatcher's allowlist, system resolver);
    ``verifications`` / ``fetch``: target ownership records (default: in this process) and how
    the well-known answer is fetched (default: :class:`PinnedFetch` under ``addresses``, the
    dispatcher's lean sender pinned to the addresses the policy approved); ``writes``: the
    versions written, for read-your-writes (default: in this process; ``horae api`` shares them
    in PostgreSQL); ``oidc_keys``: the identity-token keys whose JWKS ``/.well-known/jwks.json``
    publishes (default: ``HORAE_OIDC_KEYS_DIR``'s, none when unset)."""
    api = settings.api
    keys = {kid: secret.get_secret_value() for kid, secret in api.token_keys.items()}
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
    edge = Edge(
        Verifier(keys),
        # each of the api.workers processes enforces its share of a tenant's rate and burst
        RateLimiter(api.rate_per_s / api.workers, max(1, -(-api.burst // api.workers)), monotonic),
        registry,
    )
    error_responses: dict[int | str, Any] = {
        code: {
            "description": problems.TITLES[code],
            "content": {problems.MEDIA_TYPE: {"schema": ref("Problem")}},
        }
        for code in PROBLEM_CODES
    }
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
    app.state.edge = edge
    if oidc_keys is None and settings.oidc_keys_dir is not None:
        oidc_keys = OidcKeyFiles(settings.oidc_keys_dir)
    app.state.oidc_keys = oidc_keys
    problems.install(app)

    app.add_middleware(Outer, max_body=api.max_body_bytes, requests=requests, latency=latency)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            doc = get_openapi(title=app.title, version=app.version, routes=app.routes)
            schemas = doc.setdefault("components", {}).setdefault("schemas", {})
            schemas.update(components())
            schemas.update(bodies.schemas())
            doc["components"]["securitySchemes"] = {
                "bearer": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"}
            }
            doc["security"] = [{"bearer": []}]
            app.openapi_schema = doc
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]

    for router in ROUTERS:
        app.include_router(router)
    app.include_router(console_router)  # the console, /console (docs/console.md)
    return app
