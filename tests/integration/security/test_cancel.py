"""A fire's cancel cannot reach another tenant's or another trigger's fire, through the real
broker and planner with real keys: a cancel signed by acme's key for acme's trigger but naming
globex's fire, or acme's other trigger's, is quarantined ``invalid`` and audited refused; one
naming globex's trigger is refused at its signature (cause ``signature``: an acme key is
no key of globex); a cancel by a key without the author role is ``forbidden``. No cancel marker
reaches any lane, and the trigger is not paused."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from horae.contracts import events as ev
from horae.contracts import signing
from horae.contracts.codec import decode
from horae.contracts.grants import Grants
from horae.contracts.topics import Topic, lane_topic
from horae.domain.keys import FireKey
from tests.integration.planner.harness import (
    KEY_ID,
    ROLES,
    SECRET,
    TENANT,
    PlannerEnv,
    command,
    consumed,
    decided_since,
    definition,
    ledger,
    read_all,
)
from tests.waiting import wait_until

READER_ID, READER_SECRET = "acme-reader", b"acme-reader-secret"  # grants read only
KEYS = {TENANT: {KEY_ID: SECRET, READER_ID: READER_SECRET}, "globex": {"globex-1": b"g-secret"}}
GRANTS = Grants(
    roles={
        TENANT: {
            KEY_ID: frozenset(ev.Role(r) for r in ROLES),
            READER_ID: frozenset({ev.Role.READ}),
        }
    }
)


def test_a_cancel_never_reaches_another_tenant_or_trigger(planner_env: PlannerEnv) -> None:
    planner_env.put(definition("sec"))  # every second
    planner_env.put(definition("other"))
    planner_env.start_thread("a", tenant_keys=KEYS, grants=GRANTS)
    wait_until(lambda: consumed(planner_env, Topic.DEFINITIONS), 60, 0.2, "definitions decided")
    wait_until(lambda: decided_since(planner_env, datetime.now(UTC).timestamp(), ["other"]), 60,
               0.2, "other fired")  # fmt: skip
    other = next(f.fire_key for f in ledger(planner_env) if f.trigger_id == "other")
    instant = FireKey.parse(other).scheduled
    theirs = FireKey("globex", "sec", instant).canonical()
    pause = ev.CommandKind.PAUSE
    by_reader = command("sec", pause, cancel_fire_key=other.replace("/other/", "/sec/"))
    cases = {
        "globex's fire": (command("sec", pause, cancel_fire_key=theirs), "invalid"),
        "acme's other trigger's fire": (command("sec", pause, cancel_fire_key=other), "invalid"),
        "globex's trigger": (
            replace(command("sec", pause, cancel_fire_key=theirs), tenant="globex"),
            "signature",
        ),
        "a read-only key": (
            signing.sign(replace(by_reader, signature=None), READER_ID, READER_SECRET),
            "forbidden",
        ),
    }
    for c, _ in cases.values():
        planner_env.send(c)
    sent_at = datetime.now(UTC).timestamp()
    wait_until(lambda: consumed(planner_env, Topic.COMMANDS), 60, 0.2, "commands decided")
    wait_until(lambda: decided_since(planner_env, sent_at + 2, ["sec"]), 60, 0.2, "sec decided")
    planner_env.stop_threads()

    quarantined: dict[str, str] = {}
    for _, value in read_all(planner_env.bootstrap, planner_env.topic(Topic.QUARANTINE)):
        assert value is not None
        q = decode(value, ev.Quarantined)
        quarantined[decode(q.original, ev.Command).command_id] = q.cause
    for name, (c, cause) in cases.items():
        assert quarantined.get(c.command_id) == cause, name
    refused = [
        (a.command_id, a.action, a.allowed)
        for _, v in read_all(planner_env.bootstrap, planner_env.topic(Topic.AUDIT))
        if v and (a := decode(v, ev.AuditEntry)).action == "fire.cancel"
    ]
    audited = {c.command_id for c, cause in cases.values() if cause != "signature"}
    assert sorted(refused) == sorted((cid, "fire.cancel", False) for cid in audited)
    for lane in ev.Lane:
        orders = read_all(planner_env.bootstrap, planner_env.topic(lane_topic(lane)))
        assert not [v for _, v in orders if v and decode(v, ev.DispatchOrder).cancel], lane
    assert any(f.scheduled_at.timestamp() > sent_at for f in ledger(planner_env)
               if f.trigger_id == "sec"), "not paused"  # fmt: skip
