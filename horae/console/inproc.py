"""The console's way to the API: the API's own routes, called in-process over ASGI.

Every act and nearly every read of the console is a request to ``/v1/...`` of the same app,
with the session's bearer token: the API's authentication, rate limit, role checks, tenant
scoping, validation and problem+json answers apply unchanged, and a console page can show no
more than the API would answer that token. No socket is opened (``httpx.ASGITransport``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx
from starlette.requests import Request


@dataclass
class Problem(Exception):
    """An API answer that is not 2xx, as its problem+json says it."""

    status: int
    title: str
    detail: str
    errors: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def of(cls, response: httpx.Response) -> Problem:
        try:
            body = response.json()
        except ValueError:
            body = {}
        if not isinstance(body, dict):
            body = {}
        errors = body.get("errors") if isinstance(body.get("errors"), list) else []
        return cls(
            response.status_code,
            str(body.get("title") or response.reason_phrase or "Error"),
            str(body.get("detail") or ""),
            [e for e in errors or [] if isinstance(e, dict)],
        )


class Api:
    """The API as the session's token sees it."""

    def __init__(self, request: Request, token: str) -> None:
        self.app = request.app
        self.token = token

    async def call(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        json: Any = None,
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        transport = httpx.ASGITransport(app=self.app)
        sent = {"Authorization": f"Bearer {self.token}", **(headers or {})}
        clean = {k: v for k, v in (params or {}).items() if v not in (None, "")}
        async with httpx.AsyncClient(transport=transport, base_url="http://horae.console") as c:
            return await c.request(method, path, params=clean, json=json, headers=sent)

    async def get(self, path: str, **params: Any) -> Any:
        response = await self.call("GET", path, params=params)
        if not response.is_success:
            raise Problem.of(response)
        return response.json()

    async def send(self, method: str, path: str, body: Any = None, **kw: Any) -> Any:
        response = await self.call(method, path, json=body, **kw)
        if not response.is_success:
            raise Problem.of(response)
        return response.json() if response.content else None
