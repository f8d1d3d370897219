"""The console's routes: server-rendered pages under ``/console`` of the API's own app.

Contract:

- **Every act and read goes through the API.** A page or form calls the API's ``/v1`` routes
  in-process with the session's token (:mod:`horae.console.inproc`): the API authenticates, limits,
  checks the role and the tenant, validates, and its problem+json is what the page shows. The reads
  that the API has no route for (a page's last runs, the morning-after list of what did not run, a
  schedule's earlier versions: :mod:`horae.console.versions`) read the API's own
  :class:`~horae.api.ports.HistorySource` port, and a webhook host's verification status the API's
  own verification store (:func:`target_status`), for the token's tenant, after the API's
  :class:`~horae.api.auth.Verifier` verified the token and the ``read`` role was checked with
  :meth:`~horae.api.auth.Principal.may`, as the API's routes do.
- **A control is shown only to a token whose roles allow its act** (``may``), and a request for
  it from a token that may not is refused by the API all the same (403, shown as a problem).
- **Every POST carries the session's CSRF token** (:mod:`horae.console.session`), checked before
  anything else; a form without it answers 403 and does nothing.
- **No stack trace reaches the browser**: an unexpected error is logged and shown as "internal
  error". Security headers on every page: a strict Content-Security-Policy (scripts and styles
  from ``/console/static`` only), no framing, no referrer, no caching.

Routes are plain Starlette routes on an :class:`~fastapi.APIRouter` (``app.include_router``):
they are not part of the API's OpenAPI document and take no bearer token of their own.
"""

from __future__ import annotations

import functools
import importlib.resources
import logging
import math
import re
import zoneinfo
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, quote, urlencode

from fastapi import APIRouter
from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from horae.api import verification
from horae.api.auth import Principal, TokenError
from horae.api.schemas import REPORTED
from horae.console import session, versions, words
from horae.console.inproc import Api, Problem
from horae.contracts.events import Role
from horae.contracts.topics import tenant_token
from horae.delivery.port import HandOver
from horae.delivery.table import DELIVERERS, named

log = logging.getLogger("horae.console")
router = APIRouter(include_in_schema=False)
STATIC = {
    "htmx.min.js": "text/javascript",
    "console.js": "text/javascript",
    "console.css": "text/css",
}
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
    "img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; "
    "base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
PAGE_SIZE = 50
#: the published p99 lateness goals (docs/performance.md), by how a kind is handed over: an
#: event target's decision (the planner writes it), a webhook's delivery (the dispatcher's call)
BUDGET_MS = {
    HandOver.TOPIC: (100.0, "decision lateness p99 ≤ 100 ms"),
    HandOver.DISPATCH: (250.0, "delivery lateness p99 ≤ 250 ms"),
}
#: fire states and statuses that mean "did not run as planned" (the morning-after view)
NOT_RUN = [
    "skipped",
    "expired",
    "paused",
    "replaced",
    "rejected",
    "shed",
    "failed",
    "exhausted",
    "cancelled",
    "dispatching",
    "undecided",
]
ACTS = {
    "pause": (
        "Pause",
        "post",
        "pause",
        "It stops firing until resumed; instants due meanwhile "
        "are decided by its misfire policy when it resumes.",
    ),
    "resume": ("Resume", "post", "resume", "It fires again from its next instant."),
    "run": (
        "Run now",
        "post",
        "run",
        "One manual fire now, on the manual lane, besides its schedule.",
    ),
    "delete": (
        "Delete",
        "delete",
        "",
        "A new version with state deleted: it never fires again. Its history stays.",
    ),
}
#: what the login page may say (the link names one; never text taken from the URL)
LOGIN_MESSAGES = {
    "in": "Sign in with an API token.",
    "expired": "The session's token is no longer valid (expired, or its key rotated): sign in "
    "again.",
    "out": "Signed out.",
}
ID = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")

templates = Environment(
    loader=PackageLoader("horae.console", "templates"),
    autoescape=select_autoescape(["html"]),
    trim_blocks=True,
    lstrip_blocks=True,
)


def _local(value: str | None, zone: str | None) -> str:
    """An RFC 3339 UTC instant in ``zone``'s local time."""
    if not value:
        return ""
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        local = moment.astimezone(zoneinfo.ZoneInfo(zone or "UTC"))
    except (ValueError, zoneinfo.ZoneInfoNotFoundError):
        return value
    return local.strftime("%Y-%m-%d %H:%M:%S %Z")


def _ago(value: str | None) -> str:
    if not value:
        return ""
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return ""
    seconds = (moment - datetime.now(UTC)).total_seconds()
    size = abs(seconds)
    for unit, n in (("d", 86_400), ("h", 3600), ("min", 60)):
        if size >= n:
            text = f"{size / n:.0f} {unit}"
            break
    else:
        text = f"{size:.0f} s"
    return f"in {text}" if seconds >= 0 else f"{text} ago"


