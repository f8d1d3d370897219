"""The console over the in-memory API: the session cookie's flags, CSRF on every form, controls
by role with the API refusing forged requests, tenant scoping, problems as the API says them and
no stack trace, the security headers, the static files."""

from __future__ import annotations

import html
import re
from datetime import datetime, timedelta

import pytest
from fastapi.routing import APIRoute

from horae.api.verification import expected_answer
from horae.console.routes import router as console_router
from tests.unit.api.support import Api, cron, make_api


def signed_in(api: Api, tenant: str = "acme", *roles: str) -> str:
    """Signs the test client in through the login form; returns the session's CSRF token."""
    page = api.client.get("/console/login")
    nonce = re.search(r'name="nonce" value="([^"]+)"', page.text)
    assert nonce is not None
    token = api.token(tenant, roles or ("author",))
    done = api.client.post(
        "/console/login", data={"nonce": nonce[1], "token": token}, follow_redirects=False
    )
    assert done.status_code == 303, done.text
    home = api.client.get("/console/schedules")
    csrf = re.search(r'name="csrf" value="([^"]+)"', home.text)
    assert csrf is not None
    return csrf[1]


def seeded() -> Api:
    api = make_api()
    made = api.client.post("/v1/schedules", json=cron(), headers=api.headers("acme", "author"))
    assert made.status_code == 201
    return api


def text(response: object) -> str:
    return html.unescape(response.text)  # type: ignore[attr-defined]


def test_session_cookie_is_httponly_strict_and_secure_over_tls() -> None:
    api = seeded()
    signed_in(api)
    cookie = next(c for c in api.client.cookies.jar if c.name == "horae_console")
    assert cookie.path == "/console" and not cookie.secure
    assert cookie.has_nonstandard_attr("HttpOnly")
    login = api.client.get("/console/login")
    nonce = re.search(r'name="nonce" value="([^"]+)"', login.text)
    assert nonce is not None
    api.client.base_url = api.client.base_url.copy_with(scheme="https")
    done = api.client.post(
        "/console/login",
        data={"nonce": nonce[1], "token": api.token("acme", ["read"])},
        follow_redirects=False,
    )
    flags = done.headers["set-cookie"].lower()
    assert "httponly" in flags and "samesite=strict" in flags and "secure" in flags


def test_login_refuses_a_bad_token_and_a_form_without_its_nonce() -> None:
    api = seeded()
    page = api.client.get("/console/login")
    nonce = re.search(r'name="nonce" value="([^"]+)"', page.text)
    assert nonce is not None
    bad = api.client.post("/console/login", data={"nonce": nonce[1], "token": "nope"})
    assert bad.status_code == 401 and "Unauthorized" in bad.text
    forged = api.client.post(
        "/console/login", data={"nonce": "guess", "token": api.token("acme", ["author"])}
    )
    assert forged.status_code == 403 and "horae_console=" not in forged.headers.get(
        "set-cookie", ""
    )


def test_pages_need_a_session() -> None:
    api = seeded()
    for path in ("/console/schedules", "/console/schedules/nightly", "/console/morning"):
        got = api.client.get(path, follow_redirects=False)
        assert got.status_code == 303 and got.headers["location"].startswith("/console/login")


def test_every_post_needs_the_sessions_csrf_token() -> None:
    api = seeded()
    csrf = signed_in(api)
    for path, form in (
        ("/console/schedules/nightly/act", {"act": "pause"}),
        ("/console/new", {"trigger_id": "x", "expr": "* * * * *"}),
        ("/console/preview", {"expr": "* * * * *"}),
        ("/console/logout", {"bye": "1"}),
    ):
        for sent in ({}, {"csrf": "0" * 64}):
            got = api.client.post(path, data={**form, **sent}, follow_redirects=False)
            assert got.status_code == 403 and "CSRF" in got.text, (path, sent)
    assert api.backend.commands == []
    ok = api.client.post(
        "/console/schedules/nightly/act",
        data={"act": "pause", "csrf": csrf},
        follow_redirects=False,
    )
    assert ok.status_code == 303 and len(api.backend.commands) == 1


