"""The API client over a fake transport: what it sends (bearer token, If-Match, query) and how
answers map: JSON on 2xx, the version from the ETag, cursors followed, every error a typed
:class:`ApiError` carrying the problem document, no answer :class:`ApiUnreachable`."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime

import httpx
import pytest

from horae.api.client import ApiClient, ApiError, ApiUnreachable, FieldError, Problem

Handler = Callable[[httpx.Request], httpx.Response]


def client(handler: Handler, token: str | None = "tok") -> ApiClient:
    http = httpx.Client(base_url="http://api.test", transport=httpx.MockTransport(handler))
    return ApiClient("ignored", token, http=http)


def test_create_sends_the_bearer_token_and_reads_the_version_from_the_etag() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        body = {**json.loads(request.content), "version": 99}
        return httpx.Response(201, json=body, headers={"ETag": '"1"'})

    stored = client(handler).create({"trigger_id": "a"})
    assert stored.version == 1 and stored.trigger["trigger_id"] == "a"
    assert seen[0].method == "POST" and seen[0].url.path == "/v1/schedules"
    assert seen[0].headers["authorization"] == "Bearer tok"


def test_without_a_token_no_authorization_header_is_sent() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        assert "authorization" not in request.headers
        return httpx.Response(200, json={"version": 5})

    assert client(handler, token=None).get("a").version == 5  # no ETag: the body's version


def test_amend_sends_if_match_and_ids_are_one_path_segment() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.headers["if-match"] == '"4"'
        assert request.url.raw_path == b"/v1/schedules/a%2Fb"
        return httpx.Response(200, json={"version": 5}, headers={"ETag": 'W/"5"'})

    assert client(handler).amend("a/b", {}, version=4).version == 5


def test_listing_follows_cursors_and_sends_filters() -> None:
    pages = {None: (["a", "b"], "c1"), "c1": (["c"], None)}
    queries: list[dict[str, str]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        queries.append(dict(request.url.params))
        ids, cursor = pages[request.url.params.get("cursor")]
        items = [{"trigger_id": i} for i in ids]
        return httpx.Response(200, json={"items": items, "next_cursor": cursor})

    got = [t["trigger_id"] for t in client(handler).list_all(label="team:ops", state="live")]
    assert got == ["a", "b", "c"]
    assert queries == [
        {"label": "team:ops", "state": "live"},
        {"label": "team:ops", "state": "live", "cursor": "c1"},
    ]


def test_history_window_is_sent_as_rfc3339_utc() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.params["from"] == "2026-01-01T00:00:00Z"
        assert request.url.params["to"] == "2026-01-02T00:00:00Z"
        return httpx.Response(200, json={"items": [{"fire_key": "k"}], "next_cursor": None})

    start = datetime(2026, 1, 1, tzinfo=UTC)
    page = client(handler).history("a", start=start, end="2026-01-02T00:00:00Z")
    assert page.items == [{"fire_key": "k"}] and page.next_cursor is None


def test_backfill_sends_the_confirm_token_only_when_given() -> None:
    bodies: list[dict[str, str]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        if "confirm" in bodies[-1]:
            return httpx.Response(202, json={"command_id": "c"})
        return httpx.Response(200, json={"fires": 3, "confirm": "tok3"})

    api = client(handler)
    cost = api.backfill("a", "2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z")
    assert cost == {"fires": 3, "confirm": "tok3"}
    assert api.backfill("a", "2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z", "tok3") == {
        "command_id": "c"
    }
    assert "confirm" not in bodies[0] and bodies[1]["confirm"] == "tok3"


def test_a_problem_document_becomes_a_typed_error_with_its_field_errors() -> None:
    problem = {
        "type": "https://horae.dev/problems/invalid",
        "title": "Invalid definition",
        "status": 422,
        "detail": "1 field is invalid",
        "instance": "/v1/schedules",
        "errors": [{"field": "recurrence.expr", "message": "not a cron expression"}],
    }

    def handler(request: httpx.Request) -> httpx.Response:
        headers = {"content-type": "application/problem+json"}
        return httpx.Response(422, content=json.dumps(problem), headers=headers)

    with pytest.raises(ApiError) as caught:
        client(handler).create({})
    assert caught.value.status == 422
    assert caught.value.problem == Problem(
        status=422,
        title="Invalid definition",
        type="https://horae.dev/problems/invalid",
        detail="1 field is invalid",
        instance="/v1/schedules",
        errors=(FieldError("recurrence.expr", "not a cron expression"),),
    )
    assert caught.value.problem.lines() == [
        "Invalid definition (422): 1 field is invalid",
        "  recurrence.expr: not a cron expression",
    ]
    single = Problem(422, "Invalid", detail="a: b", errors=(FieldError("a", "b"),))
    assert single.lines() == ["Invalid (422): a: b"]  # the detail says it once


def test_an_answer_that_is_not_a_problem_keeps_status_and_reason() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(502, text="<html>bad gateway</html>")

    with pytest.raises(ApiError) as caught:
        client(handler).get("a")
    assert caught.value.problem == Problem(
        status=502, title="Bad Gateway", detail="<html>bad gateway</html>"
    )


def test_quota_carries_retry_after() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        body = {"type": "about:blank", "title": "Too Many Requests", "status": 429}
        return httpx.Response(429, json=body, headers={"Retry-After": "7"})

    with pytest.raises(ApiError) as caught:
        client(handler).pause("a")
    assert caught.value.status == 429 and caught.value.retry_after_s == 7.0


def test_no_answer_is_unreachable() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    with pytest.raises(ApiUnreachable, match="connection refused"):
        client(handler).run("a")


def test_delete_takes_an_empty_answer() -> None:
    methods: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        methods.append(request.method)
        return httpx.Response(204)

    client(handler).delete("a")
    assert methods == ["DELETE"]