def now_of(request: Request) -> datetime:
    """The API's clock (the service's: a test's virtual clock too)."""
    now: datetime = request.app.state.service.clock()
    return now.astimezone(UTC)


def _ms(value: Any) -> str:
    if value is None:
        return "—"
    v = float(value)
    return f"{v / 1000:.2f} s" if abs(v) >= 1000 else f"{v:.0f} ms"


templates.filters.update(
    local=_local,
    ago=_ago,
    ms=_ms,
    words=words.schedule_words,
    expression=words.expression,
    target=words.target_words,
)


@functools.cache
def zones() -> list[str]:
    return sorted(z for z in zoneinfo.available_timezones() if "/" in z or z == "UTC")


def render(
    request: Request,
    name: str,
    status: int = 200,
    who: Principal | None = None,
    **context: Any,
) -> HTMLResponse:
    text = templates.get_template(name).render(
        request=request,
        who=who,
        csrf=session.csrf_token(request),
        may_author=bool(who and who.may(Role.AUTHOR)),
        may_policy=bool(who and who.may(Role.POLICY)),
        may_platform=bool(who and who.may(Role.PLATFORM)),
        quote=quote,
        **context,
    )
    return HTMLResponse(text, status_code=status, headers=HEADERS)


def problem_page(request: Request, who: Principal | None, p: Problem) -> Response:
    if p.status == 401:
        return _to_login(request, "expired")
    return render(request, "problem.html", p.status, who, problem=p)


def _to_login(request: Request, why: str = "") -> Response:
    target = "/console/login" + (f"?{urlencode({'why': why})}" if why else "")
    response = RedirectResponse(target, status_code=303, headers=HEADERS)
    session.clear_session(response)
    return response


Handler = Callable[[Request, Principal, Api], Awaitable[Response]]


def page(path: str, methods: tuple[str, ...] = ("GET",)) -> Callable[[Handler], Handler]:
    """A console route for a signed-in session: the session's principal (else the login page), a
    checked CSRF token on POST, problems shown as the API said them, nothing else shown of an
    unexpected error."""

    def wrap(handler: Handler) -> Handler:
        async def endpoint(request: Request) -> Response:
            who = session.principal(request)
            token = session.token_of(request)
            if who is None or token is None:
                if request.headers.get("hx-request"):
                    return Response(status_code=401, headers={"HX-Redirect": "/console/login"})
                return _to_login(request, "in" if token is None else "expired")
            try:
                if request.method == "POST":
                    form = await _form(request)
                    if not session.csrf_ok(request, form.get("csrf")):
                        raise Problem(403, "Forbidden", "the form's CSRF token is missing or stale")
                    request.state.form = form
                return await handler(request, who, Api(request, token))
            except Problem as p:
                return problem_page(request, who, p)
            except Exception:
                log.exception("console error on %s %s", request.method, request.url.path)
                return render(
                    request,
                    "problem.html",
                    500,
                    who,
                    problem=Problem(500, "Internal error", "internal error"),
                )

        router.add_route(path, endpoint, methods=list(methods))
        return handler

    return wrap


async def _form(request: Request) -> dict[str, str]:
    media = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if media != "application/x-www-form-urlencoded":
        raise Problem(415, "Unsupported media type", "expected a form")
    body = (await request.body()).decode("utf-8", errors="replace")
    return {k: v[-1] for k, v in parse_qs(body, keep_blank_values=True).items()}


def _redirect(url: str) -> Response:
    return RedirectResponse(url, status_code=303, headers=HEADERS)


def _id(value: str) -> str:
    if not ID.match(value):
        raise Problem(404, "Not found", f"trigger {value!r}")
    return value


# --- static, login -------------------------------------------------------------------------
async def static(request: Request) -> Response:
    name = request.path_params["name"]
    media = STATIC.get(name)
    if media is None:
        return Response("not found", status_code=404, media_type="text/plain")
    body = importlib.resources.files("horae.console").joinpath("static", name).read_bytes()
    headers = {"Cache-Control": "public, max-age=3600", "X-Content-Type-Options": "nosniff"}
    return Response(body, media_type=media, headers=headers)


router.add_route("/console/static/{name}", static, methods=["GET"])


async def home(request: Request) -> Response:
    return _redirect("/console/schedules")


router.add_route("/console", home, methods=["GET"])


async def login_form(request: Request) -> Response:
    nonce = session.login_nonce(request)
    why = LOGIN_MESSAGES.get(request.query_params.get("why", ""), "")
    response = render(request, "login.html", nonce=nonce, why=why)
    session.set_login_nonce(response, request, nonce)
    return response


async def login(request: Request) -> Response:
    try:
        form = await _form(request)
    except Problem as p:
        return render(request, "problem.html", p.status, None, problem=p)
    nonce = session.login_nonce(request)
    if not session.login_nonce_ok(request, form.get("nonce")):
        response = render(
            request, "login.html", 403, nonce=nonce, why="the form was stale; sign in again"
        )
        session.set_login_nonce(response, request, nonce)
        return response
    token = form.get("token", "").strip()
    try:
        who = session.check_token(request, token)
    except TokenError as exc:
        response = render(request, "login.html", 401, nonce=nonce, why=f"Unauthorized: {exc}")
        session.set_login_nonce(response, request, nonce)
        return response
    home = "/console/schedules" if who.may(Role.READ) else "/console/platform"
    done = _redirect(home)
    session.set_session(done, request, token)
    return done


