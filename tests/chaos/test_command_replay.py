"""A signed manual-run command consumed twice across a SIGKILL of the planner process: the first
copy is committed (with the command's id in the planner state), the process is killed, the same
bytes are produced again and a new process of the same slot reads them. The read_committed ledger
holds exactly one fire for the command, the replay is quarantined ``replayed``, and another manual
run for the same second gets the next sequence (the remembered runs survived the kill)."""

from __future__ import annotations

import signal

import pytest

from horae.contracts import events as ev
from horae.contracts.codec import decode, encode
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


def _committed(env: PlannerEnv, what: str) -> None:
    wait_until(lambda: consumed(env, Topic.DEFINITIONS, Topic.COMMANDS), 90, 0.2, what)


@pytest.mark.timeout(300)
def test_same_command_across_a_sigkill_fires_once(planner_env: PlannerEnv) -> None:
    planner_env.put(definition("hourly", "0 * * * *"))
    run = command("hourly", ev.CommandKind.MANUAL_RUN)
    first = planner_env.spawn("replay")
    wait_until(  # the trigger is live before its command comes (topics are not ordered)
        lambda: consumed(planner_env, Topic.DEFINITIONS), 90, 0.2, "definition never decided"
    )
    planner_env.send(run)
    _committed(planner_env, "the first copy was never committed")
    first.send_signal(signal.SIGKILL)
    assert first.wait(30) == -signal.SIGKILL

    planner_env.produce(Topic.COMMANDS, ev.trigger_key(run.tenant, run.trigger_id), encode(run))
    second = command("hourly", ev.CommandKind.MANUAL_RUN, requested_at=run.requested_at)
    planner_env.send(second)  # another run for the same second, after the replay
    restarted = planner_env.spawn("replay")
    _committed(planner_env, "the restarted planner never committed the replay")
    restarted.send_signal(signal.SIGTERM)
    assert restarted.wait(60) == 0

    fires = ledger(planner_env)
    assert not duplicates(fires)
    mine = [f for f in fires if f.command_id == run.command_id]
    assert [(f.origin, f.state) for f in mine] == [(ev.Origin.MANUAL, ev.FireState.FIRED)]
    other = [f for f in fires if f.command_id == second.command_id]
    assert len(other) == 1 and other[0].scheduled_at == mine[0].scheduled_at
    assert other[0].fire_key != mine[0].fire_key  # the next sequence, not the first's key
    causes = [
        (decode(q.original, ev.Command).command_id, q.cause)
        for q in (decode(v, ev.Quarantined) for _, v in
                  read_all(planner_env.bootstrap, planner_env.topic(Topic.QUARANTINE)) if v)
    ]  # fmt: skip
    assert causes == [(run.command_id, "replayed")]
