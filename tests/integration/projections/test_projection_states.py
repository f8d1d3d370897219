"""A trigger's state in the read models is what the planner applied, not only what its definition
says (real broker, real database): a pause or resume by command (its ``schedule.paused`` /
``schedule.resumed``), a completion (``schedule.completed``), a tenant's suspension (the audited
``tenant.suspend`` / ``tenant.resume``); a later version governs again; the API's queries answer
the state the planner decides under (an amend keeps it) and what the trigger is doing (shown and
filtered: live, paused, suspended, completed)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta
from typing import Any

import psycopg

from horae.contracts import events as ev
from horae.contracts.routing import Router
from horae.contracts.topics import partition_for
from horae.ports import Emit
from horae.projections.projector import Projector, ProjectorConfig
from horae.projections.queries import HistoryQueries
from horae.projections.synthetic import START, HistoryProducer, audit, definition
from tests.integration.projections.projection_support import (
    PARTITIONS,
    end_offsets,
    running,
    wait_caught_up,
)

TENANT, SUSPENDED = "tenant-0", "tenant-1"


def test_the_read_models_show_what_the_planner_applied(
    config: ProjectorConfig,
    producer: HistoryProducer,
    db: psycopg.Connection[Any],
    topics: list[str],
) -> None:
    router = Router(config.topic_prefix)
    records: list[Emit] = []
    n = [0]

    def put(d: ev.TriggerDefinition) -> None:
        records.append(router.emit(d, partition_for(f"{d.tenant}/{d.trigger_id}", PARTITIONS)))

    def say(trigger: str, kind: ev.ScheduleEventType, version: int, tenant: str = TENANT) -> None:
        n[0] += 1
        event = ev.ScheduleEvent(
            event_id=f"e{n[0]}",
            type=kind.value,
            tenant=tenant,
            trigger_id=trigger,
            emitted_at=START + timedelta(seconds=n[0]),
            trigger_version=version,
        )
        records.append(router.emit(event, partition_for(f"{tenant}/{trigger}", PARTITIONS)))

    def version(trigger: str, v: int, state: ev.DefinitionState) -> ev.TriggerDefinition:
        return replace(definition(TENANT, trigger, v), state=state)

    live, paused, deleted = (
        ev.DefinitionState.LIVE,
        ev.DefinitionState.PAUSED,
        ev.DefinitionState.DELETED,
    )
    put(version("by-command", 1, live))
    say("by-command", ev.ScheduleEventType.PAUSED, 1)  # a pause command
    put(version("resumed", 1, paused))
    say("resumed", ev.ScheduleEventType.PAUSED, 1)
    say("resumed", ev.ScheduleEventType.RESUMED, 1)  # a resume command
    put(version("kept", 1, live))
    say("kept", ev.ScheduleEventType.PAUSED, 1)
    put(version("kept", 2, paused))  # an amend that keeps the pause: no event
    put(version("done", 1, live))
    say("done", ev.ScheduleEventType.COMPLETED, 1)
    put(version("done-then-longer", 1, live))
    say("done-then-longer", ev.ScheduleEventType.COMPLETED, 1)
    put(version("done-then-longer", 2, live))  # a later end: live again
    put(version("recreated", 1, live))
    say("recreated", ev.ScheduleEventType.PAUSED, 1)
    put(version("recreated", 2, deleted))
    put(version("recreated", 3, live))  # starts afresh
    put(version("plain", 1, live))
    put(replace(definition(SUSPENDED, "x"), state=live))
    put(replace(definition("tenant-2", "y"), state=live))
    suspend = replace(audit(SUSPENDED, 1), audit_id="s1", action="tenant.suspend")
    records += [router.emit(suspend, 0), router.emit(replace(suspend, audit_id="s2"), 1)]
    lifted = replace(audit("tenant-2", 2), action="tenant.resume", audit_id="r1")
    records += [
        router.emit(replace(lifted, action="tenant.suspend", audit_id="r0"), 0),
        router.emit(lifted, 2),  # suspended, then lifted
        router.emit(replace(suspend, audit_id="refused", allowed=False, tenant="tenant-3"), 0),
    ]
    producer.send(records)
    producer.flush()
    ends = end_offsets(config.bootstrap, topics)
    with running(Projector(config)):
        wait_caught_up(db, config.schema, ends)

    rows = db.execute(
        f'SELECT tenant, trigger_id, state, run_state FROM "{config.schema}".trigger_states'
    ).fetchall()
    states = {(str(t), str(i)): (str(s), str(r)) for t, i, s, r in rows}
    assert states == {
        (TENANT, "by-command"): ("paused", "paused"),
        (TENANT, "resumed"): ("live", "live"),
        (TENANT, "kept"): ("paused", "paused"),
        (TENANT, "done"): ("completed", "live"),
        (TENANT, "done-then-longer"): ("live", "live"),
        (TENANT, "recreated"): ("live", "live"),
        (TENANT, "plain"): ("live", "live"),
        (SUSPENDED, "x"): ("suspended", "live"),
        ("tenant-2", "y"): ("live", "live"),
    }

    history = HistoryQueries(db, config.schema)
    row = history.trigger_row(TENANT, "by-command")
    assert row is not None and (row["state"], row["shown_state"]) == ("paused", "paused")
    row = history.trigger_row(SUSPENDED, "x")
    assert row is not None and (row["state"], row["shown_state"]) == ("live", "suspended")
    row = history.trigger_row(TENANT, "done")
    assert row is not None and (row["state"], row["shown_state"]) == ("live", "completed")
    page = history.trigger_rows(TENANT, state="paused")
    assert sorted(r["trigger_id"] for r in page.items) == ["by-command", "kept"]
    listed = {r["trigger_id"]: r["state"] for r in history.trigger_rows(TENANT).items}
    assert listed == {t: shown for (tenant, t), (shown, _) in states.items() if tenant == TENANT}
    for r in history.trigger_rows(TENANT).items:  # the body carries both states
        body = json.loads(r["body"])
        assert (body["state"], body["run_state"]) == states[(TENANT, r["trigger_id"])]
    live_ids = sorted(r["trigger_id"] for r in history.trigger_rows(TENANT, state="live").items)
    assert live_ids == ["done-then-longer", "plain", "recreated", "resumed"]
    done = history.trigger_rows(TENANT, state="completed").items
    assert [r["trigger_id"] for r in done] == ["done"]
    assert [r["trigger_id"] for r in history.trigger_rows(SUSPENDED, state="suspended").items] == [
        "x"
    ]
    assert history.trigger_rows(SUSPENDED, state="live").items == []