router.add_route("/console/login", login_form, methods=["GET"])
router.add_route("/console/login", login, methods=["POST"])


@page("/console/logout", ("POST",))
async def logout(request: Request, who: Principal, api: Api) -> Response:
    response = _redirect("/console/login?why=out")
    session.clear_session(response)
    return response


# --- schedules -----------------------------------------------------------------------------
def _matches(item: dict[str, Any], text: str) -> bool:
    hay = " ".join(
        [
            item.get("trigger_id", ""),
            item.get("description") or "",
            words.expression(item.get("recurrence") or {}),
            words.target_words(item.get("target") or {}),
            " ".join(f"{k}:{v}" for k, v in (item.get("labels") or {}).items()),
        ]
    ).lower()
    return text.lower() in hay


@page("/console/schedules")
async def schedules(request: Request, who: Principal, api: Api) -> Response:
    q = request.query_params
    label, state, text = q.get("label", ""), q.get("state", ""), q.get("q", "").strip()
    cursor = q.get("cursor") or None
    items: list[dict[str, Any]] = []
    scanned = 0
    while True:  # a text filter reads on through the API's pages until one page is full
        got = await api.get(
            "/v1/schedules",
            limit=PAGE_SIZE if not text else 1000,
            cursor=cursor,
            label=label or None,
            state=state or None,
        )
        page_items = got["items"]
        cursor = got["next_cursor"]
        scanned += len(page_items)
        if not text:
            items = page_items
            break
        for item in page_items:
            if _matches(item, text):
                items.append(item)
        if cursor is None or len(items) >= PAGE_SIZE or scanned >= 10_000:
            break
    here = {"label": label, "state": state, "q": text}
    more = f"/console/schedules?{urlencode({**here, 'cursor': cursor})}" if cursor else None
    return render(
        request,
        "schedules.html",
        who=who,
        items=items,
        filters=here,
        more=more,
        states=["live", "paused", "suspended", "completed", "deleted"],
    )


@page("/console/last-runs")
async def last_runs(request: Request, who: Principal, api: Api) -> Response:
    """The last run and its outcome of each listed trigger (a fragment swapped into the table)."""
    if not who.may(Role.READ):
        raise Problem(403, "Forbidden", "needs role 'read'")
    ids = [i for i in request.query_params.get("ids", "").split(",") if ID.match(i)][:PAGE_SIZE]
    history = request.app.state.service.history
    # one statement for the page's rows (an index step per trigger)
    last = await run_in_threadpool(history.last_fires, who.tenant, ids, now_of(request))
    found = {i: last.get(i) for i in ids}
    rows: dict[str, dict[str, Any] | None] = {}
    for trigger_id, fire in found.items():
        if fire is None:
            rows[trigger_id] = None
            continue
        at = fire.get("scheduled_at")
        rows[trigger_id] = {
            "at": at.astimezone(UTC).isoformat().replace("+00:00", "Z") if at else None,
            "status": fire.get("status") or fire.get("state"),
            "cause": fire.get("cause"),
            "lateness_ms": fire.get("lateness_ms"),
        }
    return render(request, "_last_runs.html", who=who, rows=rows)


@page("/console/schedules/{trigger_id}")
async def schedule(request: Request, who: Principal, api: Api) -> Response:
    trigger_id = _id(request.path_params["trigger_id"])
    trigger = await api.get(f"/v1/schedules/{trigger_id}")
    upcoming = await api.get(f"/v1/schedules/{trigger_id}/next", n=10)
    now = now_of(request)
    audit = await api.get(
        "/v1/audit",
        **{"from": (now - timedelta(days=30)).isoformat(), "to": now.isoformat(), "limit": 1000},
    )
    acted = [e for e in audit["items"] if e.get("trigger_id") == trigger_id]
    kept = None
    if who.may(Role.READ):  # as the API's routes check; the API answered the reads above
        history_ = request.app.state.service.history
        kept = await run_in_threadpool(versions.versions, history_, who.tenant, trigger_id)
    done = session.flashed(request)
    return render(
        request,
        "schedule.html",
        who=who,
        t=trigger,
        upcoming=upcoming,
        policies=words.policy_words(trigger),
        versions=kept,
        acted=acted,
        done=done,
        acts=ACTS,
    )


@page("/console/schedules/{trigger_id}/confirm")
async def confirm(request: Request, who: Principal, api: Api) -> Response:
    trigger_id = _id(request.path_params["trigger_id"])
    act = request.query_params.get("act", "")
    if act not in ACTS:
        raise Problem(404, "Not found", f"no act {act!r}")
    trigger = await api.get(f"/v1/schedules/{trigger_id}")
    return render(
        request,
        "confirm.html",
        who=who,
        t=trigger,
        act=act,
        label=ACTS[act][0],
        explain=ACTS[act][3],
    )