def test_read_only_sees_no_control_and_the_api_refuses_a_forged_act() -> None:
    api = seeded()
    csrf = signed_in(api, "acme", "read")
    page = api.client.get("/console/schedules/nightly")
    assert page.status_code == 200
    for control in ("confirm?act=", "New schedule"):
        assert control not in page.text
    produced = (len(api.backend.definitions), len(api.backend.commands))
    for act in ("pause", "resume", "run", "delete"):
        got = api.client.post("/console/schedules/nightly/act", data={"act": act, "csrf": csrf})
        assert got.status_code == 403 and "needs role 'author'" in text(got), act
    made = api.client.post(
        "/console/new", data={"csrf": csrf, "trigger_id": "x", "expr": "0 9 * * *"}
    )
    assert made.status_code == 403 and "needs role 'author'" in text(made)
    assert (len(api.backend.definitions), len(api.backend.commands)) == produced


def test_another_tenant_gets_404_by_url() -> None:
    api = seeded()
    csrf = signed_in(api, "globex", "author")
    assert "nightly" not in api.client.get("/console/schedules").text
    for path in ("", "/history", "/confirm?act=pause"):
        got = api.client.get(f"/console/schedules/nightly{path}")
        assert got.status_code == 404 and "trigger 'nightly'" in text(got), path
    got = api.client.post("/console/schedules/nightly/act", data={"act": "delete", "csrf": csrf})
    assert got.status_code == 404
    assert api.client.get("/console/last-runs?ids=nightly").text.count("none yet") == 1


def test_create_shows_the_apis_problem_naming_the_field() -> None:
    api = seeded()
    csrf = signed_in(api)
    form = {"csrf": csrf, "trigger_id": "made", "kind": "cron", "expr": "61 * * * *"}
    preview = api.client.post("/console/preview", data=form)
    assert preview.status_code == 200 and "recurrence.expr" in preview.text
    got = api.client.post("/console/new", data=form)
    assert got.status_code == 422 and "recurrence.expr" in got.text
    assert 'value="61 * * * *"' in got.text  # the form keeps what was typed
    good = {**form, "expr": "0 9 * * *", "zone": "Asia/Kathmandu", "target_kind": "event"}
    rows = api.client.post("/console/preview", data=good)
    assert rows.text.count("+05:45</td>") == 10
    saved = api.client.post("/console/new", data=good, follow_redirects=False)
    assert saved.status_code == 303 and saved.headers["location"].startswith(
        "/console/schedules/made?"
    )


def test_an_unexpected_error_shows_no_stack_trace(monkeypatch: pytest.MonkeyPatch) -> None:
    api = seeded()
    signed_in(api)

    def broken(*args: object, **kwargs: object) -> object:
        raise RuntimeError("secret internals")

    monkeypatch.setattr(api.backend, "lateness", broken)
    got = api.client.get("/console/morning")
    assert got.status_code == 500 and "secret internals" not in got.text
    assert "Traceback" not in got.text and "internal error" in got.text


def test_security_headers_and_static_files() -> None:
    api = seeded()
    signed_in(api)
    page = api.client.get("/console/schedules")
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert page.headers["x-frame-options"] == "DENY" and page.headers["cache-control"] == "no-store"
    htmx = api.client.get("/console/static/htmx.min.js")
    assert htmx.status_code == 200 and htmx.headers["content-type"].startswith("text/javascript")
    assert api.client.get("/console/static/htmx.LICENSE").status_code == 404
    assert api.client.get("/console/static/..%2Fsession.py").status_code == 404


