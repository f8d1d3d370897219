"""Signed definitions and commands for the planner's unit tests (no Kafka, no wall clock)."""

from __future__ import annotations

import itertools
from dataclasses import replace
from datetime import UTC, datetime

from horae.contracts import events as ev
from horae.contracts import signing

TENANT = "acme"
KEY_ID = "acme-1"
SECRET = b"acme-secret"
TENANT_KEYS = {TENANT: {KEY_ID: SECRET}}
AUTHORED = datetime(2026, 1, 1, tzinfo=UTC)


def definition(
    trigger_id: str,
    expr: str = "* * * * * *",
    *,
    version: int = 1,
    state: ev.DefinitionState = ev.DefinitionState.LIVE,
    policies: ev.Policies | None = None,
    target: ev.Target | None = None,
    quotas: ev.Quotas | None = None,
) -> ev.TriggerDefinition:
    d = ev.TriggerDefinition(
        tenant=TENANT,
        trigger_id=trigger_id,
        version=version,
        state=state,
        recurrence=ev.Recurrence(kind=ev.RecurrenceKind.CRON, expr=expr),
        target=target or ev.Target(kind=ev.TargetKind.WEBHOOK, url="https://hooks.example/x"),
        authored_at=AUTHORED,
        author="tester",
        policies=policies or ev.Policies(),
        quotas=quotas or ev.Quotas(),
    )
    return signing.sign(d, KEY_ID, SECRET)


_COMMAND_IDS = itertools.count(1)  # every command built is a new one (replays re-send one)


def command(
    trigger_id: str,
    kind: ev.CommandKind,
    at: float,
    role: ev.Role = ev.Role.AUTHOR,
    **fields: object,
) -> ev.Command:
    c = ev.Command(
        command_id=f"cmd-{trigger_id}-{kind.value}-{at}-{next(_COMMAND_IDS)}",
        tenant=TENANT,
        trigger_id=trigger_id,
        kind=kind,
        requested_by="tester",
        role=role,
        requested_at=datetime.fromtimestamp(at, UTC),
        expires_at=datetime.fromtimestamp(at + 600, UTC),
    )
    return signing.sign(replace(c, **fields), KEY_ID, SECRET)  # type: ignore[arg-type]