@page("/console/schedules/{trigger_id}/act", ("POST",))
async def act(request: Request, who: Principal, api: Api) -> Response:
    trigger_id = _id(request.path_params["trigger_id"])
    form: dict[str, str] = request.state.form
    name = form.get("act", "")
    if name not in ACTS:
        raise Problem(422, "Unprocessable content", f"no act {name!r}")
    label, method, tail, _ = ACTS[name]
    path = f"/v1/schedules/{trigger_id}" + (f"/{tail}" if tail else "")
    answer = await api.send(method.upper(), path)
    if name == "delete":
        return _redirect(f"/console/schedules?{urlencode({'q': ''})}")
    said = f"{label}: requested"
    if isinstance(answer, dict) and answer.get("command_id"):
        said += f" (command {answer['command_id']}"
        said += f", fire {answer['fire_key']})" if answer.get("fire_key") else ")"
    return _redirect(f"/console/schedules/{trigger_id}?{session.flash(request, said)}")


# --- history -------------------------------------------------------------------------------
def _window(request: Request, back: timedelta, ahead: timedelta) -> tuple[str, str]:
    q = request.query_params
    now = now_of(request)
    floor = now.replace(microsecond=0)
    # ``to`` is exclusive: rounded up, a fire due earlier in this second is in the window
    ceil = floor if floor == now else floor + timedelta(seconds=1)
    start = q.get("from") or (floor - back).isoformat().replace("+00:00", "Z")
    end = q.get("to") or (ceil + ahead).isoformat().replace("+00:00", "Z")
    return start, end


@page("/console/schedules/{trigger_id}/history")
async def history(request: Request, who: Principal, api: Api) -> Response:
    trigger_id = _id(request.path_params["trigger_id"])
    start, end = _window(request, timedelta(days=1), timedelta(hours=1))
    state = request.query_params.get("state", "")
    cursor = request.query_params.get("cursor") or None
    trigger = await api.get(f"/v1/schedules/{trigger_id}")
    got = await api.get(
        f"/v1/schedules/{trigger_id}/history",
        **{"from": start, "to": end},
        state=state or None,
        cursor=cursor,
        limit=100,
    )
    here = {"from": start, "to": end, "state": state}
    cursor = got["next_cursor"]
    more = f"?{urlencode({**here, 'cursor': cursor})}" if cursor else None
    return render(
        request,
        "history.html",
        who=who,
        t=trigger,
        items=got["items"],
        window=here,
        more=more,
        summary=f"/console/schedules/{trigger_id}/lateness-summary?"
        + urlencode({"from": start, "to": end}),
    )


@page("/console/schedules/{trigger_id}/lateness-summary")
async def lateness_summary(request: Request, who: Principal, api: Api) -> Response:
    """The lateness of a history's window, a fragment loaded after the page."""
    trigger_id = _id(request.path_params["trigger_id"])
    q = request.query_params
    window = {"from": q.get("from") or None, "to": q.get("to") or None}
    lateness = await api.get(f"/v1/schedules/{trigger_id}/lateness", **window)
    return render(request, "_lateness.html", who=who, lateness=lateness)


@page("/console/fires/{fire_key:path}")
async def fire(request: Request, who: Principal, api: Api) -> Response:
    key = request.path_params["fire_key"]
    story = await api.get(f"/v1/fires/{quote(key, safe='')}")
    return render(request, "fire.html", who=who, story=story)


@page("/console/morning")
async def morning(request: Request, who: Principal, api: Api) -> Response:
    """What ran, what did not and why, and what is about to run, grouped by trigger."""
    if not who.may(Role.READ):
        raise Problem(403, "Forbidden", "needs role 'read'")
    start, end = _window(request, timedelta(hours=12), timedelta(0))
    sort = request.query_params.get("sort", "damage")
    lateness = await api.get("/v1/lateness", **{"from": start, "to": end})
    rows = [r for r in lateness["triggers"] if r.get("trigger_id")][:200]
    history = request.app.state.service.history
    since = datetime.fromisoformat(start.replace("Z", "+00:00"))
    until = datetime.fromisoformat(end.replace("Z", "+00:00"))

    def read() -> dict[str, list[dict[str, Any]]]:
        return {
            r["trigger_id"]: history.fires(
                who.tenant, r["trigger_id"], since, until, NOT_RUN, 100, None
            ).items
            for r in rows
        }

    missed = await run_in_threadpool(read)
    groups = []
    for r in rows:
        bad = missed.get(r["trigger_id"], [])
        causes: dict[str, int] = {}
        for f in bad:
            status, cause = f"{f.get('status') or f.get('state')}", f.get("cause") or ""
            why = cause if cause.startswith(status) else f"{status} ({cause})" if cause else status
            causes[why] = causes.get(why, 0) + 1
        groups.append(
            {**r, "ran": r["fires"], "not_run": bad, "causes": causes, "damage": len(bad)}
        )
    if sort == "id":
        groups.sort(key=lambda g: g["trigger_id"])
    else:
        groups.sort(key=lambda g: (-g["damage"], g["trigger_id"]))
    listing = await api.get("/v1/schedules", limit=1000, state="live")
    soon = now_of(request) + timedelta(hours=1)
    upcoming = sorted(
        (
            (i["next_instants"][0], i)
            for i in listing["items"]
            if i.get("next_instants")
            and datetime.fromisoformat(i["next_instants"][0].replace("Z", "+00:00")) <= soon
        ),
        key=lambda p: p[0],
    )[:30]
    return render(
        request,
        "morning.html",
        who=who,
        groups=groups,
        summary=lateness["summary"],
        window={"from": start, "to": end},
        upcoming=upcoming,
        sort=sort,
    )


