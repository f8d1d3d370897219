"""Group acts (``POST /v1/groups/{act}``, :mod:`horae.api.groups`) on the in-memory backend:
the dry run's count, each trigger's act through its single-trigger path, one audit entry, a
repeated request acting once, a request id reused for another act refused, the run state kept
by a group amend, and a selector that never reaches another tenant's triggers."""

from __future__ import annotations

from typing import Any

from horae.api.groups import group_audit_id, group_command_id, merged_policies
from horae.contracts import events as ev
from tests.unit.api.support import Api, cron, make_api


def seeded() -> Api:
    api = make_api()
    for tenant, trigger_id, env in (
        ("acme", "a1", "prod"),
        ("acme", "a2", "prod"),
        ("acme", "a3", "dev"),
        ("globex", "g1", "prod"),
    ):
        body = cron(trigger_id, labels={"env": env, "team": "ops"})
        if tenant == "globex":
            body["target"] = {"kind": "event", "topic": f"events.{tenant}"}
        r = api.client.post("/v1/schedules", json=body, headers=api.headers(tenant))
        assert r.status_code == 201, r.text
    return api


def group(api: Api, act: str, tenant: str = "acme", **body: Any) -> Any:
    r = api.client.post(f"/v1/groups/{act}", json=body, headers=api.headers(tenant))
    return r


def commands(api: Api) -> list[ev.Command]:
    return [c for c, _ in api.backend.commands]


def test_dry_run_counts_and_does_nothing() -> None:
    api = seeded()
    r = group(api, "pause", selector="env=prod", dry_run=True)
    assert r.status_code == 200, r.text
    assert r.json() == {
        "act": "pause", "selector": "env=prod", "dry_run": True, "matched": 2,
        "would_change": 2, "trigger_ids": ["a1", "a2"],
    }  # fmt: skip
    assert commands(api) == [] and api.backend.audits == []


def test_pause_sends_each_trigger_its_command_and_audits_once() -> None:
    api = seeded()
    r = group(api, "pause", selector="team=ops,env=prod", request_id="req-1")
    assert r.status_code == 200, r.text
    body = r.json()
    assert [c["trigger_id"] for c in body["changed"]] == ["a1", "a2"]
    sent = commands(api)
    assert [(c.trigger_id, c.kind, c.tenant) for c in sent] == [
        ("a1", ev.CommandKind.PAUSE, "acme"),
        ("a2", ev.CommandKind.PAUSE, "acme"),
    ]
    assert [c.command_id for c in sent] == [
        group_command_id(ev.CommandKind.PAUSE, "acme", "req-1", t) for t in ("a1", "a2")
    ]
    assert all(c.signature is not None and c.requested_by.startswith("alice (") for c in sent)
    (entry,) = api.backend.audits
    assert entry.audit_id == group_audit_id("acme", "req-1")
    assert (entry.action, entry.tenant, entry.role) == ("group.pause", "acme", ev.Role.AUTHOR)
    assert entry.detail["selector"] == "env=prod,team=ops"
    assert (entry.detail["matched"], entry.detail["changed"]) == ("2", "2")
    assert entry.detail["trigger_ids"] == "a1,a2"


def test_the_same_request_twice_acts_once() -> None:
    api = seeded()
    first = group(api, "pause", selector="env=prod", request_id="again").json()
    again = group(api, "pause", selector="env=prod", request_id="again")
    assert again.status_code == 200, again.text
    assert again.json()["replayed"] is True
    assert again.json()["matched"] == first["matched"] == 2
    assert len(commands(api)) == 2 and len(api.backend.audits) == 1
    other = group(api, "resume", selector="env=prod", request_id="again")
    assert other.status_code == 409, other.text
    assert "another group act" in other.json()["detail"]
    wider = group(api, "pause", selector="team=ops", request_id="again")
    assert wider.status_code == 409


def test_before_the_audit_is_read_back_the_commands_repeat_their_ids() -> None:
    """A repeat the read models do not show yet sends the same command ids: the planner
    refuses the second of each as ``replayed``."""
    api = seeded()
    group(api, "pause", selector="env=prod", request_id="lagging")
    api.backend.audit_rows.clear()  # the projector has not read the audit entry yet
    group(api, "pause", selector="env=prod", request_id="lagging")
    ids = [c.command_id for c in commands(api)]
    assert len(ids) == 4 and ids[:2] == ids[2:]


def test_a_request_id_is_required_unless_dry_run() -> None:
    api = seeded()
    r = group(api, "pause", selector="env=prod")
    assert r.status_code == 422 and r.json()["errors"][0]["field"] == "request_id"
    bad = group(api, "pause", selector="env=prod", request_id="no spaces")
    assert bad.status_code == 422 and bad.json()["errors"][0]["field"] == "request_id"


