"""RFC 9457 problem responses (``application/problem+json``) for every error the API answers,
and the handlers that turn exceptions into them. No stack trace ever leaves the API: an
unexpected exception is logged and answered with a bare 500 problem. A value the store cannot
hold (:class:`~horae.api.ports.BadValue`) is the request's fault: 422. ``instance`` is the
request's path percent-encoded (what the client sent, never a raw control character)."""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import quote

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.routing import iter_route_contexts
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import JSONResponse, Response

from horae.api.ports import BadValue
from horae.api.service import ApiError

MEDIA_TYPE = "application/problem+json"
log = logging.getLogger("horae.api")

TITLES = {
    400: "Bad request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not found",
    405: "Method not allowed",
    409: "Conflict",
    412: "Precondition failed",
    413: "Content too large",
    415: "Unsupported media type",
    422: "Invalid request",
    428: "Precondition required",
    429: "Too many requests",
    500: "Internal server error",
    503: "Unavailable",
}


def instance_of(path: str) -> str:
    """``path`` as a URI reference: percent-encoded, so no control character reaches an answer
    or a log line."""
    return quote(path, safe="/:@!$&'()*+,;=~")


def problem(
    status: int,
    detail: str,
    *,
    instance: str = "",
    title: str | None = None,
    errors: list[dict[str, str]] | None = None,
    headers: dict[str, str] | None = None,
) -> Response:
    body: dict[str, Any] = {
        "type": "about:blank",
        "title": title or TITLES.get(status, "Error"),
        "status": status,
        "detail": detail,
        "instance": instance_of(instance),
    }
    if errors:
        body["errors"] = errors
    return JSONResponse(body, status_code=status, media_type=MEDIA_TYPE, headers=headers)


def _field(loc: tuple[Any, ...] | list[Any]) -> str:
    parts = [str(p) for p in loc]
    if parts and parts[0] in ("query", "path", "header", "body"):
        parts = parts[1:]
    return ".".join(parts) or "<request>"


def install(app: FastAPI) -> None:
    """Register the handlers: ApiError, request validation, HTTP errors (404, 405, ...)."""

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> Response:
        return problem(
            exc.status,
            exc.detail,
            instance=request.url.path,
            title=exc.title,
            errors=exc.errors,
            headers=exc.headers,
        )

    @app.exception_handler(BadValue)
    async def _bad_value(request: Request, exc: BadValue) -> Response:
        message = "a value of the request the store cannot hold (a control character?)"
        errors = [{"field": "<request>", "message": message}]
        return problem(422, message, instance=request.url.path, errors=errors)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> Response:
        errors = [{"field": _field(e["loc"]), "message": str(e["msg"])} for e in exc.errors()]
        detail = "; ".join(f"{e['field']}: {e['message']}" for e in errors)
        return problem(422, detail, instance=request.url.path, errors=errors)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        headers = dict(exc.headers) if exc.headers else {}
        if exc.status_code == 405:  # every method of the path, not only the first route's
            methods: set[str] = set()
            for route in iter_route_contexts(app.routes):  # the included routers' too
                regex = getattr(route, "path_regex", None)
                if regex is not None and regex.match(request.url.path):
                    methods |= set(getattr(route, "methods", None) or ())
            headers["Allow"] = ", ".join(sorted(methods - {"HEAD"}))
        return problem(
            exc.status_code, str(exc.detail), instance=request.url.path, headers=headers or None
        )