# --- create --------------------------------------------------------------------------------
def _labels(text: str) -> dict[str, str]:
    out = {}
    for part in text.split(","):
        k, sep, v = part.partition("=" if "=" in part else ":")
        if k.strip() and sep:
            out[k.strip()] = v.strip()
    return out


def definition(form: dict[str, str], tenant: str) -> dict[str, Any]:
    """The TriggerIn JSON of the create form (fields left empty keep the API's defaults)."""
    kind = form.get("kind", "cron")
    recurrence: dict[str, Any] = {"kind": kind, "zone": form.get("zone") or "UTC"}
    if kind == "every":
        recurrence["interval_s"] = _int(form.get("interval_s"), "recurrence.interval_s")
    else:
        recurrence["expr"] = form.get("expr", "")
    for name in ("dst_gap", "dst_repeat"):
        if form.get(name):
            recurrence[name] = form[name]
    chosen = named(form.get("target_kind") or DEFAULTS["target_kind"])
    if chosen is None:
        message = "expected one of " + "|".join(k.value for k in DELIVERERS)
        raise Problem(
            422,
            "Unprocessable content",
            f"target.kind: {message}",
            [{"field": "target.kind", "message": message}],
        )
    target = chosen.form(form, tenant)
    policies: dict[str, Any] = {}
    for name in ("misfire", "overlap"):
        if form.get(name):
            policies[name] = form[name]
    for name in ("jitter_s", "misfire_grace_s"):
        if form.get(name):
            policies[name] = _int(form[name], f"policies.{name}")
    body: dict[str, Any] = {
        "trigger_id": form.get("trigger_id") or "preview",
        "recurrence": recurrence,
        "target": target,
        "policies": policies,
    }
    if form.get("description"):
        body["description"] = form["description"]
    if form.get("labels"):
        body["labels"] = _labels(form["labels"])
    if form.get("state") == "paused":
        body["state"] = "paused"
    return body


def _int(value: str | None, field: str) -> int:
    try:
        number = int((value or "").strip())
    except ValueError:
        raise Problem(
            422,
            "Unprocessable content",
            f"{field}: expected a whole number",
            [{"field": field, "message": "expected a whole number"}],
        ) from None
    return number


DEFAULTS = {
    "kind": "cron",
    "expr": "0 9 * * 1-5",
    "zone": "UTC",
    "target_kind": "event",
    "misfire": "fire_once",
    "overlap": "allow",
    "jitter_s": "0",
    "misfire_grace_s": "60",
    "dst_gap": "shift",
    "dst_repeat": "first",
}


@page("/console/new")
async def new(request: Request, who: Principal, api: Api) -> Response:
    form = {**DEFAULTS, "topic": f"events.{tenant_token(who.tenant)}"}
    return render(
        request, "create.html", who=who, form=form, **await _form_context(request, who, None)
    )


@page("/console/preview", ("POST",))
async def preview(request: Request, who: Principal, api: Api) -> Response:
    """The next instants of the form as it is (the API's dry-run), a fragment."""
    form: dict[str, str] = request.state.form
    try:
        body = definition(form, who.tenant)
        rows = await api.send("POST", "/v1/dry-run?n=10", body)
        problem = None
    except Problem as p:
        rows, problem = [], p
    return render(
        request,
        "_preview.html",
        who=who,
        rows=rows,
        problem=problem,
        zone=form.get("zone") or "UTC",
    )


@page("/console/new", ("POST",))
async def create(request: Request, who: Principal, api: Api) -> Response:
    form: dict[str, str] = request.state.form
    try:
        body = definition(form, who.tenant)
        body["trigger_id"] = form.get("trigger_id", "")
        made = await api.send("POST", "/v1/schedules", body)
    except Problem as p:
        if p.status in (401,):
            raise
        return render(
            request,
            "create.html",
            p.status,
            who,
            form={**DEFAULTS, **form},
            problem=p,
            **await _form_context(request, who, form.get("url")),
        )
    said = f"Created version {made['version']}"
    return _redirect(f"/console/schedules/{made['trigger_id']}?{session.flash(request, said)}")


