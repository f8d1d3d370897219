"""Manual runs, backfills (authorised or not), pause/resume, and poison definitions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from horae.contracts import events as ev
from horae.contracts.codec import decode
from horae.contracts.topics import Topic
from tests.integration.planner.harness import (
    PlannerEnv,
    command,
    consumed,
    definition,
    duplicates,
    ledger,
    read_all,
)
from tests.waiting import wait_until


def _decoded(env: PlannerEnv, topic: Topic, t: type[ev.Event]) -> list[ev.Event]:
    return [decode(v, t) for _, v in read_all(env.bootstrap, env.topic(topic)) if v]


def test_commands_and_poison(planner_env: PlannerEnv) -> None:
    hourly = definition("hourly", "0 * * * *")
    planner_env.put(hourly)
    planner_env.put(definition("never", "0 0 30 2 *"))  # no instant in the next 5 years
    planner_env.start_thread("a")
    wait_until(lambda: consumed(planner_env, Topic.DEFINITIONS), 60, 0.2, "definitions decided")
    now = datetime.now(UTC).replace(microsecond=0)
    window = {"backfill_from": now - timedelta(hours=5), "backfill_to": now - timedelta(hours=1)}
    planner_env.send(command("hourly", ev.CommandKind.MANUAL_RUN))
    planner_env.send(command("hourly", ev.CommandKind.BACKFILL, ev.Role.AUTHOR, **window))
    planner_env.send(command("hourly", ev.CommandKind.BACKFILL, ev.Role.POLICY, **window))
    planner_env.send(command("hourly", ev.CommandKind.PAUSE))
    planner_env.send(command("hourly", ev.CommandKind.RESUME))
    wait_until(lambda: consumed(planner_env, Topic.COMMANDS), 60, 0.2, "commands decided")
    planner_env.stop_threads()

    fires = ledger(planner_env)
    assert not duplicates(fires)
    manual = [f for f in fires if f.origin is ev.Origin.MANUAL]
    assert len(manual) == 1 and manual[0].lane is ev.Lane.MANUAL
    backfill = [f for f in fires if f.origin is ev.Origin.BACKFILL]
    assert len(backfill) == 4 and all(f.lane is ev.Lane.BACKFILL for f in backfill)

    audit = _decoded(planner_env, Topic.AUDIT, ev.AuditEntry)
    acts = sorted((a.action, a.allowed) for a in audit if isinstance(a, ev.AuditEntry))
    assert acts == [  # the author-declared backfill refused; the manual run is audited too
        ("backfill.request", False),
        ("backfill.request", True),
        ("manual_run.request", True),
    ]
    events = _decoded(planner_env, Topic.SCHEDULE_EVENTS, ev.ScheduleEvent)
    types = [e.type for e in events if isinstance(e, ev.ScheduleEvent)]
    assert types.count("schedule.rejected") == 1
    assert "schedule.paused" in types and "schedule.resumed" in types

    quarantined = _decoded(planner_env, Topic.QUARANTINE, ev.Quarantined)
    never = [q for q in quarantined if isinstance(q, ev.Quarantined) and q.trigger_id == "never"]
    assert len(never) == 1 and never[0].cause == "invalid"
    assert "no instant in the next 5 years" in never[0].detail
