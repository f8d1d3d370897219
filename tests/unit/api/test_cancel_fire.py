"""``POST /v1/schedules/{id}/cancel?fire_key=``: the tenant's fire waiting or retrying gets a
platform-signed cancel command naming the actor (202); one already cancelled answers 200, one
that ended or never dispatched 409 saying why, another tenant's 404 — and none of those produces
anything. The in-memory backend; the planner's side: tests/unit/planner/test_cancel.py."""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import quote

import pytest

from horae.contracts import events as ev
from horae.contracts import signing
from horae.domain.keys import FireKey
from tests.unit.api.support import NOW, Api, cron, fire_row, make_api

AT = NOW - timedelta(minutes=5)


def key(trigger_id: str = "nightly", tenant: str = "acme", minutes: int = 5) -> str:
    at = int((NOW - timedelta(minutes=minutes)).timestamp())
    return FireKey(tenant, trigger_id, at).canonical()


def path(fire_key: str, trigger_id: str = "nightly") -> str:
    return f"/v1/schedules/{trigger_id}/cancel?fire_key={quote(fire_key, safe='')}"


@pytest.fixture
def api() -> Api:
    api = make_api()
    author = api.headers("acme", "author")
    assert api.client.post("/v1/schedules", json=cron(), headers=author).status_code == 201
    evented = cron("evented", target={"kind": "event", "topic": "events.acme"})
    assert api.client.post("/v1/schedules", json=evented, headers=author).status_code == 201
    api.backend.fire_rows += [
        fire_row(key(), AT, status="dispatching", outcome=None),
        fire_row(key(minutes=6), AT, status="succeeded"),
        fire_row(key(minutes=7), AT, status="cancelled", outcome="cancelled"),
        fire_row(key(minutes=8), AT, status="skipped", state="skipped", outcome=None),
        fire_row(key("evented"), AT, trigger_id="evented", status="fired", outcome=None),
        fire_row(key(tenant="globex"), AT, tenant="globex", status="dispatching", outcome=None),
    ]
    return api


def test_a_retrying_fire_gets_its_cancel_command_naming_the_actor(api: Api) -> None:
    r = api.client.post(path(key()), headers=api.headers("acme", "author"))
    assert r.status_code == 202, r.text
    ((command, every_partition),) = api.backend.commands
    assert r.json() == {"command_id": command.command_id, "fire_key": key()}
    assert not every_partition, "the trigger's partition only"
    assert (command.tenant, command.trigger_id, command.kind, command.cancel_fire_key) == (
        "acme",
        "nightly",
        ev.CommandKind.PAUSE,
        key(),
    )
    assert "alice" in command.requested_by and command.role is ev.Role.AUTHOR
    assert command.expires_at is not None and command.signature is not None
    assert signing.check(command, {"horae-platform": b"platform-secret"}) is None


@pytest.mark.parametrize(
    ("minutes", "status", "says"),
    [
        (7, 200, "already cancelled"),
        (6, 409, "already ended succeeded"),
        (8, 409, "is skipped, not fired"),
    ],
)
def test_a_fire_with_nothing_left_to_cancel_says_why(
    api: Api, minutes: int, status: int, says: str
) -> None:
    r = api.client.post(path(key(minutes=minutes)), headers=api.headers("acme", "author"))
    assert r.status_code == status, r.text
    assert says in (r.json().get("detail") or ""), r.json()
    assert api.backend.commands == [], "nothing produced"


def test_an_event_target_s_fire_is_refused(api: Api) -> None:
    r = api.client.post(path(key("evented"), "evented"), headers=api.headers("acme", "author"))
    assert r.status_code == 409 and "event target" in r.json()["detail"]
    assert api.backend.commands == []


def test_another_tenant_s_fire_is_not_found_and_a_reader_may_not_cancel(api: Api) -> None:
    theirs = api.client.post(path(key(tenant="globex")), headers=api.headers("acme", "author"))
    assert theirs.status_code == 404
    mine = api.client.post(path(key()), headers=api.headers("globex", "author"))
    assert mine.status_code == 404, "acme's fire, asked by globex's token"
    assert api.client.post(path(key()), headers=api.headers("acme", "read")).status_code == 403
    assert api.client.post(path("no-such-fire"), headers=api.headers()).status_code == 404
    other = api.client.post(path(key(), "evented"), headers=api.headers("acme", "author"))
    assert other.status_code == 404, "a fire of another trigger than the path's"
    assert api.backend.commands == []