# --- edit, backfill ------------------------------------------------------------------------
#: TriggerOut fields the API fills (an amend sending one is refused)
FILLED = REPORTED


def form_of(trigger: dict[str, Any]) -> dict[str, str]:
    """The edit form's fields from a TriggerOut."""
    r, t, p = trigger["recurrence"], trigger["target"], trigger.get("policies") or {}
    return {
        "trigger_id": trigger["trigger_id"],
        "description": trigger.get("description") or "",
        "labels": ", ".join(f"{k}={v}" for k, v in (trigger.get("labels") or {}).items()),
        "kind": r["kind"],
        "expr": r.get("expr") or "",
        "interval_s": str(r.get("interval_s") or ""),
        "zone": r.get("zone") or "UTC",
        "dst_gap": r.get("dst_gap") or "shift",
        "dst_repeat": r.get("dst_repeat") or "first",
        "target_kind": t["kind"],
        "topic": t.get("topic") or "",
        "url": t.get("url") or "",
        "secret_ref": (t.get("secret_refs") or [""])[0],
        "misfire": str(p.get("misfire", "fire_once")),
        "overlap": str(p.get("overlap", "allow")),
        "jitter_s": str(p.get("jitter_s", 0)),
        "misfire_grace_s": str(p.get("misfire_grace_s", 60)),
    }


def amended(trigger: dict[str, Any], form: dict[str, str], tenant: str) -> dict[str, Any]:
    """The current definition with the form's fields changed (every other field kept)."""
    edited = definition(form, tenant)
    body = {k: v for k, v in trigger.items() if k not in FILLED}
    recurrence = dict(trigger["recurrence"])
    if recurrence.get("kind") != edited["recurrence"]["kind"]:
        for name in ("expr", "interval_s", "anchor", "instants"):
            recurrence.pop(name, None)
    recurrence.update(edited["recurrence"])
    target = dict(trigger["target"])
    if target.get("kind") != edited["target"]["kind"]:
        target = edited["target"]
    else:
        target.update(edited["target"])
    body["recurrence"], body["target"] = recurrence, target
    body["policies"] = {**(trigger.get("policies") or {}), **edited["policies"]}
    body["labels"] = edited.get("labels", {})
    body.pop("description", None)
    if edited.get("description"):
        body["description"] = edited["description"]
    return body


async def _form_context(request: Request, who: Principal, url: str | None) -> dict[str, Any]:
    """What the create and edit forms show beside their fields: the zones, the policies'
    meanings, the webhook URL's verification status (:func:`target_status`)."""
    return {
        "zones": zones(),
        "misfire": words.MISFIRE,
        "overlap": words.OVERLAP,
        "dst_gap": words.DST_GAP,
        "dst_repeat": words.DST_REPEAT,
        "ts": await target_status(request, who, url),
        "target_kinds": target_kinds(),
    }


def target_kinds() -> list[tuple[str, str]]:
    """The create and edit forms' target kinds, ``(name, label)`` by label: every row of the
    table of target kinds (:mod:`horae.delivery.table`)."""
    return sorted(((k.value, d.label) for k, d in DELIVERERS.items()), key=lambda kl: kl[1])


@page("/console/schedules/{trigger_id}/edit")
async def edit(request: Request, who: Principal, api: Api) -> Response:
    trigger = await api.get(f"/v1/schedules/{_id(request.path_params['trigger_id'])}")
    return render(
        request,
        "edit.html",
        who=who,
        t=trigger,
        form=form_of(trigger),
        editing=True,
        **await _form_context(request, who, trigger["target"].get("url")),
    )


@page("/console/schedules/{trigger_id}/diff", ("POST",))
async def diff(request: Request, who: Principal, api: Api) -> Response:
    """The edit's dry-run and its what-if against the stored version over the next 7 days."""
    trigger_id = _id(request.path_params["trigger_id"])
    form: dict[str, str] = request.state.form
    zone = form.get("zone") or "UTC"
    try:
        trigger = await api.get(f"/v1/schedules/{trigger_id}")
        proposed = amended(trigger, form, who.tenant)
        rows = await api.send("POST", "/v1/dry-run?n=10", proposed)
        now = now_of(request).replace(microsecond=0)
        window = {"from": now.isoformat(), "to": (now + timedelta(days=7)).isoformat()}
        changed = await api.send(
            "POST", f"/v1/schedules/{trigger_id}/what-if", {"proposed": proposed, **window}
        )
    except Problem as p:
        return render(request, "_diff.html", who=who, problem=p, zone=zone)
    return render(request, "_diff.html", who=who, problem=None, rows=rows, diff=changed, zone=zone)


