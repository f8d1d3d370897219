"""Commands that must not apply, through the real broker with real keys: a replayed manual run, an
expired command, an expiry too far out, no expiry, a tenant suspension signed by a tenant key, a
backfill by an author-only key, a manual run declaring ``platform`` with an author key. Each is
quarantined with its cause, audited ``allowed=false``, and nothing fires that should not."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from horae.contracts import events as ev
from horae.contracts import signing
from horae.contracts.codec import decode
from horae.contracts.grants import Grants
from horae.contracts.topics import Topic
from horae.streams.planner.commands import SUSPENDED
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

AUTHOR_ID, AUTHOR_SECRET = "acme-author", b"acme-author-secret"  # grants author only
KEYS = {TENANT: {KEY_ID: SECRET, AUTHOR_ID: AUTHOR_SECRET}}
ROLES_OF = {KEY_ID: frozenset(ev.Role(r) for r in ROLES), AUTHOR_ID: frozenset({ev.Role.AUTHOR})}
GRANTS = Grants(roles={TENANT: ROLES_OF})
MAX_TTL_S = 600


@dataclass(frozen=True)
class Case:
    name: str
    command: ev.Command
    cause: str
    action: str


def _by_author(c: ev.Command) -> ev.Command:
    return signing.sign(replace(c, signature=None), AUTHOR_ID, AUTHOR_SECRET)


def _cases(now: datetime) -> list[Case]:
    window = {"backfill_from": now - timedelta(hours=3), "backfill_to": now - timedelta(hours=1)}
    run = ev.CommandKind.MANUAL_RUN
    return [
        Case("expired", command("hourly", run, expires_at=now - timedelta(seconds=1)),
             "expired", "manual_run.request"),
        Case("too far", command("hourly", run, expires_at=now + timedelta(hours=2)),
             "expiry-too-far", "manual_run.request"),
        Case("no expiry", command("hourly", run, expires_at=None), "no-expiry",
             "manual_run.request"),
        Case("suspension by a tenant key",
             command(ev.TENANT_WIDE, ev.CommandKind.PAUSE, ev.Role.PLATFORM), "forbidden",
             "tenant.suspend"),
        Case("backfill by an author key",
             _by_author(command("hourly", ev.CommandKind.BACKFILL, ev.Role.POLICY, **window)),
             "forbidden", "backfill.request"),
        Case("platform declared by an author key",
             _by_author(command("hourly", run, ev.Role.PLATFORM)), "forbidden",
             "manual_run.request"),
    ]  # fmt: skip


def _values(env: PlannerEnv, topic: Topic) -> list[bytes]:
    return [v for _, v in read_all(env.bootstrap, env.topic(topic)) if v]


def test_replayed_expired_and_forbidden_commands_are_refused(planner_env: PlannerEnv) -> None:
    planner_env.put(definition("hourly", "0 * * * *"))
    planner_env.put(definition("sec"))  # every second: shows a refused suspension stops nothing
    planner_env.start_thread("a", tenant_keys=KEYS, grants=GRANTS, command_max_ttl_s=MAX_TTL_S)
    wait_until(lambda: consumed(planner_env, Topic.DEFINITIONS), 60, 0.2, "definitions decided")
    now = datetime.now(UTC)
    replayed = command("hourly", ev.CommandKind.MANUAL_RUN)
    cases = _cases(now)
    planner_env.send(replayed)
    planner_env.send(replayed)  # the same signed bytes again
    for case in cases:
        planner_env.send(case.command)
    sent_at = now.timestamp()
    wait_until(lambda: consumed(planner_env, Topic.COMMANDS), 60, 0.2, "commands decided")
    wait_until(lambda: decided_since(planner_env, sent_at + 2, ["sec"]), 60, 0.2, "sec decided")
    planner_env.stop_threads()

    fires = ledger(planner_env)
    manual = [f for f in fires if f.origin is not ev.Origin.SCHEDULED]
    assert [(f.origin, f.state) for f in manual] == [(ev.Origin.MANUAL, ev.FireState.FIRED)]
    assert not [f for f in fires if f.cause == SUSPENDED]  # the forbidden suspension did nothing
    assert any(f.state is ev.FireState.FIRED for f in fires if f.trigger_id == "sec"
               and f.scheduled_at.timestamp() > sent_at)  # fmt: skip

    quarantined: dict[str, list[str]] = {}
    for value in _values(planner_env, Topic.QUARANTINE):
        q = decode(value, ev.Quarantined)
        quarantined.setdefault(decode(q.original, ev.Command).command_id, []).append(q.cause)
    audit: dict[str | None, list[tuple[str, bool, str | None, str]]] = {}
    for value in _values(planner_env, Topic.AUDIT):
        a = decode(value, ev.AuditEntry)
        entry = (a.action, a.allowed, a.detail.get("cause"), a.principal)
        audit.setdefault(a.command_id, []).append(entry)

    assert quarantined.pop(replayed.command_id) == ["replayed"]
    assert sorted(audit.pop(replayed.command_id), key=str) == [
        ("manual_run.request", False, "replayed", KEY_ID),
        ("manual_run.request", True, None, KEY_ID),
    ]
    for case in cases:
        cid = case.command.command_id
        assert quarantined.pop(cid, None) == [case.cause], case.name
        signer = case.command.signature.key_id if case.command.signature else ""
        assert audit.pop(cid, None) == [(case.action, False, case.cause, signer)], case.name
    assert not quarantined and not audit  # nothing else refused or audited
