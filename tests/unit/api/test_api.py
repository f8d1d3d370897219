"""The HTTP API over in-memory ports: auth, errors, management, dry-run, history, privileged."""

from __future__ import annotations

import asyncio
from dataclasses import asdict, fields, replace
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from horae.api.auth import TokenError, issue, verify
from horae.contracts import events as ev
from horae.contracts import signing
from horae.contracts.grants import TenantGrant
from horae.settings import TenantGrantSettings
from tests.unit.api.support import KEYS, NOW, cron, make_api

PROBLEM = "application/problem+json"
JSON = {"Content-Type": "application/json"}


def test_token_round_trip_and_rotation() -> None:
    old = issue(KEYS, "k1", tenant="acme", roles=[ev.Role.READ], subject="s", ttl_s=60)
    new = issue(KEYS, "k2", tenant="acme", roles=[ev.Role.AUTHOR], subject="s", ttl_s=60)
    assert verify(old, KEYS).roles == {ev.Role.READ}
    assert verify(new, KEYS).roles == {ev.Role.AUTHOR}
    with pytest.raises(TokenError, match="kid"):
        verify(old, {"k2": KEYS["k2"]})  # k1 retired
    with pytest.raises(TokenError, match="expired"):
        verify(old, KEYS, now=datetime.now(UTC) + timedelta(seconds=61))
    with pytest.raises(TokenError, match="invalid"):
        verify(old[:-2] + ("AA" if not old.endswith("AA") else "BB"), KEYS)


def test_no_or_bad_token_is_401_with_a_challenge() -> None:
    api = make_api()
    for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": "Basic x"}):
        r = api.client.get("/v1/schedules", headers=headers)
        assert r.status_code == 401
        assert r.headers["content-type"] == PROBLEM
        assert r.headers["www-authenticate"].startswith("Bearer")
        assert r.json()["status"] == 401


def test_create_get_list_amend_delete() -> None:
    api = make_api()
    h = api.headers("acme", "author")
    r = api.client.post("/v1/schedules", json=cron(), headers=h)
    assert r.status_code == 201, r.text
    assert r.headers["etag"] == '"1"' and r.headers["location"] == "/v1/schedules/nightly"
    body = r.json()
    assert body["tenant"] == "acme" and body["version"] == 1 and body["state"] == "live"
    assert body["next_instants"] == [
        "2026-06-02T07:00:00Z",
        "2026-06-03T07:00:00Z",
        "2026-06-04T07:00:00Z",
    ]
    produced = api.backend.definitions[-1]
    assert produced.author == "alice (api; roles author)"
    assert signing.check(produced, {"horae-platform": b"platform-secret"}) is None
    assert api.client.post("/v1/schedules", json=cron(), headers=h).status_code == 409
    got = api.client.get("/v1/schedules/nightly", headers=h)
    assert got.status_code == 200 and got.headers["etag"] == '"1"'
    listed = api.client.get("/v1/schedules?label=team:ops", headers=h).json()
    assert [i["trigger_id"] for i in listed["items"]] == ["nightly"]
    assert api.client.get("/v1/schedules?label=team:dev", headers=h).json()["items"] == []
    new = cron(expr="0 10 * * *")
    assert api.client.put("/v1/schedules/nightly", json=new, headers=h).status_code == 428
    stale = api.client.put("/v1/schedules/nightly", json=new, headers={**h, "If-Match": '"0"'})
    assert stale.status_code == 412 and stale.headers["content-type"] == PROBLEM
    ok = api.client.put("/v1/schedules/nightly", json=new, headers={**h, "If-Match": '"1"'})
    assert ok.status_code == 200 and ok.json()["version"] == 2
    assert api.client.delete("/v1/schedules/nightly", headers=h).status_code == 204
    assert api.backend.definitions[-1].state is ev.DefinitionState.DELETED
    assert api.client.get("/v1/schedules", headers=h).json()["items"] == []
    assert api.client.post("/v1/schedules/nightly/pause", headers=h).status_code == 404
    again = api.client.post("/v1/schedules", json=cron(), headers=h)
    assert again.status_code == 201 and again.json()["version"] == 4