@page("/console/schedules/{trigger_id}/edit", ("POST",))
async def save_edit(request: Request, who: Principal, api: Api) -> Response:
    trigger_id = _id(request.path_params["trigger_id"])
    form: dict[str, str] = request.state.form
    trigger = await api.get(f"/v1/schedules/{trigger_id}")
    held = form.get("version", "")
    try:
        body = amended(trigger, form, who.tenant)
        body.pop("trigger_id", None)
        made = await api.send(
            "PUT", f"/v1/schedules/{trigger_id}", body, headers={"If-Match": f'"{held}"'}
        )
    except Problem as p:
        if p.status == 401:
            raise
        shown = {**trigger, "version": int(held) if held.isdigit() else trigger["version"]}
        return render(
            request,
            "edit.html",
            p.status,
            who,
            t=shown,
            form={**form_of(trigger), **form},
            editing=True,
            problem=p,
            **await _form_context(request, who, form.get("url")),
        )
    said = f"Saved version {made['version']}"
    return _redirect(f"/console/schedules/{trigger_id}?{session.flash(request, said)}")


@page("/console/schedules/{trigger_id}/backfill")
async def backfill_form(request: Request, who: Principal, api: Api) -> Response:
    trigger = await api.get(f"/v1/schedules/{_id(request.path_params['trigger_id'])}")
    now = now_of(request).replace(microsecond=0)
    window = {
        "from": (now - timedelta(hours=1)).isoformat().replace("+00:00", "Z"),
        "to": now.isoformat().replace("+00:00", "Z"),
        "reason": "",
    }
    return render(request, "backfill.html", who=who, t=trigger, window=window, cost=None, done=None)


@page("/console/schedules/{trigger_id}/backfill", ("POST",))
async def backfill(request: Request, who: Principal, api: Api) -> Response:
    """First the cost and a confirm token (the API's first call), then, confirmed, the act."""
    trigger_id = _id(request.path_params["trigger_id"])
    form: dict[str, str] = request.state.form
    trigger = await api.get(f"/v1/schedules/{trigger_id}")
    window = {k: form.get(k, "") for k in ("from", "to", "reason")}
    body: dict[str, Any] = {"from": window["from"], "to": window["to"]}
    if window["reason"]:
        body["reason"] = window["reason"]
    if form.get("confirm"):
        body["confirm"] = form["confirm"]
    try:
        answer = await api.send("POST", f"/v1/schedules/{trigger_id}/backfill", body)
    except Problem as p:
        if p.status == 401:
            raise
        return render(
            request,
            "backfill.html",
            p.status,
            who,
            t=trigger,
            window=window,
            cost=None,
            done=None,
            problem=p,
        )
    confirmed = "command_id" in answer
    grant = request.app.state.service.settings.grants().grant(who.tenant)
    return render(
        request,
        "backfill.html",
        who=who,
        t=trigger,
        window=window,
        cost=None if confirmed else answer,
        done=answer if confirmed else None,
        said=words.backfill_cost(int(answer["fires"]), grant.dispatch_per_s),
    )


# --- audit, lateness -----------------------------------------------------------------------
@page("/console/audit")
async def audit(request: Request, who: Principal, api: Api) -> Response:
    start, end = _window(request, timedelta(days=7), timedelta(hours=1))
    cursor = request.query_params.get("cursor") or None
    got = await api.get("/v1/audit", **{"from": start, "to": end}, cursor=cursor, limit=100)
    here = {"from": start, "to": end}
    more = f"?{urlencode({**here, 'cursor': got['next_cursor']})}" if got["next_cursor"] else None
    return render(request, "audit.html", who=who, items=got["items"], window=here, more=more)


@page("/console/lateness")
async def lateness(request: Request, who: Principal, api: Api) -> Response:
    """p50/p99 per hour over the last day (or per bucket of the window), tenant-wide or for one
    trigger, each bucket one call of the API's lateness route."""
    trigger_id = request.query_params.get("trigger", "")
    asked = request.query_params.get("hours", "12")
    hours = min(48, max(1, int(asked))) if asked.isdigit() else 12
    now = now_of(request).replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    path = f"/v1/schedules/{_id(trigger_id)}/lateness" if trigger_id else "/v1/lateness"
    hand_over = HandOver.DISPATCH  # tenant-wide: the delivery goal
    if trigger_id:
        kind = named((await api.get(f"/v1/schedules/{trigger_id}"))["target"]["kind"])
        hand_over = hand_over if kind is None else kind.hand_over
    budget = BUDGET_MS[hand_over]
    buckets = []
    for i in range(hours, 0, -1):
        start, end = now - timedelta(hours=i), now - timedelta(hours=i - 1)
        got = await api.get(path, **{"from": start.isoformat(), "to": end.isoformat()})
        row = got if trigger_id else got["summary"]
        buckets.append({"start": start.isoformat().replace("+00:00", "Z"), **row})
    top = max([b["p99_ms"] or 0 for b in buckets] + [1000.0, budget[0] * 2])
    scale = 10 ** math.ceil(math.log10(top))
    top = scale / 2 if top <= scale / 2 else scale
    return render(
        request,
        "lateness.html",
        who=who,
        buckets=buckets,
        top=top,
        trigger_id=trigger_id,
        hours=hours,
        budget=budget,
    )


# --- platform ------------------------------------------------------------------------------
TENANT = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")


