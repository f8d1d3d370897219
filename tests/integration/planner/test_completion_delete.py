"""Delete after completion on the real broker and PostgreSQL: a trigger with ``count`` 2 and
``policies.action_after_completion`` ``delete`` fires twice, completes, and the planner writes its
deleted version 2 onto ``definitions.accepted`` with an audit entry, in the completion's
transaction; a restart rebuilds it deleted (nothing more fires); the projector's read models show
it deleted, with the audit entry, as the API answers."""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import psycopg

from horae.contracts import events as ev
from horae.contracts import signing
from horae.contracts.codec import decode
from horae.contracts.topics import Topic
from horae.projections.projector import Projector, ProjectorConfig
from horae.projections.queries import HistoryQueries
from horae.streams.planner.decide import COMPLETION_AUTHOR
from tests.integration.planner.harness import (
    KEY_ID,
    SECRET,
    TENANT,
    PlannerEnv,
    consumed,
    decided_since,
    definition,
    ledger,
    read_all,
)
from tests.integration.projections.projection_support import running
from tests.waiting import wait_until

DELETE = ev.Policies(action_after_completion=ev.ActionAfterCompletion.DELETE)


def _read(env: PlannerEnv, t: Topic, kind: type[Any]) -> list[Any]:
    return [decode(v, kind) for _, v in read_all(env.bootstrap, env.topic(t)) if v]


def test_a_completed_trigger_is_deleted_audited_and_shown_deleted(
    planner_env: PlannerEnv, database_url: str, unique: str
) -> None:
    v0 = int(time.time()) // 60 * 60 + 30
    virtual = [float(v0)]
    d = definition("twice", "* * * * *", policies=DELETE)
    counted = replace(d, recurrence=replace(d.recurrence, count=2), signature=None)
    planner_env.put(signing.sign(counted, KEY_ID, SECRET))
    clock = {"clock": lambda: virtual[0], "max_skew_s": 1e9}
    planner_env.start_thread("a", **clock)  # type: ignore[arg-type]
    wait_until(lambda: consumed(planner_env, Topic.DEFINITIONS), 60, 0.2, "definition applied")
    for t in (v0 + 30, v0 + 90):
        virtual[0] = t + 1.0
        wait_until(partial(decided_since, planner_env, t, ["twice"]), 60, 0.1, f"{t}")

    def deleted() -> bool:
        versions = _read(planner_env, Topic.ACCEPTED, ev.TriggerDefinition)
        return any(v.state is ev.DefinitionState.DELETED for v in versions)

    wait_until(deleted, 60, 0.2, "deleted version on definitions.accepted")
    planner_env.stop_threads()
    virtual[0] = v0 + 900.0  # a restart, much later: the rebuilt index holds it deleted
    planner_env.start_thread("a", **clock)  # type: ignore[arg-type]
    planner_env.put(definition("other", "* * * * *"))
    wait_until(lambda: consumed(planner_env, Topic.DEFINITIONS), 60, 0.2, "later step taken")
    planner_env.stop_threads()

    fires = [f for f in ledger(planner_env) if f.trigger_id == "twice"]
    assert sorted(int(f.scheduled_at.timestamp()) for f in fires) == [v0 + 30, v0 + 90]
    versions = [
        v
        for v in _read(planner_env, Topic.ACCEPTED, ev.TriggerDefinition)
        if v.trigger_id == "twice"
    ]
    assert [(v.version, v.state) for v in versions] == [
        (1, ev.DefinitionState.LIVE),
        (2, ev.DefinitionState.DELETED),
    ]
    assert (versions[1].author, versions[1].role) == (COMPLETION_AUTHOR, ev.Role.PLATFORM)
    audits = [a for a in _read(planner_env, Topic.AUDIT, ev.AuditEntry) if a.trigger_id == "twice"]
    assert [(a.action, a.allowed, a.detail["version"]) for a in audits] == [
        ("completion.delete", True, "2")
    ]
    (done,) = [
        e
        for e in _read(planner_env, Topic.SCHEDULE_EVENTS, ev.ScheduleEvent)
        if e.type == ev.ScheduleEventType.COMPLETED.value
    ]
    assert done.cause == (
        "completed: fired 2 times; deleted: version 2 (action_after_completion delete)"
    )
    states = [
        s
        for s in _read(planner_env, Topic.PLANNER_STATE, ev.PlannerState)
        if s.trigger_id == "twice"
    ]
    assert (states[-1].trigger_version, states[-1].state) == (2, ev.DefinitionState.DELETED)

    # the read models, in PostgreSQL
    schema = f"proj_{unique}"
    config = ProjectorConfig(
        bootstrap=planner_env.bootstrap,
        database_url=database_url,
        schema=schema,
        topic_prefix=planner_env.prefix,
        batch_ms=100,
        consumer_overrides={"session.timeout.ms": 6000, "heartbeat.interval.ms": 500},
    )
    try:
        with psycopg.connect(database_url, autocommit=True) as db:
            history = HistoryQueries(db, schema)
            now = datetime.now(UTC)

            def projected() -> bool:
                try:
                    row = history.trigger_row(TENANT, "twice")
                    page = history.audit_entries(
                        TENANT, now - timedelta(days=1), now + timedelta(1)
                    )
                except psycopg.errors.UndefinedTable:  # the projector has not migrated yet
                    return False
                return row is not None and row["version"] == 2 and bool(page.items)

            # (the planner's topics are transactional: their ends count the commit markers,
            # so the read models are awaited, not the stored offsets)
            with running(Projector(config)):
                wait_until(projected, 60, 0.2, "the deletion projected")
            row = history.trigger_row(TENANT, "twice")
            assert row is not None and (row["version"], row["state"]) == (2, "deleted"), row
            assert "twice" not in [r["trigger_id"] for r in history.trigger_rows(TENANT).items]
            page = history.audit_entries(TENANT, now - timedelta(days=1), now + timedelta(days=1))
            assert [(r["action"], r["trigger_id"]) for r in page.items] == [
                ("completion.delete", "twice")
            ]
    finally:
        with psycopg.connect(database_url, autocommit=True) as conn:
            for s in (schema, f"{schema}_shadow", f"{schema}_old", f"{schema}_api"):
                conn.execute(f'DROP SCHEMA IF EXISTS "{s}" CASCADE')