def test_list_pages_with_a_cursor() -> None:
    api = make_api()
    h = api.headers()
    for i in range(5):
        assert api.client.post("/v1/schedules", json=cron(f"t{i}"), headers=h).status_code == 201
    first = api.client.get("/v1/schedules?limit=2", headers=h).json()
    second = api.client.get(f"/v1/schedules?limit=2&cursor={first['next_cursor']}", headers=h)
    assert [i["trigger_id"] for i in first["items"]] == ["t0", "t1"]
    assert [i["trigger_id"] for i in second.json()["items"]] == ["t2", "t3"]
    bad = api.client.get("/v1/schedules?cursor=zzz", headers=h)
    assert bad.status_code == 422 and bad.json()["errors"][0]["field"] == "cursor"


def test_read_your_writes_before_the_projection_catches_up() -> None:
    api = make_api(auto_project=False)
    h = api.headers()
    assert api.client.post("/v1/schedules", json=cron(), headers=h).status_code == 201
    assert api.backend.stored == {}  # the projector has not seen it
    assert api.client.get("/v1/schedules/nightly", headers=h).json()["version"] == 1
    amended = api.client.put(
        "/v1/schedules/nightly", json=cron(expr="0 8 * * *"), headers={**h, "If-Match": '"1"'}
    )
    assert amended.status_code == 200
    api.backend.pending = api.backend.pending[:1]  # the projector saw only version 1
    api.backend.project()
    assert api.client.get("/v1/schedules/nightly", headers=h).json()["version"] == 2
    assert api.client.delete("/v1/schedules/nightly", headers=h).status_code == 204
    assert api.client.get("/v1/schedules/nightly", headers=h).json()["state"] == "deleted"
    assert api.client.get("/v1/schedules", headers=h).json()["items"] == []  # merged, filtered
    api.clock.advance(301)  # past read_your_writes_s: the projection alone answers
    assert api.client.get("/v1/schedules/nightly", headers=h).json()["version"] == 1


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"recurrence": {"kind": "cron", "expr": "61 * * * *"}}, "recurrence.expr"),
        ({"recurrence": {"kind": "cron", "expr": "*/30 * * * * *"}}, "recurrence"),  # < 60 s
        ({"recurrence": {"kind": "cron", "expr": "0 9 * * *", "zone": "Mars/Base"}}, "zone"),
        ({"recurrence": {"kind": "at", "instants": ["2020-01-01T00:00:00Z"]}}, "recurrence"),
        ({"trigger_id": "Bad Id"}, "trigger_id"),
        ({"nonsense": 1}, "nonsense"),
        ({"tenant": "globex"}, "tenant"),
        ({"version": 9}, "version"),
        (
            {
                "target": {
                    "kind": "webhook",
                    "url": "https://internal.example/x",
                    "secret_refs": ["acme-hook"],
                }
            },
            "target.url",
        ),
        (
            {
                "target": {
                    "kind": "webhook",
                    "url": "https://hooks.acme.example/x",
                    "secret_refs": ["g-hook"],
                }
            },
            "target.secret_refs",
        ),
        (
            {
                "target": {
                    "kind": "webhook",
                    "url": "https://hooks.acme.example/x",
                    "secret_refs": ["acme-hook"],
                    "headers": {"Host": "x"},
                }
            },
            "target.headers",
        ),
        ({"target": {"kind": "event", "topic": "events.globex"}}, "target.topic"),
    ],
)
def test_invalid_definitions_name_the_field(change: dict[str, object], field: str) -> None:
    api = make_api()
    r = api.client.post("/v1/schedules", json=cron(**change), headers=api.headers())
    assert r.status_code == 422, r.text
    assert r.headers["content-type"] == PROBLEM
    assert field in r.json()["errors"][0]["field"], r.json()
    assert api.backend.definitions == []


def test_author_may_not_ask_above_the_defaults() -> None:
    api = make_api()
    body = cron(policies={"horizon_s": 100_000})
    r = api.client.post("/v1/schedules", json=body, headers=api.headers())
    assert r.status_code == 403 and "policy" in r.json()["detail"]