@page("/console/platform")
async def platform(request: Request, who: Principal, api: Api) -> Response:
    """The tenants and their ceilings (a platform token); suspend or resume one."""
    got = await api.get("/v1/admin/tenants")
    done = session.flashed(request)
    return render(request, "platform.html", who=who, tenants=got["items"], done=done)


@page("/console/platform/{tenant}/confirm")
async def platform_confirm(request: Request, who: Principal, api: Api) -> Response:
    tenant = request.path_params["tenant"]
    if not TENANT.match(tenant):
        raise Problem(404, "Not found", f"tenant {tenant!r}")
    await api.get("/v1/admin/tenants")  # the platform role, as the act needs
    suspend = request.query_params.get("suspend") == "1"
    return render(request, "platform_confirm.html", who=who, tenant=tenant, suspend=suspend)


@page("/console/platform/{tenant}/suspension", ("POST",))
async def suspension(request: Request, who: Principal, api: Api) -> Response:
    tenant = request.path_params["tenant"]
    if not TENANT.match(tenant):
        raise Problem(404, "Not found", f"tenant {tenant!r}")
    form: dict[str, str] = request.state.form
    body: dict[str, Any] = {"suspended": form.get("suspend") == "1"}
    if form.get("reason"):
        body["reason"] = form["reason"]
    answer = await api.send("PUT", f"/v1/admin/tenants/{tenant}/suspension", body)
    verb = "Suspension" if body["suspended"] else "Resumption"
    said = f"{verb} of {tenant} requested (command {answer['command_id']})"
    return _redirect(f"/console/platform?{session.flash(request, said)}")


# --- target verification -------------------------------------------------------------------
async def target_status(request: Request, who: Principal, url: str | None) -> dict[str, Any]:
    """Whether the host of webhook ``url`` is verified for the token's tenant, read from the
    API's own verification store (the API has no route that answers it; ``read`` checked as
    its routes check): ``state`` is ``none`` (no URL), ``invalid`` (not an http(s) URL with a
    host), ``verified`` (with ``until``), ``expired`` (was, until ``until``) or ``unverified``;
    ``required`` whether the API refuses a webhook schedule whose host is not verified
    (``api.require_verified_targets``); ``challenge``: when a pending challenge for the host
    expires."""
    url = (url or "").strip()[:2048]
    service = request.app.state.service
    shown: dict[str, Any] = {
        "state": "none",
        "url": url,
        "required": bool(service.settings.api.require_verified_targets),
    }
    if not url:
        return shown
    if not who.may(Role.READ):
        raise Problem(403, "Forbidden", "needs role 'read'")
    try:
        host, _ = verification.host_of(url)
    except ValueError as exc:
        return {**shown, "state": "invalid", "detail": str(exc)}
    store = service.verifications
    until = await run_in_threadpool(store.verified_until, who.tenant, host)
    made = await run_in_threadpool(store.challenge, who.tenant, host)
    now = now_of(request)
    state = "unverified" if until is None else "verified" if until > now else "expired"
    pending = made is not None and made.expires_at > now
    return {
        **shown,
        "state": state,
        "host": host,
        "until": until.astimezone(UTC).isoformat().replace("+00:00", "Z") if until else None,
        "challenge": made.expires_at.astimezone(UTC).isoformat().replace("+00:00", "Z")
        if made is not None and pending
        else None,
    }


@page("/console/target-status")
async def target_status_fragment(request: Request, who: Principal, api: Api) -> Response:
    """The verification status of the form's webhook URL, a fragment (as it is typed)."""
    ts = await target_status(request, who, request.query_params.get("url"))
    return render(request, "_target_status.html", who=who, ts=ts)


@page("/console/targets")
async def targets(request: Request, who: Principal, api: Api) -> Response:
    url = request.query_params.get("url", "")[:2048]
    return render(request, "targets.html", who=who, url=url, made=None, checked=None)


@page("/console/targets/verify", ("POST",))
async def verify_target(request: Request, who: Principal, api: Api) -> Response:
    """A challenge for the URL's host (the API's verification route)."""
    url = request.state.form.get("url", "")
    try:
        made = await api.send("POST", "/v1/targets/verifications", {"url": url})
    except Problem as p:
        if p.status == 401:
            raise
        return render(
            request, "targets.html", p.status, who, url=url, made=None, checked=None, problem=p
        )
    return render(request, "targets.html", 201, who, url=url, made=made, checked=None)


@page("/console/targets/check", ("POST",))
async def check_target(request: Request, who: Principal, api: Api) -> Response:
    """The API fetches the host's answer and records the host verified (or says why not)."""
    host = request.state.form.get("host", "").strip()
    if not host or "/" in host:
        raise Problem(
            422,
            "Unprocessable content",
            "host: expected a name or name:port",
            [{"field": "host", "message": "expected a name or name:port"}],
        )
    checked = await api.send("POST", f"/v1/targets/verifications/{quote(host, safe='')}/check")
    return render(request, "targets.html", who=who, host=host, made=None, checked=checked)
