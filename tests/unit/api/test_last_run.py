"""Issue 29 item 3: every trigger shows its last run (its latest fire scheduled before now: time,
state, outcome, lateness), in a GET, in the list, beside its events, and in the CLI's table."""

from __future__ import annotations

from datetime import timedelta

from horae.cli.triggers import last_run, trigger_card, triggers_table
from tests.unit.api.support import NOW, cron, fire_row, make_api


def test_get_list_and_events_show_the_latest_fire_before_now() -> None:
    api = make_api()
    author, h = api.headers("acme", "author"), api.headers("acme", "read")
    for trigger_id in ("nightly", "hourly", "fresh"):
        assert api.client.post("/v1/schedules", json=cron(trigger_id), headers=author).is_success
    api.backend.fire_rows += [
        fire_row("n1", NOW - timedelta(days=2)),
        fire_row("n2", NOW - timedelta(days=1), status="failed", lateness_ms=40.0),
        fire_row("n3", NOW + timedelta(hours=1), status="fired", attempt_count=0),  # ahead
        fire_row("h1", NOW - timedelta(hours=1), trigger_id="hourly", lateness_ms=7.0),
        fire_row("g1", NOW - timedelta(minutes=1), tenant="globex"),  # another tenant's
    ]
    one = api.client.get("/v1/schedules/nightly", headers=h).json()
    assert one["last_run"]["fire_key"] == "n2"
    assert one["last_run"]["state"] == "failed" and one["last_run"]["outcome"] == "failed"
    assert one["last_run"]["lateness_ms"] == 40.0
    assert one["last_run"]["scheduled_at"] == "2026-05-31T12:00:00Z"
    page = api.client.get("/v1/schedules", headers=h).json()
    listed = {t["trigger_id"]: t for t in page["items"]}
    assert listed["nightly"]["last_run"] == one["last_run"]
    assert listed["hourly"]["last_run"]["fire_key"] == "h1"
    assert listed["fresh"]["last_run"] is None
    events = api.client.get("/v1/schedules/nightly/events", headers=h).json()
    assert events["last_run"] == one["last_run"]
    api.clock.advance(2 * 3600)  # now n3 is past
    assert api.client.get("/v1/schedules/nightly", headers=h).json()["last_run"]["fire_key"] == "n3"
    # globex's trigger of the same id sees only its own fire
    theirs = cron(target={"kind": "event", "topic": "events.globex"})
    assert api.client.post("/v1/schedules", json=theirs, headers=api.headers("globex", "author"))
    got = api.client.get("/v1/schedules/nightly", headers=api.headers("globex", "read")).json()
    assert got["last_run"]["fire_key"] == "g1"


def test_a_body_built_from_a_get_may_be_sent_back() -> None:
    """``last_run`` is reported, not accepted: the horizon's amend from the answer drops it."""
    api = make_api()
    api.client.post("/v1/schedules", json=cron(), headers=api.headers("acme", "author"))
    api.backend.fire_rows.append(fire_row("n1", NOW - timedelta(days=1)))
    r = api.client.post(
        "/v1/schedules/nightly/horizon",
        json={"horizon_s": 90_000},
        headers=api.headers("acme", "policy"),
    )
    assert r.status_code == 202, r.text


def test_the_cli_table_and_card_show_the_last_run() -> None:
    trigger = {
        "trigger_id": "nightly",
        "state": "live",
        "version": 1,
        "recurrence": {"kind": "every", "interval_s": 60},
        "target": {"kind": "event", "topic": "events.acme"},
        "last_run": {"scheduled_at": "2026-01-01T00:00:00Z", "state": "failed",
                     "cause": None, "lateness_ms": 12.4},
    }  # fmt: skip
    lines = triggers_table([trigger, {**trigger, "last_run": None}]).splitlines()
    assert lines[0].split()[-2:] == ["LAST_RUN", "LAST_STATE"]
    assert lines[1].split()[-2:] == ["2026-01-01T00:00:00Z", "failed"]
    assert lines[2].split()[-2:] == ["-", "-"]
    assert last_run(trigger) == "2026-01-01T00:00:00Z failed, lateness 12 ms"
    assert "2026-01-01T00:00:00Z failed" in trigger_card(trigger)
