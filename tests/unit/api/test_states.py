"""What a trigger is doing reaches every answer (issue 23, item 4): ``state`` is ``live``,
``paused``, ``suspended``, ``completed`` or ``deleted`` (the read models' ``trigger_states``),
``run_state`` the state it is decided under (what an amend keeps); a trigger that is not live
has no upcoming instants; the list's ``state`` filter takes each; an amend keeps a pause unless
it names a state; a version the API just wrote of a suspended tenant's trigger shows suspended."""

from __future__ import annotations

from typing import Any

import pytest

from horae.api.ports import SHOWN_STATES
from horae.contracts import events as ev
from tests.unit.api.support import Api, cron, make_api


def created(api: Api, trigger_id: str, **extra: Any) -> None:
    r = api.client.post("/v1/schedules", json=cron(trigger_id, **extra), headers=api.headers())
    assert r.status_code == 201, r.text


def shown(api: Api, trigger_id: str) -> dict[str, Any]:
    r = api.client.get(f"/v1/schedules/{trigger_id}", headers=api.headers())
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def listed(api: Api, state: str | None = None) -> dict[str, str]:
    query = "" if state is None else f"?state={state}"
    r = api.client.get(f"/v1/schedules{query}", headers=api.headers())
    assert r.status_code == 200, r.text
    return {t["trigger_id"]: t["state"] for t in r.json()["items"]}


def amend(api: Api, trigger_id: str, **changes: Any) -> ev.TriggerDefinition:
    held = shown(api, trigger_id)
    r = api.client.put(
        f"/v1/schedules/{trigger_id}",
        json=cron(trigger_id, **changes),
        headers=api.headers(**{"If-Match": f'"{held["version"]}"'}),
    )
    assert r.status_code == 200, r.text
    return api.backend.definitions[-1]


def test_each_state_is_shown_listed_and_filtered() -> None:
    api = make_api()
    for name in ("on", "held", "done", "gone"):
        created(api, name)
    api.backend.applied("acme", "held", "paused")  # a pause command the planner applied
    api.backend.applied("acme", "done", "completed")  # its count fired
    assert api.client.delete("/v1/schedules/gone", headers=api.headers()).status_code == 204

    expected = {"on": "live", "held": "paused", "done": "completed"}
    assert listed(api) == expected
    for state in SHOWN_STATES:
        want = {t: s for t, s in {**expected, "gone": "deleted"}.items() if s == state}
        assert listed(api, state) == want, state
    for name, state in expected.items():
        body = shown(api, name)
        assert body["state"] == state
        assert body["run_state"] == ("paused" if name == "held" else "live")
        assert bool(body["next_instants"]) is (state == "live"), body

    api.backend.suspended.add("acme")  # horae tenants suspend acme
    assert listed(api) == {"on": "suspended", "held": "suspended", "done": "suspended"}
    assert listed(api, "suspended") == listed(api) and listed(api, "live") == {}
    on = shown(api, "on")
    assert (on["state"], on["run_state"], on["next_instants"]) == ("suspended", "live", [])
    assert shown(api, "held")["run_state"] == "paused"  # it resumes paused when the tenant does
    history = api.client.get("/v1/schedules/on/history", headers=api.headers())
    assert history.status_code == 200 and history.json()["trigger_state"] == "suspended"


@pytest.mark.parametrize("state", ["running", "LIVE", "live,paused", ""])
def test_the_state_filter_refuses_other_values(state: str) -> None:
    api = make_api()
    r = api.client.get(f"/v1/schedules?state={state}", headers=api.headers())
    assert r.status_code == 422 and r.json()["errors"][0]["field"] == "state", r.text


def test_an_amend_keeps_a_pause_unless_it_names_a_state() -> None:
    api = make_api()
    created(api, "held")
    api.backend.applied("acme", "held", "paused")
    assert amend(api, "held", description="x").state is ev.DefinitionState.PAUSED
    assert shown(api, "held")["state"] == "paused"
    assert amend(api, "held", state="live").state is ev.DefinitionState.LIVE
    assert shown(api, "held")["state"] == "live"
    assert amend(api, "held", state="paused").state is ev.DefinitionState.PAUSED


def test_a_version_just_written_of_a_suspended_tenant_shows_suspended() -> None:
    api = make_api(auto_project=False)
    created(api, "on")
    api.backend.project()
    api.backend.suspended.add("acme")
    amend(api, "on", description="newer")  # not projected yet: read-your-writes serves it
    body = shown(api, "on")
    assert body["version"] == 2 and body["state"] == "suspended" and body["run_state"] == "live"
    assert body["next_instants"] == []
    assert listed(api) == {"on": "suspended"}
    assert listed(api, "suspended") == {"on": "suspended"}


def test_the_openapi_document_names_every_state() -> None:
    doc = make_api().client.get("/v1/openapi.json").json()
    out = doc["components"]["schemas"]["TriggerOut"]["properties"]
    assert out["state"]["enum"] == list(SHOWN_STATES)
    assert out["run_state"]["enum"] == ["live", "paused", "deleted"]
    assert doc["components"]["schemas"]["TriggerIn"]["properties"]["state"]["enum"] == [
        "live",
        "paused",
    ]
    params = doc["paths"]["/v1/schedules"]["get"]["parameters"]
    [param] = [p for p in params if p["name"] == "state"]
    pattern = param["schema"]["anyOf"][0]["pattern"]
    assert all(s in pattern for s in SHOWN_STATES)