def test_selector_refusals_name_the_field() -> None:
    api = seeded()
    for text in ("", "env", "env!=prod", "env=a,env=b"):
        r = group(api, "pause", selector=text, dry_run=True)
        assert r.status_code == 422, r.text
        assert r.json()["errors"][0]["field"] == "selector"
    assert group(api, "explode", selector="env=prod", dry_run=True).status_code == 422
    r = group(api, "pause", selector="env=prod", dry_run=True, policies={"misfire": "skip"})
    assert r.status_code == 422 and r.json()["errors"][0]["field"] == "policies"


def test_already_in_state_is_unchanged() -> None:
    api = seeded()
    api.backend.applied("acme", "a1", "paused")
    dry = group(api, "pause", selector="env=prod", dry_run=True).json()
    assert (dry["matched"], dry["would_change"]) == (2, 1)
    done = group(api, "pause", selector="env=prod", request_id="r2").json()
    assert [c["trigger_id"] for c in done["changed"]] == ["a2"]
    assert done["unchanged"] == ["a1"]


def test_delete_goes_through_each_triggers_delete() -> None:
    api = seeded()
    done = group(api, "delete", selector="env=prod", request_id="gone").json()
    assert [c["trigger_id"] for c in done["changed"]] == ["a1", "a2"]
    states = {d.trigger_id: d.state for d in api.backend.definitions if d.tenant == "acme"}
    assert states == {
        "a1": ev.DefinitionState.DELETED,
        "a2": ev.DefinitionState.DELETED,
        "a3": ev.DefinitionState.LIVE,
    }
    again = group(api, "delete", selector="env=prod", dry_run=True).json()
    assert again["matched"] == 0  # deleted triggers are not selected


def test_policies_amend_keeps_a_pause_and_skips_what_holds() -> None:
    api = seeded()
    api.backend.applied("acme", "a1", "paused")  # a pause the planner applied by command
    done = group(
        api, "policies", selector="env=prod", request_id="p1", policies={"misfire": "skip"}
    )
    assert done.status_code == 200, done.text
    assert [c["trigger_id"] for c in done.json()["changed"]] == ["a1", "a2"]
    latest = {d.trigger_id: d for d in api.backend.definitions if d.tenant == "acme"}
    assert latest["a1"].version == 2 and latest["a1"].policies.misfire.value == "skip"
    assert latest["a1"].state is ev.DefinitionState.PAUSED  # the pause is kept
    assert latest["a2"].state is ev.DefinitionState.LIVE
    shown = api.client.get("/v1/schedules/a1", headers=api.headers("acme", "read")).json()
    assert shown["state"] == "paused"
    same = group(
        api, "policies", selector="env=prod", request_id="p2", policies={"misfire": "skip"}
    ).json()
    assert same["changed"] == [] and same["unchanged"] == ["a1", "a2"]


def test_policies_above_the_tokens_grants_fail_per_trigger() -> None:
    api = seeded()
    r = group(api, "policies", selector="env=prod", request_id="h", policies={"horizon_s": 100_000})
    assert r.status_code == 200, r.text
    failed = r.json()["failed"]
    assert [f["trigger_id"] for f in failed] == ["a1", "a2"]
    assert {f["status"] for f in failed} == {403}


def test_a_selector_never_reaches_another_tenant() -> None:
    """globex's ``env=prod`` selects globex's trigger only; acme's are neither counted, nor
    sent a command, nor deleted; and a request id acme used is globex's to use too."""
    api = seeded()
    group(api, "pause", selector="env=prod", request_id="shared-id")
    dry = group(api, "delete", "globex", selector="env=prod", dry_run=True).json()
    assert dry["trigger_ids"] == ["g1"]
    done = group(api, "delete", "globex", selector="env=prod", request_id="shared-id")
    assert done.status_code == 200, done.text
    assert done.json()["replayed"] is False
    assert [c["trigger_id"] for c in done.json()["changed"]] == ["g1"]
    assert {c.tenant for c in commands(api)} == {"acme"}
    deleted = [d for d in api.backend.definitions if d.state is ev.DefinitionState.DELETED]
    assert [(d.tenant, d.trigger_id) for d in deleted] == [("globex", "g1")]
    for tid in ("a1", "a2"):
        r = api.client.get(f"/v1/schedules/{tid}", headers=api.headers("globex", "read"))
        assert r.status_code == 404


def test_a_reader_cannot_act_on_a_group() -> None:
    api = seeded()
    r = api.client.post(
        "/v1/groups/pause",
        json={"selector": "env=prod", "request_id": "x"},
        headers=api.headers("acme", "read"),
    )
    assert r.status_code == 403 and commands(api) == []


def test_policies_merge_field_by_field() -> None:
    current = {"misfire": "fire_once", "retry": {"max_attempts": 5, "backoff_s": 2}}
    assert merged_policies(current, {"retry": {"max_attempts": 3}}) == {
        "misfire": "fire_once",
        "retry": {"max_attempts": 3, "backoff_s": 2},
    }