def test_console_routes_stay_out_of_the_api_matrix() -> None:
    """The console's routes are plain routes (no OpenAPI entry, no bearer token of their own):
    every act they offer is an API route, whose roles tests/unit/api/test_matrix.py checks."""
    app = make_api().client.app
    included = [r for r in app.routes if type(r).__name__ == "_IncludedRouter"]  # type: ignore[attr-defined]
    mine = [i.original_router for i in included if i.original_router is console_router]
    console = [r for router in mine for r in router.routes]
    assert {r.path for r in console} >= {"/console/login", "/console/schedules/{trigger_id}"}
    assert not any(isinstance(r, APIRoute) for r in console)
    assert not any(p.startswith("/console") for p in app.openapi()["paths"])  # type: ignore[attr-defined]


def test_edit_shows_the_what_if_diff_and_saves_with_if_match() -> None:
    api = seeded()
    csrf = signed_in(api)
    page = api.client.get("/console/schedules/nightly/edit")
    assert page.status_code == 200 and 'value="0 9 * * *"' in page.text
    form = {"csrf": csrf, "version": "1", "kind": "cron", "expr": "0 10 * * *",
            "zone": "Europe/Berlin", "target_kind": "webhook", "labels": "team=ops",
            "url": "https://hooks.acme.example/x", "secret_ref": "acme-hook"}  # fmt: skip
    diff = api.client.post("/console/schedules/nightly/diff", data=form)
    assert "7 added</strong>" in diff.text and "7 removed</strong>" in diff.text
    saved = api.client.post("/console/schedules/nightly/edit", data=form, follow_redirects=False)
    assert saved.status_code == 303 and "Saved+version+2" in saved.headers["location"]
    stored = api.client.get("/v1/schedules/nightly", headers=api.headers("acme", "read")).json()
    assert stored["recurrence"]["expr"] == "0 10 * * *" and stored["labels"] == {"team": "ops"}
    assert stored["target"]["secret_refs"] == ["acme-hook"]  # fields the form has not: kept
    stale = api.client.post("/console/schedules/nightly/edit", data=form)
    assert stale.status_code == 412 and "stale version" in stale.text


def test_backfill_is_the_policy_roles_with_its_cost_first() -> None:
    api = seeded()
    csrf = signed_in(api, "acme", "author")
    assert "/backfill" not in api.client.get("/console/schedules/nightly").text
    window = {"csrf": csrf, "from": "2026-05-25T00:00:00Z", "to": "2026-06-01T00:00:00Z"}
    refused = api.client.post("/console/schedules/nightly/backfill", data=window)
    assert refused.status_code == 403 and "needs role 'policy'" in text(refused)
    csrf = signed_in(api, "acme", "policy")
    window["csrf"] = csrf
    cost = api.client.post("/console/schedules/nightly/backfill", data=window)
    confirm = re.search(r'name="confirm" value="([^"]+)"', cost.text)
    assert confirm is not None and "<strong>7 fires</strong>" in cost.text
    # acme's grant's dispatch rate (the default: 10/s), the fastest a backfill goes
    assert "at least 1 s at 10/s (your dispatch rate)" in text(cost)
    assert api.backend.commands == []
    done = api.client.post(
        "/console/schedules/nightly/backfill", data={**window, "confirm": confirm[1]}
    )
    assert "Backfill requested: 7 fires" in done.text and len(api.backend.commands) == 1


