"""The console in a real browser: Debian's chromium driven by Playwright, against a real API,
planner, projector and dispatcher on the test stack (topics under this module's prefix, read
models in a schema of its own), two tenants.

Journeys: ship a job (sign in by the login link, create with the zone picker, see the next
instants as you type, save, watch the first fire appear in the history with its lateness); pause
and resume (the state shown is the API's); a read-only token sees no write control and a forged
POST is refused by the API; tenant B never sees tenant A's schedule by URL. Every page is checked
with axe-core (vendored in ``tests/acceptance/axe/``) for serious or critical violations and for
Content-Security-Policy errors; a screenshot of each is saved under ``$HORAE_TEST_OUTPUT/console``
(default: pytest's base temporary directory), the path printed.

No browser (``/usr/bin/chromium``, installed by ``scripts/bootstrap`` as root): a skip, or a
failure under ``CI=true``.
"""

from __future__ import annotations

import base64
import html
import itertools
import json
import os
import re
import secrets
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from horae.api.auth import issue
from horae.api.verification import expected_answer
from horae.contracts.events import Role
from horae.devstack.stack import Endpoints
from horae.kafka.admin import delete_under
from tests.net import free_ports, kill_all
from tests.waiting import wait_until

CHROMIUM = Path("/usr/bin/chromium")
AXE = Path(__file__).parent / "axe" / "axe.min.js"
A, B = "acme", "globex"
RAN = ("fired", "succeeded")

if not CHROMIUM.exists():
    WHY = f"no browser at {CHROMIUM} (scripts/bootstrap installs Debian's chromium as root)"
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true: {WHY}", pytrace=False)
    pytest.skip(WHY, allow_module_level=True)

from playwright.sync_api import Browser, Page, expect, sync_playwright  # noqa: E402