def test_body_limits_json_and_rate() -> None:
    api = make_api(max_body_bytes=2_000, rate_per_s=1.0, burst=1)
    h = api.headers()
    big = cron(description="x" * 3_000)
    assert api.client.post("/v1/schedules", json=big, headers=h).status_code == 413
    r = api.client.post("/v1/schedules", content=b"{nope", headers=JSON | h)
    assert r.status_code == 400 and r.headers["content-type"] == PROBLEM
    r = api.client.get("/v1/schedules", headers=h)
    assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1
    other = api.client.get("/v1/schedules", headers=api.headers("globex", "read"))
    assert other.status_code == 200  # quotas are per tenant
    api.clock.advance(2)
    assert api.client.get("/v1/schedules", headers=h).status_code == 200


def test_query_validation_errors_are_problems_with_fields() -> None:
    api = make_api()
    r = api.client.get("/v1/schedules?limit=0", headers=api.headers())
    assert r.status_code == 422 and r.json()["errors"][0]["field"] == "limit"
    assert api.client.get("/v1/nowhere", headers=api.headers()).headers["content-type"] == PROBLEM


def test_an_unexpected_error_is_a_bare_500() -> None:
    api = make_api()

    def boom(*args: object, **kwargs: object) -> None:
        raise RuntimeError("secret internals")

    api.backend.trigger = boom  # type: ignore[method-assign]
    r = api.client.get("/v1/schedules/x", headers=api.headers())
    assert r.status_code == 500 and r.headers["content-type"] == PROBLEM
    assert "secret" not in r.text and "Traceback" not in r.text


def test_service_routes() -> None:
    api = make_api()
    assert api.client.get("/healthz").json() == {"status": "ok"}
    assert api.client.get("/readyz").status_code == 200
    api.backend.down = "broker unreachable"
    r = api.client.get("/readyz")
    assert r.status_code == 503 and "broker unreachable" in r.json()["detail"]
    assert api.client.get("/v1/schedules/x", headers=api.headers()).status_code == 404
    metrics = api.client.get("/metrics").text
    assert "horae_api_requests_total" in metrics
    assert 'route="/v1/schedules/{trigger_id}",status="404"' in metrics
    assert api.client.get("/v1/openapi.json").json()["components"]["schemas"]["TriggerIn"]
    assert api.client.get("/v1/docs").status_code == 200


def test_commands_record_the_actor() -> None:
    api = make_api()
    h = api.headers("acme", "author")
    api.client.post("/v1/schedules", json=cron(), headers=h)
    for action in ("pause", "resume"):
        assert api.client.post(f"/v1/schedules/nightly/{action}", headers=h).status_code == 202
    first = api.client.post("/v1/schedules/nightly/run", headers=h).json()
    second = api.client.post("/v1/schedules/nightly/run", headers=h).json()
    assert first["fire_key"].endswith("/2026-06-01T12:00:00Z/0/manual")
    assert second["fire_key"].endswith("/2026-06-01T12:00:00Z/1/manual")
    kinds = [(c.kind, c.requested_by, c.role) for c, _ in api.backend.commands]
    assert [k for k, _, _ in kinds] == ["pause", "resume", "manual_run", "manual_run"]
    assert {who for _, who, _ in kinds} == {"alice (api; roles author)"}
    for command, _ in api.backend.commands:
        assert command.expires_at is not None and command.expires_at > NOW
        assert signing.check(command, {"horae-platform": b"platform-secret"}) is None