def test_platform_page_for_a_platform_token_only() -> None:
    api = seeded()
    csrf = signed_in(api, "acme", "author")
    refused = api.client.get("/console/platform")
    assert refused.status_code == 403 and "needs role 'platform'" in text(refused)
    forged = api.client.post(
        "/console/platform/acme/suspension", data={"csrf": csrf, "suspend": "1"}
    )
    assert forged.status_code == 403 and api.backend.commands == []
    page = api.client.get("/console/login")
    nonce = re.search(r'name="nonce" value="([^"]+)"', page.text)
    assert nonce is not None
    token = api.token("platform", ["platform"])
    done = api.client.post("/console/login", data={"nonce": nonce[1], "token": token})
    assert done.url.path == "/console/platform" and 'data-tenant="globex"' in done.text
    acme = text(done).split("acme", 1)[1]  # its row: every field of the grant, defaults filled
    assert "172800 s" in acme and "Sends at once" in text(done)
    assert '<td class="num">64</td>' in acme.split("</tr>", 1)[0]
    csrf = re.search(r'name="csrf" value="([^"]+)"', done.text)
    assert csrf is not None
    confirm = api.client.get("/console/platform/acme/confirm?suspend=1")
    assert "Suspend tenant acme?" in confirm.text
    made = api.client.post(
        "/console/platform/acme/suspension",
        data={"csrf": csrf[1], "suspend": "1", "reason": "unpaid"},
    )
    assert "Suspension of acme requested" in made.text and len(api.backend.commands) == 1


def test_verify_a_webhook_host_through_the_api() -> None:
    api = seeded()
    csrf = signed_in(api)
    made = api.client.post(
        "/console/targets/verify", data={"csrf": csrf, "url": "https://new.acme.example/x"}
    )
    assert made.status_code == 201
    url = re.search(r"<dt>Serve at</dt><dd><code>([^<]+)</code>", made.text)
    assert url is not None
    challenge = url[1].rsplit("/", 1)[1]
    answer = expected_answer("whsec_a", "acme", "new.acme.example", challenge)
    failed = api.client.post(
        "/console/targets/check", data={"csrf": csrf, "host": "new.acme.example"}
    )
    assert "<strong>failed</strong>" in failed.text
    api.served[html.unescape(url[1])] = (200, answer.encode())
    ok = api.client.post("/console/targets/check", data={"csrf": csrf, "host": "new.acme.example"})
    assert "<strong>verified</strong>" in ok.text
    csrf = signed_in(api, "acme", "read")
    refused = api.client.post(
        "/console/targets/verify", data={"csrf": csrf, "url": "https://x.acme.example/"}
    )
    assert refused.status_code == 403 and "needs role 'author'" in text(refused)


def test_no_page_shows_text_a_link_made_up() -> None:
    api = seeded()
    csrf = signed_in(api)
    forged = api.client.get("/console/schedules/nightly?done=Your+token+leaked,+visit+evil&sig=0")
    assert "evil" not in forged.text
    login = api.client.get("/console/login?why=Paste+your+token+at+evil")
    assert "evil" not in login.text
    done = api.client.post(
        "/console/schedules/nightly/act", data={"act": "run", "csrf": csrf}, follow_redirects=True
    )
    assert "Run now: requested (command" in done.text


def test_the_cron_builder_is_on_both_forms_and_never_submitted() -> None:
    api = seeded()
    signed_in(api, "acme", "author", "read")
    for path in ("/console/new", "/console/schedules/nightly/edit"):
        page = api.client.get(path).text
        builder = re.search(r'<fieldset id="cron-builder".*?</fieldset>', page, re.S)
        assert builder is not None, path
        assert " name=" not in builder[0]  # only the expression it writes is submitted
        ids = re.findall(r'<(?:input|select) id="([^"]+)"', builder[0])
        assert len(ids) == 11 and all(f'<label for="{i}">' in builder[0] for i in ids), ids


def test_the_default_window_ends_after_now() -> None:
    """``to`` is exclusive: a window ending at now rounded down would leave out a fire due
    earlier in the same second (the morning after a fresh schedule showed "nothing was due")."""
    api = seeded()
    signed_in(api)
    api.clock.now = api.clock.now.replace(microsecond=0) + timedelta(milliseconds=400)
    page = api.client.get("/console/morning")
    until = re.search(r'name="to" value="([^"]+)"', page.text)
    assert until is not None
    assert datetime.fromisoformat(until[1].replace("Z", "+00:00")) > api.clock.now
