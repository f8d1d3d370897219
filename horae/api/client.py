"""A typed HTTP client of Horae's API v1 (the routes of ``docs/api.md``), over httpx.

    from horae.api.client import ApiClient, ApiError

    with ApiClient("http://127.0.0.1:8089", token) as api:
        stored = api.create({"trigger_id": "nightly", ...})    # Stored(trigger, version)
        api.amend("nightly", {...}, version=stored.version)    # If-Match: "<version>"
        for fire in api.history_all("nightly"):
            print(fire["scheduled_at"], fire["state"])

Every call either returns the decoded JSON of a 2xx answer or raises :class:`ApiError`, which
carries the answer's RFC 9457 problem document (:class:`Problem`: type, title, status, detail,
instance, field errors); an answer that is not ``application/problem+json`` becomes a problem with
the status and the reason phrase. A server that cannot be reached raises :class:`ApiUnreachable`.
Trigger documents are plain JSON (``dict``): the server owns their shape and validates them.
``http=`` takes any ``httpx.Client`` with its base URL set (then ``base_url`` is ignored), e.g.
Starlette's ``TestClient`` over an in-process app.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Self
from urllib.parse import quote

import httpx

__all__ = ["ApiClient", "ApiError", "ApiUnreachable", "FieldError", "Page", "Problem", "Stored"]

JSON = dict[str, Any]
#: A query-string value: an instant is sent as RFC 3339 UTC.
When = str | datetime


@dataclass(frozen=True)
class FieldError:
    """One field-level error of a problem (``errors[]``)."""

    field: str
    message: str


@dataclass(frozen=True)
class Problem:
    """An RFC 9457 problem document."""

    status: int
    title: str
    type: str = "about:blank"
    detail: str | None = None
    instance: str | None = None
    errors: tuple[FieldError, ...] = ()

    @classmethod
    def from_response(cls, response: httpx.Response) -> Problem:
        """The problem an error answer carries; a body that is not one: status and reason."""
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            text = response.text.strip()[:200] or None
            return cls(status=response.status_code, title=response.reason_phrase, detail=text)
        errors = tuple(
            FieldError(str(e.get("field", "")), str(e.get("message", "")))
            for e in body.get("errors") or ()
            if isinstance(e, dict)
        )
        return cls(
            status=int(body.get("status", response.status_code)),
            title=str(body.get("title") or response.reason_phrase),
            type=str(body.get("type") or "about:blank"),
            detail=None if body.get("detail") is None else str(body["detail"]),
            instance=None if body.get("instance") is None else str(body["instance"]),
            errors=errors,
        )

    def lines(self) -> list[str]:
        """The problem for people: ``title (status): detail``, then one line per field error
        (one the detail already says is left out)."""
        head = f"{self.title} ({self.status})" + (f": {self.detail}" if self.detail else "")
        errors = (f"{e.field}: {e.message}" for e in self.errors)
        return [head, *(f"  {e}" for e in errors if e != self.detail)]


class ApiError(Exception):
    """The API answered with an error; :attr:`problem` is its problem document."""

    def __init__(self, problem: Problem, retry_after_s: float | None = None) -> None:
        super().__init__("\n".join(problem.lines()))
        self.problem = problem
        self.retry_after_s = retry_after_s

    @property
    def status(self) -> int:
        return self.problem.status


class ApiUnreachable(Exception):
    """No answer from the API (connection refused, timeout, DNS)."""


@dataclass(frozen=True)
class Stored:
    """A trigger as stored (TriggerOut) and its version (from the ``ETag``)."""

    trigger: JSON
    version: int


@dataclass(frozen=True)
class Page:
    """One page of a listing and the cursor of the next one (None: the last page)."""

    items: list[JSON] = field(default_factory=list)
    next_cursor: str | None = None


def _when(value: When) -> str:
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    return value


def _segment(value: str) -> str:
    return quote(value, safe="")


def _version(response: httpx.Response, body: JSON) -> int:
    etag = response.headers.get("etag", "").removeprefix("W/").strip('"')
    if etag.isdigit():
        return int(etag)
    return int(body["version"])


class ApiClient:
    """The routes of API v1 for one bearer token (which names the tenant and the roles)."""

    def __init__(
        self,
        base_url: str,
        token: str | None,
        *,
        http: httpx.Client | None = None,
        timeout_s: float = 30.0,
    ) -> None:
        headers = {"Accept": "application/json, application/problem+json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self._owned = http is None
        self._http = http or httpx.Client(base_url=base_url.rstrip("/"), timeout=timeout_s)
        self._headers = headers
        self.base_url = str(self._http.base_url).rstrip("/")

    def close(self) -> None:
        """Close the HTTP client this client made (one handed in is the caller's)."""
        if self._owned:
            self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # --- transport ------------------------------------------------------------------------

    def _call(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        query = {k: v for k, v in (params or {}).items() if v is not None}
        try:
            response = self._http.request(
                method,
                path,
                params=query,
                json=body,
                headers={**self._headers, **(headers or {})},
            )
        except httpx.TransportError as exc:
            raise ApiUnreachable(f"{self.base_url}: {exc or type(exc).__name__}") from exc
        if response.is_success:
            return response
        retry_after = response.headers.get("retry-after")
        seconds = float(retry_after) if retry_after and retry_after.isdigit() else None
        raise ApiError(Problem.from_response(response), seconds)

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self._call(method, path, **kwargs)
        return response.json() if response.content else None

    def _page(self, path: str, params: Mapping[str, Any]) -> Page:
        body = self._json("GET", path, params=params)
        return Page(list(body.get("items") or []), body.get("next_cursor"))

    def _every(self, fetch: Any, **params: Any) -> Iterator[JSON]:
        cursor: str | None = None
        while True:
            page: Page = fetch(cursor=cursor, **params)
            yield from page.items
            if not page.next_cursor or page.next_cursor == cursor:
                return
            cursor = page.next_cursor

    @staticmethod
    def _schedule(trigger_id: str, rest: str = "") -> str:
        return f"/v1/schedules/{_segment(trigger_id)}{rest}"

    # --- management (author) ---------------------------------------------------------------

    def create(self, trigger: JSON) -> Stored:
        """POST /v1/schedules: the stored trigger and its first version."""
        response = self._call("POST", "/v1/schedules", body=trigger)
        body = response.json()
        return Stored(body, _version(response, body))

    def list_page(
        self,
        *,
        label: str | None = None,
        state: str | None = None,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> Page:
        """GET /v1/schedules: one page; ``label`` as ``key:value``; ``state`` live, paused or
        deleted (without it deleted triggers are left out)."""
        params = {"label": label, "state": state, "cursor": cursor, "limit": limit}
        return self._page("/v1/schedules", params)

    def list_all(
        self, *, label: str | None = None, state: str | None = None, limit: int | None = None
    ) -> Iterator[JSON]:
        """Every trigger of the listing, following the cursors."""
        return self._every(self.list_page, label=label, state=state, limit=limit)

    def get(self, trigger_id: str) -> Stored:
        """GET /v1/schedules/{id}."""
        response = self._call("GET", self._schedule(trigger_id))
        body = response.json()
        return Stored(body, _version(response, body))

    def amend(self, trigger_id: str, trigger: JSON, version: int) -> Stored:
        """PUT /v1/schedules/{id} with ``If-Match: "<version>"`` (412 when it is stale)."""
        path = self._schedule(trigger_id)
        response = self._call("PUT", path, body=trigger, headers={"If-Match": f'"{version}"'})
        body = response.json()
        return Stored(body, _version(response, body))

    def delete(self, trigger_id: str) -> None:
        """DELETE /v1/schedules/{id}."""
        self._call("DELETE", self._schedule(trigger_id))

    def pause(self, trigger_id: str) -> JSON:
        """POST /v1/schedules/{id}/pause: ``{command_id}``."""
        result: JSON = self._json("POST", self._schedule(trigger_id, "/pause"))
        return result

    def resume(self, trigger_id: str) -> JSON:
        """POST /v1/schedules/{id}/resume: ``{command_id}``."""
        result: JSON = self._json("POST", self._schedule(trigger_id, "/resume"))
        return result

    def run(self, trigger_id: str) -> JSON:
        """POST /v1/schedules/{id}/run (a manual run): ``{command_id, fire_key}``."""
        result: JSON = self._json("POST", self._schedule(trigger_id, "/run"))
        return result

    # --- dry-run and what-if (read) ---------------------------------------------------------

    def next(self, trigger_id: str, n: int = 10) -> list[JSON]:
        """GET /v1/schedules/{id}/next: the stored version's next ``n`` instants."""
        result: list[JSON] = self._json("GET", self._schedule(trigger_id, "/next"), params={"n": n})
        return result

    def dry_run(self, trigger: JSON, n: int = 10) -> list[JSON]:
        """POST /v1/dry-run: the next ``n`` instants of a definition (nothing stored)."""
        result: list[JSON] = self._json("POST", "/v1/dry-run", params={"n": n}, body=trigger)
        return result

    def what_if(self, trigger_id: str, proposed: JSON, start: When, end: When) -> JSON:
        """POST /v1/schedules/{id}/what-if: current vs proposed instants over a window."""
        body = {"proposed": proposed, "from": _when(start), "to": _when(end)}
        result: JSON = self._json("POST", self._schedule(trigger_id, "/what-if"), body=body)
        return result

    # --- history (read) ---------------------------------------------------------------------

    def history(
        self,
        trigger_id: str,
        *,
        start: When | None = None,
        end: When | None = None,
        state: str | None = None,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> Page:
        """GET /v1/schedules/{id}/history: one page of the trigger's instants."""
        params = {
            "from": None if start is None else _when(start),
            "to": None if end is None else _when(end),
            "state": state,
            "cursor": cursor,
            "limit": limit,
        }
        return self._page(self._schedule(trigger_id, "/history"), params)

    def history_all(
        self,
        trigger_id: str,
        *,
        start: When | None = None,
        end: When | None = None,
        state: str | None = None,
        limit: int | None = None,
    ) -> Iterator[JSON]:
        """Every instant of the history, following the cursors."""

        def fetch(cursor: str | None) -> Page:
            return self.history(
                trigger_id, start=start, end=end, state=state, cursor=cursor, limit=limit
            )

        return self._every(fetch)

    def fires(
        self,
        *,
        start: When | None = None,
        end: When | None = None,
        state: str | None = None,
        label: str | None = None,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> Page:
        """GET /v1/fires: one page of the tenant's fires across its triggers (``state``
        comma-separated shown states, ``label`` ``key:value``)."""
        params = {
            "from": None if start is None else _when(start),
            "to": None if end is None else _when(end),
            "state": state,
            "label": label,
            "cursor": cursor,
            "limit": limit,
        }
        return self._page("/v1/fires", params)

    def fires_all(
        self,
        *,
        start: When | None = None,
        end: When | None = None,
        state: str | None = None,
        label: str | None = None,
        limit: int | None = None,
    ) -> Iterator[JSON]:
        """Every fire of the search, following the cursors."""

        def fetch(cursor: str | None) -> Page:
            return self.fires(
                start=start, end=end, state=state, label=label, cursor=cursor, limit=limit
            )

        return self._every(fetch)

    def fire(self, fire_key: str) -> JSON:
        """GET /v1/fires/{fire_key}: ``{fire, attempts, outcome}``."""
        result: JSON = self._json("GET", f"/v1/fires/{_segment(fire_key)}")
        return result

    def cancel_fire(self, trigger_id: str, fire_key: str) -> JSON:
        """POST /v1/schedules/{id}/cancel?fire_key=: ``{command_id, fire_key}`` once the cancel
        is sent (202), or ``{fire_key, state, detail}`` when the fire is already cancelled
        (200)."""
        path = self._schedule(trigger_id, "/cancel")
        result: JSON = self._json("POST", path, params={"fire_key": fire_key})
        return result

    def lateness(
        self, trigger_id: str | None = None, *, start: When | None = None, end: When | None = None
    ) -> JSON:
        """GET /v1/schedules/{id}/lateness, or the tenant's GET /v1/lateness without an id."""
        path = "/v1/lateness" if trigger_id is None else self._schedule(trigger_id, "/lateness")
        params = {
            "from": None if start is None else _when(start),
            "to": None if end is None else _when(end),
        }
        result: JSON = self._json("GET", path, params=params)
        return result

    def events(
        self, trigger_id: str, *, cursor: str | None = None, limit: int | None = None
    ) -> Page:
        """GET /v1/schedules/{id}/events: the schedule events the trigger produced."""
        params = {"cursor": cursor, "limit": limit}
        return self._page(self._schedule(trigger_id, "/events"), params)

    def audit(
        self,
        *,
        start: When | None = None,
        end: When | None = None,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> Page:
        """GET /v1/audit: the tenant's audit entries."""
        params = {
            "from": None if start is None else _when(start),
            "to": None if end is None else _when(end),
            "cursor": cursor,
            "limit": limit,
        }
        return self._page("/v1/audit", params)

    # --- target ownership (author) ----------------------------------------------------------

    def verify_target(self, url: str) -> JSON:
        """POST /v1/targets/verifications: a challenge for the host of a webhook URL
        (``{host, challenge, well_known_url, expires_at, answer}``)."""
        result: JSON = self._json("POST", "/v1/targets/verifications", body={"url": url})
        return result

    def check_target(self, host: str) -> JSON:
        """POST /v1/targets/verifications/{host}/check: the host's answer fetched and compared
        (``{host, state: verified|failed, detail, verified_until}``)."""
        path = f"/v1/targets/verifications/{_segment(host)}/check"
        result: JSON = self._json("POST", path)
        return result

    # --- privileged (policy) ----------------------------------------------------------------

    def backfill(
        self,
        trigger_id: str,
        start: When,
        end: When,
        confirm: str | None = None,
        reason: str | None = None,
    ) -> JSON:
        """POST /v1/schedules/{id}/backfill: without ``confirm`` the cost ``{fires, confirm}``;
        with the confirm token it was given, ``{command_id}`` (accepted); ``reason`` is kept in
        the command."""
        body: JSON = {"from": _when(start), "to": _when(end)}
        if confirm is not None:
            body["confirm"] = confirm
        if reason is not None:
            body["reason"] = reason
        result: JSON = self._json("POST", self._schedule(trigger_id, "/backfill"), body=body)
        return result

    def horizon(self, trigger_id: str, horizon_s: int) -> JSON:
        """POST /v1/schedules/{id}/horizon: a new version with the catch-up horizon."""
        result: JSON = self._json(
            "POST", self._schedule(trigger_id, "/horizon"), body={"horizon_s": horizon_s}
        )
        return result or {}

    # --- groups and dead letters ------------------------------------------------------------
    def group(
        self,
        act: str,
        selector: str,
        *,
        dry_run: bool = False,
        request_id: str | None = None,
        policies: JSON | None = None,
        reason: str | None = None,
    ) -> JSON:
        """POST /v1/groups/{act} (``pause``, ``resume``, ``delete``, ``policies``) on the
        triggers ``selector`` names: a dry run's count and ids, or what was done."""
        body: JSON = {"selector": selector, "dry_run": dry_run}
        for name, value in (("request_id", request_id), ("policies", policies), ("reason", reason)):
            if value is not None:
                body[name] = value
        result: JSON = self._json("POST", f"/v1/groups/{_segment(act)}", body=body)
        return result

    def dead_letters(
        self, *, cursor: str | None = None, limit: int | None = None, **filters: Any
    ) -> Page:
        """GET /v1/dead-letters: one page (filters ``trigger_id``, ``selector``, ``start``,
        ``end``, ``cause``, ``state``)."""
        start, end = filters.pop("start", None), filters.pop("end", None)
        params = {
            **filters,
            "from": None if start is None else _when(start),
            "to": None if end is None else _when(end),
            "cursor": cursor,
            "limit": limit,
        }
        return self._page("/v1/dead-letters", params)

    def dead_letters_all(self, **filters: Any) -> Iterator[JSON]:
        """Every dead letter the filters select, following the cursors."""

        def fetch(cursor: str | None) -> Page:
            return self.dead_letters(cursor=cursor, **filters)

        return self._every(fetch)

    def dead_letter(self, dlq_id: str) -> JSON:
        """GET /v1/dead-letters/{id}: one dead letter with its order."""
        result: JSON = self._json("GET", f"/v1/dead-letters/{_segment(dlq_id)}")
        return result

    def redrive(self, body: JSON) -> JSON:
        """POST /v1/redrives (``ids`` or filters, ``dry_run``, ``request_id``)."""
        result: JSON = self._json("POST", "/v1/redrives", body=body)
        return result