def test_dry_run_next_and_what_if() -> None:
    api = make_api()
    h = api.headers("acme", "author")
    api.client.post("/v1/schedules", json=cron(expr="30 2 * * *"), headers=h)
    rows = api.client.get("/v1/schedules/nightly/next?n=2", headers=h).json()
    assert rows[0] == {
        "utc": "2026-06-02T00:30:00Z",
        "local": "2026-06-02T02:30:00+02:00",
        "offset": "+02:00",
        "dst_note": None,
        "jitter_ms": 0,
    }
    jittered = cron("j", expr="0 * * * *", policies={"jitter_s": 600})
    dry = api.client.post("/v1/dry-run?n=3", json=jittered, headers=h).json()
    assert len(dry) == 3 and any(r["jitter_ms"] > 0 for r in dry)
    assert api.backend.definitions[-1].trigger_id == "nightly"  # dry-run stored nothing
    march = cron(expr="30 2 * * *")
    r = api.client.post(
        "/v1/dry-run?n=1",
        json={**march, "recurrence": {**march["recurrence"], "start": "2027-03-28T00:00:00Z"}},
        headers=h,
    )
    assert r.json()[0]["dst_note"].startswith("dst: gap")
    body = {
        "proposed": cron(expr="30 3 * * *"),
        "from": "2026-06-02T00:00:00Z",
        "to": "2026-06-04T00:00:00Z",
    }
    w = api.client.post("/v1/schedules/nightly/what-if", json=body, headers=h).json()
    assert w["removed"] == ["2026-06-02T00:30:00Z", "2026-06-03T00:30:00Z"]
    assert w["added"] == ["2026-06-02T01:30:00Z", "2026-06-03T01:30:00Z"]


def _fire(key: str, at: datetime, tenant: str = "acme", **extra: object) -> dict[str, object]:
    row: dict[str, object] = {
        "fire_key": key,
        "tenant": tenant,
        "trigger_id": "nightly",
        "scheduled_at": at,
        "due_at": at,
        "state": "fired",
        "status": "succeeded",
        "cause": None,
        "lane": "ontime",
        "lateness_ms": 120.0,
        "tzdata_version": "2026a",
        "attempt_count": 1,
        "outcome": "succeeded",
        "origin": "scheduled",
    }
    row.update(extra)
    return row


def test_history_routes_are_scoped() -> None:
    api = make_api()
    h = api.headers("acme", "read")
    api.client.post("/v1/schedules", json=cron(), headers=api.headers("acme", "author"))
    day = NOW - timedelta(days=1)
    api.backend.fire_rows += [
        _fire("k1", day),
        _fire("k2", day + timedelta(hours=1), lateness_ms=900.0),
        _fire("k3", day + timedelta(hours=2), state="expired", status="expired", lateness_ms=None),
        _fire("g1", day, tenant="globex"),
    ]
    api.backend.attempt_rows.append({"fire_key": "k1", "n": 1, "http_status": 200})
    api.backend.event_rows.append(
        {
            "event_id": "e1",
            "tenant": "acme",
            "trigger_id": "nightly",
            "emitted_at": day,
            "type": "schedule.triggered",
        }
    )
    api.backend.audit_rows.append(
        {
            "audit_id": "a1",
            "tenant": "acme",
            "at": day,
            "action": "backfill.request",
            "allowed": True,
        }
    )
    page = api.client.get("/v1/schedules/nightly/history?limit=2", headers=h).json()
    assert [i["fire_key"] for i in page["items"]] == ["k1", "k2"]
    rest = api.client.get(f"/v1/schedules/nightly/history?cursor={page['next_cursor']}", headers=h)
    assert [i["fire_key"] for i in rest.json()["items"]] == ["k3"]
    only = api.client.get("/v1/schedules/nightly/history?state=expired", headers=h).json()
    assert [i["fire_key"] for i in only["items"]] == ["k3"]
    fire = api.client.get("/v1/fires/k1", headers=h).json()
    assert fire["attempts"] == [{"fire_key": "k1", "n": 1, "http_status": 200}]
    assert api.client.get("/v1/fires/g1", headers=h).status_code == 404
    late = api.client.get("/v1/schedules/nightly/lateness", headers=h).json()
    assert late["fires"] == 2 and late["max_ms"] == 900.0 and late["missed"] == 1
    tenant = api.client.get("/v1/lateness", headers=h).json()
    assert tenant["summary"]["fires"] == 2 and tenant["triggers"][0]["trigger_id"] == "nightly"
    events = api.client.get("/v1/schedules/nightly/events", headers=h).json()
    assert [e["event_id"] for e in events["items"]] == ["e1"]
    audit = api.client.get("/v1/audit", headers=h).json()
    assert [a["audit_id"] for a in audit["items"]] == ["a1"]
    assert api.client.get("/v1/audit", headers=api.headers("globex", "read")).json()["items"] == []