@dataclass
class Console:
    url: str
    keys: dict[str, str]
    logs: Path
    shots: Path
    env: dict[str, str] = field(default_factory=dict)
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    checked: list[str] = field(default_factory=list)

    def start(self, name: str) -> None:
        with (self.logs / f"{name}.log").open("ab") as log:
            self.processes[name] = subprocess.Popen(
                [sys.executable, "-m", "horae.cli.main", name],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def stop(self, name: str) -> None:
        """SIGTERM and wait: the process drains and leaves its group."""
        self.processes[name].terminate()
        self.processes[name].wait(60)

    def token(self, tenant: str, *roles: Role, subject: str = "alice") -> str:
        return issue(self.keys, "k1", tenant=tenant, roles=list(roles), subject=subject, ttl_s=3600)

    def api(self, token: str, method: str, path: str, **kw: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token}"}
        return httpx.request(method, self.url + path, headers=headers, timeout=30, **kw)

    def tail(self) -> str:
        return "".join(
            f"\n--- {p.name}\n{p.read_text(errors='replace')[-3000:]}"
            for p in sorted(self.logs.glob("*.log"))
        )


def _horae(env: dict[str, str], *args: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "horae.cli.main", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"horae {' '.join(args)}: {done.stdout}{done.stderr}"


@pytest.fixture(scope="module")
def console(stack: Endpoints, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    unique = uuid.uuid4().hex[:10]
    prefix, schema = f"t{unique}.", f"console{unique}"
    [port] = free_ports(1)
    keys = {"k1": secrets.token_hex(32)}
    env = dict(
        os.environ,
        HORAE_KAFKA_BOOTSTRAP=stack.kafka_bootstrap,
        HORAE_DATABASE_URL=stack.database_url,
        HORAE_TOPIC_PREFIX=prefix,
        HORAE_TOPIC_PARTITIONS="3",
        HORAE_PROJECTION_SCHEMA=schema,
        HORAE_TENANT_KEYS=json.dumps({t: {f"{t}-1": secrets.token_hex(16)} for t in (A, B)}),
        HORAE_PLATFORM_KEY=secrets.token_hex(16),
        HORAE_API_TOKEN_KEYS=json.dumps(keys),
        HORAE_API_PORT=str(port),
        HORAE_MIN_INTERVAL_S="1",
        HORAE_PLANNER_SLOT=f"console-{unique}",
        HORAE_DISPATCHER_SLOT=f"console-{unique}",
        HORAE_DISPATCHER_ALLOW=json.dumps(["127.0.0.1/32"]),
        HORAE_DISPATCHER_WEBHOOK_SECRETS=json.dumps(
            {A: {"hook": "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()}}
        ),
        HORAE_PROJECTOR_BATCH_MS="100",
        # acme's dispatch grant (above the defaults: nothing is slower): its backfill cost's rate
        HORAE_TENANT_GRANTS=json.dumps({A: {"dispatch_per_s": 20, "catchup_share": 0.25}}),
        HORAE_LOG_LEVEL="WARNING",
    )
    for name in ("HORAE_API_TOKEN_KID", "HORAE_API_HOST"):
        env.pop(name, None)
    base = Path(os.environ.get("HORAE_TEST_OUTPUT") or tmp_path_factory.getbasetemp())
    shots = base / "console"
    shots.mkdir(parents=True, exist_ok=True)
    logs = tmp_path_factory.mktemp("console-logs")
    served = Console(f"http://127.0.0.1:{port}", keys, logs, shots, env)
    try:
        _horae(env, "topics", "apply")
        _horae(env, "migrate")
        for name in ("planner", "projector", "dispatcher", "api"):
            served.start(name)

        def ready() -> bool:
            assert all(p.poll() is None for p in served.processes.values()), served.tail()
            try:
                return httpx.get(f"{served.url}/readyz", timeout=2).status_code == 200
            except httpx.TransportError:
                return False

        wait_until(ready, timeout_s=180, message=served.tail)
        yield served
        print(f"\nconsole screenshots: {shots}")
    finally:
        kill_all(list(served.processes.values()))
        delete_under(stack.kafka_bootstrap, prefix)
        with psycopg.connect(stack.database_url, autocommit=True) as conn:
            for name in (schema, f"{schema}_api"):
                conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1360, "height": 900})
    opened = context.new_page()
    errors: list[str] = []
    opened.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    opened.on("pageerror", lambda e: errors.append(str(e)))
    yield opened
    context.close()
    csp = [e for e in errors if "Content Security Policy" in e or "Refused to" in e]
    assert csp == [], csp


def sign_in(console: Console, page: Page, token: str) -> None:
    """The login link ``horae demo`` prints: the token in the fragment fills the form."""
    page.goto(f"{console.url}/console/login#token={token}")
    expect(page.locator("#token")).to_have_value(token)
    assert "#token" not in page.url
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Schedules")).to_be_visible()


def check(console: Console, page: Page, name: str) -> None:
    """No serious or critical axe-core violation on the page; its screenshot saved."""
    page.evaluate(AXE.read_text())
    result = page.evaluate("axe.run(document, {resultTypes: ['violations']})")
    bad = [
        (v["id"], v["impact"], [n["target"] for n in v["nodes"]][:3])
        for v in result["violations"]
        if v["impact"] in ("serious", "critical")
    ]
    assert bad == [], f"{name}: {bad}"
    page.screenshot(path=str(console.shots / f"{name}.png"), full_page=True)
    console.checked.append(name)


def tab_to(page: Page, name: str) -> None:
    """Tab from the top of the page until the focused control is ``name`` (at most 80 stops)."""
    page.evaluate("document.activeElement && document.activeElement.blur()")
    for _ in range(80):
        page.keyboard.press("Tab")
        focused = page.evaluate("document.activeElement && document.activeElement.innerText")
        if (focused or "").strip() == name:
            return
    raise AssertionError(f"no control {name!r} reachable by Tab")


def listed(page: Page, trigger_id: str) -> None:
    def shown() -> bool:
        page.reload()
        return page.locator(f"tr[data-trigger='{trigger_id}']").count() == 1

    wait_until(shown, timeout_s=60, interval_s=0.5)


def api_state(console: Console, token: str, trigger_id: str) -> str:
    got = console.api(token, "GET", f"/v1/schedules/{trigger_id}")
    assert got.status_code == 200, got.text
    state: str = got.json()["state"]
    return state


def create_via_api(console: Console, token: str, trigger_id: str, tenant: str) -> None:
    body = {
        "trigger_id": trigger_id,
        "recurrence": {"kind": "cron", "expr": "*/3 * * * * *", "zone": "Europe/Berlin"},
        "target": {"kind": "event", "topic": f"events.{tenant}"},
        "labels": {"team": "ops"},
    }
    made = console.api(token, "POST", "/v1/schedules", json=body)
    assert made.status_code == 201, made.text


@pytest.mark.timeout(300)
def test_ship_a_job(console: Console, page: Page) -> None:
    author = console.token(A, Role.AUTHOR)
    page.goto(f"{console.url}/console/login")
    check(console, page, "login")
    sign_in(console, page, author)
    page.get_by_role("link", name="New schedule").click()
    page.get_by_label("Id", exact=True).fill("first-job")
    page.get_by_label("Cron").fill("*/2 * * * * *")
    page.get_by_label("Time zone").fill("Asia/Kathmandu")  # +05:45, no UTC arithmetic to do
    preview = page.locator("#preview-table tbody tr")
    expect(preview.first).to_contain_text("+05:45")
    expect(preview).to_have_count(10)
    page.get_by_label("Cron").fill("0 9 * * 1-5")
    expect(preview.first).to_contain_text("09:00:00+05:45")
    page.get_by_label("Cron").fill("0 9 * * * * * nonsense")  # the API's problem, as it says it
    expect(page.locator("#preview .problem")).to_contain_text("recurrence.expr")
    page.get_by_label("Cron").fill("*/2 * * * * *")
    expect(preview.first).to_contain_text("+05:45")
    check(console, page, "create")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("heading", name="first-job")).to_be_visible()
    expect(page.locator("[role=status]")).to_contain_text("Created version 1")
    expect(page.locator("#upcoming tbody tr")).to_have_count(10)
    expect(page.locator("#upcoming tbody tr").first).to_contain_text("+05:45")
    check(console, page, "schedule")

    page.get_by_role("link", name="History").click()

    def fired_with_lateness() -> bool:
        page.reload()
        cells = page.locator("#history tbody tr").first.locator("td")
        if cells.count() != 9:
            return False
        return cells.nth(1).inner_text() in RAN and cells.nth(5).inner_text() != "—"

    wait_until(fired_with_lateness, timeout_s=120, interval_s=1, message=console.tail)
    first = page.locator("#history tbody tr").first
    assert first.locator("td").nth(5).inner_text() != "—"
    check(console, page, "history")

    page.get_by_role("link", name="Schedules").first.click()
    row = page.locator("tr[data-trigger='first-job']")
    expect(row).to_contain_text("every 2 seconds")
    expect(row.locator("[id^=last-]")).to_contain_text(re.compile("fired|succeeded"))
    check(console, page, "schedules")

    page.goto(f"{console.url}/console/morning")
    expect(page.locator("#morning tr[data-trigger='first-job']")).to_be_visible()
    check(console, page, "morning-after")
    page.goto(f"{console.url}/console/lateness")
    expect(page.locator("svg.chart")).to_be_visible()
    check(console, page, "lateness")
    page.goto(f"{console.url}/console/lateness?trigger=first-job")
    expect(page.locator(".legend")).to_contain_text("decision lateness p99 ≤ 100 ms")
    check(console, page, "lateness-schedule")
    page.goto(f"{console.url}/console/audit")
    check(console, page, "audit")
    page.goto(f"{console.url}/console/targets")
    page.get_by_label("Webhook URL").fill("http://127.0.0.1:9/hook")
    page.get_by_role("button", name="Get a challenge").click()
    expect(page.locator("#challenge")).to_contain_text("/.well-known/horae-verification/")
    check(console, page, "verify-host")
    page.goto(f"{console.url}/console/schedules/first-job/history")
    page.locator("#history tbody tr").first.get_by_role("link").click()
    expect(page.get_by_role("heading", name="Attempts")).to_be_visible()
    check(console, page, "fire")


@pytest.mark.timeout(300)
def test_pause_and_resume_show_the_apis_state(console: Console, page: Page) -> None:
    author = console.token(A, Role.AUTHOR)
    create_via_api(console, author, "pausable", A)
    sign_in(console, page, author)
    page.goto(f"{console.url}/console/schedules/pausable")
    for act, after in (("Pause", "paused"), ("Resume", "live")):  # by keyboard alone
        tab_to(page, act)
        with page.expect_navigation():
            page.keyboard.press("Enter")
        check(console, page, f"confirm-{act.lower()}")
        tab_to(page, act)
        with page.expect_navigation():
            page.keyboard.press("Enter")
        expect(page.locator("[role=status]")).to_contain_text(f"{act}: requested (command")
        wait_until(
            lambda after=after: api_state(console, author, "pausable") == after,
            timeout_s=60,
            message=console.tail,
        )
        page.reload()
        expect(page.locator("#state")).to_have_text(api_state(console, author, "pausable"))
        expect(page.locator("#state")).to_have_text(after)


@pytest.mark.timeout(300)
def test_read_only_sees_no_write_control_and_a_forged_post_is_refused(
    console: Console, page: Page
) -> None:
    author = console.token(A, Role.AUTHOR)
    create_via_api(console, author, "guarded", A)
    sign_in(console, page, console.token(A, Role.READ, subject="viewer"))
    listed(page, "guarded")  # once the projector has it
    assert page.get_by_role("link", name="New schedule").count() == 0
    page.goto(f"{console.url}/console/schedules/guarded")
    expect(page.get_by_role("heading", name="guarded")).to_be_visible()
    for control in ("Pause", "Resume", "Run now", "Delete", "Save"):
        assert page.get_by_role("link", name=control, exact=True).count() == 0, control
        assert page.get_by_role("button", name=control, exact=True).count() == 0, control
    check(console, page, "schedule-read-only")
    csrf = page.locator("input[name=csrf]").first.get_attribute("value")
    assert csrf
    for act in ("pause", "run", "delete"):  # the session's own CSRF token: only the role is wrong
        forged = page.request.post(
            f"{console.url}/console/schedules/guarded/act", form={"csrf": csrf, "act": act}
        )
        assert forged.status == 403, (act, forged.status)
        assert "needs role 'author'" in html.unescape(forged.text())
    page.goto(f"{console.url}/console/new")  # the form shows, saving is the API's to refuse
    forged = page.request.post(
        f"{console.url}/console/new",
        form={"csrf": csrf, "trigger_id": "sneaky", "expr": "* * * * *", "zone": "UTC"},
    )
    assert forged.status == 403 and "needs role 'author'" in html.unescape(forged.text())
    no_csrf = page.request.post(
        f"{console.url}/console/schedules/guarded/act", form={"act": "pause"}
    )
    assert no_csrf.status == 403 and "CSRF" in html.unescape(no_csrf.text())
    assert api_state(console, author, "guarded") == "live"
    assert console.api(author, "GET", "/v1/schedules/sneaky").status_code == 404


@pytest.mark.timeout(300)
def test_another_tenant_never_sees_it_by_url(console: Console, page: Page) -> None:
    create_via_api(console, console.token(A, Role.AUTHOR), "secret-job", A)
    sign_in(console, page, console.token(A, Role.READ))
    listed(page, "secret-job")  # acme's list has it
    page.get_by_role("button", name="Sign out").click()
    sign_in(console, page, console.token(B, Role.AUTHOR, Role.READ, subject="bob"))
    assert page.locator("tr[data-trigger='secret-job']").count() == 0
    for path in ("", "/history", "/confirm?act=delete"):
        answer = page.goto(f"{console.url}/console/schedules/secret-job{path}")
        assert answer is not None and answer.status == 404, path
        expect(page.locator(".problem")).to_contain_text("'secret-job'")
    check(console, page, "not-found")
    forged = page.request.post(
        f"{console.url}/console/schedules/secret-job/act",
        form={
            "csrf": page.locator("input[name=csrf]").first.get_attribute("value") or "",
            "act": "delete",
        },
    )
    assert forged.status == 404
    assert api_state(console, console.token(A, Role.READ), "secret-job") == "live"


@pytest.mark.timeout(300)
def test_edit_with_the_diff(console: Console, page: Page) -> None:
    author = console.token(A, Role.AUTHOR)
    create_via_api(console, author, "editable", A)
    sign_in(console, page, author)
    page.goto(f"{console.url}/console/schedules/editable")
    page.get_by_role("link", name="Edit", exact=True).click()
    expect(page.get_by_label("Cron")).to_have_value("*/3 * * * * *")
    expect(page.locator("#diff-summary")).to_contain_text("0 added")
    page.get_by_label("Cron").fill("0 9 * * 1-5")
    expect(page.locator("#diff-summary")).to_contain_text("removed")
    expect(page.locator("#diff-added tbody tr").first).to_contain_text("09:00:00 CET")
    expect(page.locator("#preview-table tbody tr")).to_have_count(10)
    check(console, page, "edit-diff")
    page.get_by_role("button", name="Save version 2").click()
    expect(page.locator("[role=status]")).to_contain_text("Saved version 2")
    stored = console.api(author, "GET", "/v1/schedules/editable").json()
    assert stored["recurrence"]["expr"] == "0 9 * * 1-5" and stored["labels"] == {"team": "ops"}
    assert stored["version"] == 2

    versions = page.locator("#versions tbody tr")  # every version, from the read models

    def both_versions() -> bool:
        page.reload()
        return versions.count() == 2

    wait_until(both_versions, timeout_s=60, interval_s=0.5, message=console.tail)
    newest, first = versions.nth(0), versions.nth(1)
    expect(newest.locator("td").nth(0)).to_have_text("2")
    expect(newest).to_contain_text("alice (api; roles author)")
    expect(newest).to_contain_text('recurrence.expr: "*/3 * * * * *" -> "0 9 * * 1-5"')
    expect(newest).not_to_contain_text("labels")  # kept: not a change
    expect(first.locator("td").nth(0)).to_have_text("1")
    expect(first.locator("td").nth(4)).to_have_text("created")
    check(console, page, "schedule-versions")


#: how long the morning-after journey keeps the planner down, from the moment it has stopped
OUTAGE_S = 6


def _epoch(instant: str) -> int:
    return int(datetime.fromisoformat(instant.replace("Z", "+00:00")).timestamp())


@pytest.mark.timeout(420)
def test_the_morning_after_finds_every_missed_instant_with_its_cause(
    console: Console, page: Page
) -> None:
    """An every-second schedule (fire_once, grace 1 s) and a planner down for ``OUTAGE_S``.

    The outage is held for that long, not left to a restart's own duration: an instant at most
    the grace late fires on time, so a restart faster than about two seconds (an idle machine
    restarts a planner that fast) skips nothing, and the journey found no skipped instant. With
    ``OUTAGE_S`` the new planner's first decision is at least 6 s after the old one's last, so at
    least ``OUTAGE_S - 2`` instants are more than the grace late: all but the on-time ones are
    skipped by the misfire policy."""
    author = console.token(A, Role.AUTHOR)
    body = {
        "trigger_id": "nightwatch",
        "recurrence": {"kind": "cron", "expr": "* * * * * *", "zone": "Europe/Berlin"},
        "target": {"kind": "event", "topic": f"events.{A}"},
        "policies": {"misfire_grace_s": 1},  # and misfire fire_once, the default
    }
    assert console.api(author, "POST", "/v1/schedules", json=body).status_code == 201

    def fires(state: str | None = None) -> list[dict[str, Any]]:
        params: dict[str, Any] = {"limit": 1000} | ({"state": state} if state else {})
        got = console.api(author, "GET", "/v1/schedules/nightwatch/history", params=params)
        items: list[dict[str, Any]] = got.json()["items"]
        return items

    wait_until(lambda: fires("fired"), timeout_s=120, message=console.tail)
    console.stop("planner")  # SIGTERM: it commits what it decided and leaves its group
    down = time.time()
    wait_until(lambda: time.time() >= down + OUTAGE_S, timeout_s=OUTAGE_S + 5, interval_s=0.2)
    restarted = time.time()
    console.start("planner")

    def decided_after_restart() -> bool:
        return any(_epoch(f["scheduled_at"]) > restarted for f in fires("fired"))

    wait_until(decided_after_restart, timeout_s=240, message=console.tail)
    history = fires()
    instants = [_epoch(f["scheduled_at"]) for f in history]
    assert instants == list(range(instants[0], instants[-1] + 1)), "each instant decided once"
    fired = [t for t, f in zip(instants, history, strict=True) if f["state"] == "fired"]
    gaps = [(a, b) for a, b in itertools.pairwise(fired) if b - a > 1]
    assert len(gaps) == 1, f"one outage, not {gaps}"
    last, first = gaps[0]  # the last instant fired before the outage, the first after it
    skipped = [f for t, f in zip(instants, history, strict=True) if f["state"] == "skipped"]
    assert [_epoch(f["scheduled_at"]) for f in skipped] == list(range(last + 1, first))
    assert len(skipped) >= OUTAGE_S - 2, skipped
    assert {f["cause"] for f in skipped} == {"skipped: misfire policy"}

    sign_in(console, page, console.token(A, Role.READ, subject="on-call"))
    page.goto(f"{console.url}/console/morning")
    row = page.locator("#morning tr[data-trigger='nightwatch']")
    expect(row).to_contain_text("skipped")
    assert int(row.locator("td").nth(2).inner_text()) >= len(skipped)
    check(console, page, "morning-after-outage")
    page.goto(f"{console.url}/console/schedules/nightwatch/history?state=skipped")
    rows = page.locator("#history tbody tr")
    expect(rows).to_have_count(len(skipped))
    cells = rows.first.locator("td")
    expect(cells.nth(1)).to_have_text("skipped")
    expect(cells.nth(3)).to_have_text("skipped: misfire policy")


class _Host(BaseHTTPRequestHandler):
    """A tenant's webhook host: serves the answer to each challenge its server was told of."""

    def do_GET(self) -> None:
        answers: dict[str, str] = self.server.answers  # type: ignore[attr-defined]
        body = answers.get(self.path, "").encode()
        self.send_response(200 if body else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:  # a delivery: taken
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *_: object) -> None:
        return None


@pytest.mark.timeout(300)
def test_create_shows_whether_the_webhook_host_is_verified(console: Console, page: Page) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Host)
    server.answers = {}  # type: ignore[attr-defined]
    served = threading.Thread(target=server.serve_forever, daemon=True)
    served.start()
    host = f"127.0.0.1:{server.server_port}"
    url = f"http://{host}/hook"
    try:
        sign_in(console, page, console.token(A, Role.AUTHOR))
        page.goto(f"{console.url}/console/new")
        status = page.locator("#target-status")
        expect(status).to_contain_text("Type the webhook URL")
        page.get_by_label("Target").select_option("webhook")
        page.get_by_label("Webhook URL").fill(url)
        page.get_by_label("Signing secret ref").fill("hook")
        expect(status).to_contain_text(f"Host {host} is not verified for tenant {A}")
        expect(status).to_contain_text("the API refuses a webhook schedule calling it. To verify")
        expect(page.locator("#preview-table tbody tr")).to_have_count(10)  # a dry-run needs none
        check(console, page, "create-unverified")

        page.get_by_role("link", name=f"verify {host}").click()
        expect(page.get_by_label("Webhook URL")).to_have_value(url)
        page.get_by_role("button", name="Get a challenge").click()
        challenge = page.locator("#challenge")
        expect(challenge).to_contain_text("/.well-known/horae-verification/")
        token = challenge.locator("code").first.inner_text().rsplit("/", 1)[1]
        secrets_ = json.loads(console.env["HORAE_DISPATCHER_WEBHOOK_SECRETS"])[A]
        server.answers[f"/.well-known/horae-verification/{token}"] = expected_answer(  # type: ignore[attr-defined]
            secrets_["hook"], A, host, token
        )
        page.get_by_role("button", name="Check now").click()
        expect(page.locator("#checked")).to_contain_text(f"{host}: verified")

        page.goto(f"{console.url}/console/new")
        page.get_by_label("Id", exact=True).fill("hooked")
        page.get_by_label("Cron").fill("0 9 * * 1-5")
        page.get_by_label("Target").select_option("webhook")
        page.get_by_label("Webhook URL").fill(url)
        page.get_by_label("Signing secret ref").fill("hook")
        expect(status).to_contain_text(f"Host {host} is verified for tenant {A} until")
        expect(page.locator("#preview-table tbody tr")).to_have_count(10)
        check(console, page, "create-verified")
        page.get_by_role("button", name="Save").click()
        expect(page.locator("[role=status]")).to_contain_text("Created version 1")

        page.get_by_role("link", name="Run now").click()  # a manual fire, delivered to the host
        page.get_by_role("button", name="Run now").click()
        notice = page.locator("[role=status]")
        expect(notice).to_contain_text("Run now: requested (command")
        said = re.search(r"fire (\S+)\)", notice.inner_text())
        assert said is not None, notice.inner_text()
        page.goto(f"{console.url}/console/fires/{said[1]}")
        attempts = page.locator("#attempts tbody tr")
        attempt = attempts.first

        def delivered() -> bool:  # once the projector has the fire and its attempt
            page.reload()
            return attempts.count() > 0 and "204" in attempt.inner_text()

        wait_until(delivered, timeout_s=120, interval_s=1, message=console.tail)
        cells = attempt.locator("td")
        expect(cells.nth(0)).to_have_text("1")
        expect(cells.nth(2)).to_have_text("204")
        expect(cells.nth(3)).to_have_text("2xx")
        expect(cells.nth(4)).to_have_text("manual")
        check(console, page, "fire-attempts")
        page.goto(f"{console.url}/console/schedules/hooked/confirm?act=delete")
        page.get_by_role("button", name="Delete").click()
    finally:
        server.shutdown()
        server.server_close()
        served.join(10)


@pytest.mark.timeout(120)
def test_the_platform_page_lists_the_tenants(console: Console, page: Page) -> None:
    token = console.token("platform", Role.PLATFORM, subject="ops")
    page.goto(f"{console.url}/console/login#token={token}")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Platform: tenants")).to_be_visible()
    expect(page.locator("#tenants tr[data-tenant]")).to_have_count(2)
    check(console, page, "platform")
    page.get_by_role("link", name="Suspend…").first.click()
    expect(page.get_by_role("heading", name="Suspend tenant acme?")).to_be_visible()
    check(console, page, "platform-confirm")


@pytest.mark.timeout(180)
def test_backfill_shows_its_cost_at_the_catch_up_lanes_rate(console: Console, page: Page) -> None:
    """600 fires of an every-minute schedule, at acme's grant's catch-up rate: 20/s x 0.25."""
    body = {
        "trigger_id": "backfillable",
        "recurrence": {"kind": "cron", "expr": "* * * * *", "zone": "Europe/Berlin"},
        "target": {"kind": "event", "topic": f"events.{A}"},
    }
    made = console.api(console.token(A, Role.AUTHOR), "POST", "/v1/schedules", json=body)
    assert made.status_code == 201, made.text
    sign_in(console, page, console.token(A, Role.READ, Role.AUTHOR, Role.POLICY, subject="ops"))
    page.goto(f"{console.url}/console/schedules/backfillable")
    page.get_by_role("link", name="Backfill", exact=True).click()
    end = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(seconds=30)
    start = end - timedelta(hours=10)  # 600 minutes, none on the window's edges
    page.get_by_label("From").fill(start.isoformat().replace("+00:00", "Z"))
    page.get_by_label("To").fill(end.isoformat().replace("+00:00", "Z"))
    page.get_by_label("Reason").fill("replay after the outage")
    page.get_by_role("button", name="Show the cost").click()
    cost = page.get_by_role("region", name="The cost")
    expect(cost.locator("#cost-summary")).to_have_text(
        "600 fires, at least 30 s at 20/s (your dispatch rate)."
    )  # acme's grant: 20/s (a backfill order takes a dispatch token, after on-time work)
    expect(cost).to_contain_text("never over your dispatch rate")
    check(console, page, "backfill-cost")
    page.get_by_role("button", name="Backfill 600 fires").click()
    expect(page.locator("[role=status]")).to_contain_text("Backfill requested: 600 fires (command")


@pytest.mark.timeout(240)
def test_the_cron_builder_writes_the_expression_and_the_preview_follows(
    console: Console, page: Page
) -> None:
    """Presets and the five fields write the Cron field; the next instants (the API's dry-run)
    and, on the edit form, the diff follow; the builder's own controls are never submitted."""
    author = console.token(A, Role.AUTHOR)
    sign_in(console, page, author)
    page.get_by_role("link", name="New schedule").click()
    builder = page.get_by_role("group", name="Cron builder")
    expect(builder).to_be_visible()  # console.js shows it
    cron = page.get_by_label("Cron", exact=True)
    preview = page.locator("#preview-table tbody tr")
    page.get_by_label("Id", exact=True).fill("built")
    page.get_by_label("Time zone").fill("Europe/Berlin")
    page.get_by_label("Preset").select_option(label="weekdays (Monday to Friday) at HH:MM")
    page.get_by_label("At (HH:MM").fill("07:30")
    expect(cron).to_have_value("30 7 * * 1-5")
    expect(builder.get_by_label("Day of week")).to_have_value("1-5")
    expect(preview).to_have_count(10)
    expect(preview.first).to_contain_text(re.compile(r"07:30:00[+]0[12]:00"))
    page.get_by_label("Preset").select_option(label="every N minutes")
    every = page.get_by_label("Every N minutes")
    every.focus()  # by keyboard: the number typed, Tab to the next control
    page.keyboard.press("Control+A")
    page.keyboard.type("20")
    page.keyboard.press("Tab")
    expect(cron).to_have_value("*/20 * * * *")
    expect(preview.nth(1)).to_contain_text(re.compile(r":[024]0:00[+]"))
    builder.get_by_label("Hour").fill("9-17")  # a field of its own: the preset is custom
    expect(page.get_by_label("Preset")).to_have_value("custom")
    expect(cron).to_have_value("*/20 9-17 * * *")
    expect(preview.first).to_contain_text(re.compile(r"T(09|1[0-7]):[024]0:00[+]"))
    cron.fill("0 12 1 * *")  # typed in the Cron field: the builder's fields follow
    expect(builder.get_by_label("Day of month")).to_have_value("1")
    expect(preview.first).to_contain_text(re.compile(r"-01T12:00:00[+]"))
    page.get_by_label("Preset").select_option(label="daily at HH:MM")
    page.get_by_label("At (HH:MM").fill("06:05")
    expect(cron).to_have_value("5 6 * * *")
    expect(preview.first).to_contain_text("06:05:00+")
    check(console, page, "create-builder")
    page.get_by_role("button", name="Save").click()
    expect(page.locator("[role=status]")).to_contain_text("Created version 1")
    stored = console.api(author, "GET", "/v1/schedules/built").json()
    assert stored["recurrence"]["expr"] == "5 6 * * *", stored

    page.get_by_role("link", name="Edit", exact=True).click()  # the edit form has it too
    expect(page.get_by_role("group", name="Cron builder").get_by_label("Hour")).to_have_value("6")
    expect(page.locator("#diff-summary")).to_contain_text("0 added")
    page.get_by_label("Preset").select_option(label="weekly on a day at HH:MM")
    page.get_by_label("On", exact=True).select_option(label="Saturday")
    page.get_by_label("At (HH:MM").fill("06:05")
    expect(cron).to_have_value("5 6 * * 6")
    expect(page.locator("#diff-summary")).to_contain_text("removed")
    expect(page.locator("#preview-table tbody tr").first).to_contain_text("06:05:00")
    check(console, page, "edit-builder")