def test_backfill_needs_the_confirm_token() -> None:
    api = make_api()
    api.client.post("/v1/schedules", json=cron(), headers=api.headers())
    p = api.headers("acme", "policy")
    window = {"from": "2026-05-28T00:00:00Z", "to": "2026-06-01T00:00:00Z"}
    cost = api.client.post("/v1/schedules/nightly/backfill", json=window, headers=p).json()
    assert cost["fires"] == 4 and api.backend.commands == []
    wrong = {**window, "to": "2026-05-31T00:00:00Z", "confirm": cost["confirm"]}
    assert (
        api.client.post("/v1/schedules/nightly/backfill", json=wrong, headers=p).status_code == 422
    )
    ok = api.client.post(
        "/v1/schedules/nightly/backfill", json={**window, "confirm": cost["confirm"]}, headers=p
    )
    assert ok.status_code == 202
    ((command, _),) = api.backend.commands
    assert command.kind is ev.CommandKind.BACKFILL and command.role is ev.Role.POLICY
    assert command.backfill_from == datetime(2026, 5, 28, tzinfo=UTC)
    api.clock.advance(601)
    late = api.client.post(
        "/v1/schedules/nightly/backfill", json={**window, "confirm": cost["confirm"]}, headers=p
    )
    assert late.status_code == 422 and "expired" in late.json()["detail"]
    future = {"from": "2026-06-01T00:00:00Z", "to": "2026-06-09T00:00:00Z"}
    assert (
        api.client.post("/v1/schedules/nightly/backfill", json=future, headers=p).status_code == 422
    )


def test_horizon_within_the_ceiling() -> None:
    api = make_api()
    api.client.post("/v1/schedules", json=cron(), headers=api.headers())
    p = api.headers("acme", "policy")
    r = api.client.post("/v1/schedules/nightly/horizon", json={"horizon_s": 172_800}, headers=p)
    assert r.status_code == 202 and r.json() == {"version": 2}
    d = api.backend.definitions[-1]
    assert d.policies.horizon_s == 172_800 and d.role is ev.Role.POLICY
    above = api.client.post("/v1/schedules/nightly/horizon", json={"horizon_s": 172_801}, headers=p)
    assert above.status_code == 403 and "ceiling" in above.json()["detail"]


def test_the_platform_lists_every_field_of_each_tenants_grant() -> None:
    api = make_api()
    items = api.client.get("/v1/admin/tenants", headers=api.headers("platform", "platform"))
    acme = next(t["grant"] for t in items.json()["items"] if t["tenant"] == "acme")
    assert acme == asdict(replace(TenantGrant(), horizon_max_s=172_800))  # max_concurrency too
    # one grant: the settings' model names exactly the fields the grant has
    assert set(TenantGrantSettings.model_fields) == {f.name for f in fields(TenantGrant)}


def test_platform_suspends_a_tenant() -> None:
    api = make_api()
    admin = api.headers("platform", "platform")
    assert [
        t["tenant"] for t in api.client.get("/v1/admin/tenants", headers=admin).json()["items"]
    ] == ["acme", "globex"]
    r = api.client.put("/v1/admin/tenants/acme/suspension", json={"suspended": True}, headers=admin)
    assert r.status_code == 202
    ((command, every),) = api.backend.commands
    assert every and command.trigger_id == ev.TENANT_WIDE and command.kind is ev.CommandKind.PAUSE
    missing = api.client.put(
        "/v1/admin/tenants/nobody/suspension", json={"suspended": True}, headers=admin
    )
    assert missing.status_code == 404


def test_racing_amends_on_one_version_cannot_both_pass() -> None:
    api = make_api()
    h = api.headers()
    assert api.client.post("/v1/schedules", json=cron(), headers=h).status_code == 201

    async def race() -> list[int]:
        transport = httpx.ASGITransport(app=api.client.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
            amends = [
                client.put(
                    "/v1/schedules/nightly",
                    json=cron(expr=f"0 {hour} * * *"),
                    headers={**h, "If-Match": '"1"'},
                )
                for hour in (7, 8, 9)
            ]
            return sorted(r.status_code for r in await asyncio.gather(*amends))

    assert asyncio.run(race()) == [200, 412, 412]
    assert [d.version for d in api.backend.definitions] == [1, 2]
