"""Grants through the real broker with real keys: a planner that knows several keys of tenant
``acme`` (author only, author + policy, read only) and one of tenant ``other`` reads definitions
and commands that try to do more than their signing key grants. Each must be quarantined with its
cause (and audited where the planner audits), nothing of it accepted or fired; the allowed acts
beside them (a policy key's backfill, a quota inside the platform's grant) go through, so every
check can fail both ways. One scenario per module, one test per claim."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

import pytest

from horae.contracts import events as ev
from horae.contracts import signing
from horae.contracts.codec import decode
from horae.contracts.grants import DEFAULT_POLICIES, DEFAULT_QUOTAS, Grants, TenantGrant
from horae.contracts.topics import Topic
from horae.devstack.stack import Endpoints
from tests.integration.planner.harness import (
    PlannerEnv,
    command,
    consumed,
    decided_since,
    definition,
    ledger,
    read_all,
)
from tests.waiting import wait_until

P, A, R = ev.Role.POLICY, ev.Role.AUTHOR, ev.Role.READ
KEYS = {  # tenant -> key id -> (secret, roles)
    "acme": {
        "acme-author": (b"author-secret", {A}),
        "acme-policy": (b"policy-secret", {A, P}),
        "acme-read": (b"read-secret", {R}),
    },
    "other": {"other-1": (b"other-secret", {A})},
}
PLATFORM = ("horae-platform", b"platform-secret")
HORIZON_MAX = DEFAULT_POLICIES.horizon_s * 4  # what the platform grants acme
BACKFILL_MAX = DEFAULT_QUOTAS.backfill_max_fires * 2
GRANTS = Grants(
    roles={t: {k: frozenset(roles) for k, (_, roles) in ks.items()} for t, ks in KEYS.items()},
    tenants={"acme": TenantGrant(horizon_max_s=HORIZON_MAX, backfill_max_fires=BACKFILL_MAX)},
    secret_refs={"acme": frozenset({"acme-hook"}), "other": frozenset({"other-hook"})},
    platform_key_id=PLATFORM[0],
)
TENANT_KEYS = {
    t: {**{k: secret for k, (secret, _) in ks.items()}, PLATFORM[0]: PLATFORM[1]}
    for t, ks in KEYS.items()
}
REFUSED_FROM, REFUSED_TO = timedelta(hours=10), timedelta(hours=6)  # the refused backfills' window
HOOK = ev.Target(ev.TargetKind.WEBHOOK, url="https://hooks.example/x", secret_refs=("acme-hook",))


def secret_of(key_id: str) -> bytes:
    return next(ks[key_id][0] for ks in KEYS.values() if key_id in ks)


def put(
    trigger_id: str, key_id: str, expr: str = "* * * * * *", version: int = 1, **fields: Any
) -> ev.TriggerDefinition:
    d = replace(definition(trigger_id, expr, version=version, target=HOOK), **fields)
    return signing.sign(d, key_id, secret_of(key_id))


def order(key_id: str, kind: ev.CommandKind, role: ev.Role, **fields: Any) -> ev.Command:
    return signing.sign(command("hourly", kind, role, **fields), key_id, secret_of(key_id))


def quotas(**asked: Any) -> ev.Quotas:
    return replace(ev.Quotas(), **asked)


def horizon(seconds: int) -> ev.Policies:
    return replace(ev.Policies(), horizon_s=seconds)


@dataclass
class Outcome:
    quarantined: list[ev.Quarantined]
    audit: list[ev.AuditEntry]
    accepted: list[ev.TriggerDefinition]
    fires: list[ev.FireRecord]
    commands: dict[str, ev.Command]

    def refusals(self, name: str) -> list[ev.Quarantined]:
        """The quarantine records of definition ``name`` or of the command named ``name``."""
        if name in self.commands:
            cid = self.commands[name].command_id
            return [
                q
                for q in self.quarantined
                if q.source_topic.endswith(Topic.COMMANDS.value)
                and decode(q.original, ev.Command).command_id == cid
            ]
        return [q for q in self.quarantined if q.trigger_id == name]

    def audits(self, name: str) -> list[ev.AuditEntry]:
        if name in self.commands:
            return [a for a in self.audit if a.command_id == self.commands[name].command_id]
        return [a for a in self.audit if a.trigger_id == name and a.command_id is None]


@pytest.fixture(scope="module")
def outcome(stack: Endpoints, module_prefix: str) -> Iterator[Outcome]:
    env = PlannerEnv(stack.kafka_bootstrap, module_prefix)
    env.setup()
    try:
        yield _run(env)
    finally:
        env.close()


def _run(env: PlannerEnv) -> Outcome:
    amend_v1 = put("author-amends-quota", "acme-author")
    for d in (
        put("ticking", "acme-policy"),  # allowed: fires every second
        put("hourly", "acme-author", "0 * * * *"),  # allowed: the commands' trigger
        put(  # allowed: above the defaults, inside the platform's grant, by a policy key
            "granted-ceiling", "acme-policy",
            policies=horizon(HORIZON_MAX), quotas=quotas(backfill_max_fires=BACKFILL_MAX),
        ),
        put("cross-tenant-key", "other-1"),  # acme's trigger signed with other's key
        put("declares-platform", "acme-author", role=ev.Role.PLATFORM),
        put("horizon-above-grant", "acme-policy", policies=horizon(HORIZON_MAX + 1)),
        put(
            "backfill-quota-above-grant", "acme-policy",
            quotas=quotas(backfill_max_fires=BACKFILL_MAX + 1),
        ),
        put("author-horizon", "acme-author", policies=horizon(DEFAULT_POLICIES.horizon_s + 1)),
        amend_v1,
        put(
            "author-amends-quota", "acme-author", version=2,
            quotas=quotas(backfill_max_fires=BACKFILL_MAX),
        ),
    ):  # fmt: skip
        env.put(d)
    env.start_thread("a", tenant_keys=TENANT_KEYS, grants=GRANTS)
    wait_until(lambda: consumed(env, Topic.DEFINITIONS), 90, 0.2, "definitions decided")
    hour = amend_v1.authored_at.replace(minute=0, second=0)
    window = {"backfill_from": hour - timedelta(hours=4), "backfill_to": hour - timedelta(hours=1)}
    refused = {"backfill_from": hour - REFUSED_FROM, "backfill_to": hour - REFUSED_TO}
    commands = {
        "manual-run-by-read-key": order("acme-read", ev.CommandKind.MANUAL_RUN, R),
        "backfill-by-author-key": order("acme-author", ev.CommandKind.BACKFILL, A, **refused),
        "backfill-declaring-policy": order("acme-author", ev.CommandKind.BACKFILL, P, **refused),
        "backfill-by-policy-key": order("acme-policy", ev.CommandKind.BACKFILL, P, **window),
    }
    for c in commands.values():
        env.send(c)
    wait_until(lambda: consumed(env, Topic.COMMANDS), 90, 0.2, "commands decided")
    since = ledger(env)[-1].scheduled_at.timestamp() + 1 if ledger(env) else 0.0
    wait_until(lambda: decided_since(env, since, ["ticking"]), 60, 0.2, "planner still fires")
    env.stop_threads()

    def values(topic: Topic, t: type[Any]) -> list[Any]:
        return [decode(v, t) for _, v in read_all(env.bootstrap, env.topic(topic)) if v]

    return Outcome(
        quarantined=values(Topic.QUARANTINE, ev.Quarantined),
        audit=values(Topic.AUDIT, ev.AuditEntry),
        accepted=values(Topic.ACCEPTED, ev.TriggerDefinition),
        fires=ledger(env),
        commands=commands,
    )


#: name -> (cause, a fragment of the detail, audited act or None: refused before authorization)
REFUSED = {
    "cross-tenant-key": ("cross-tenant", "signed with a key of tenant 'other'", None),
    "declares-platform": ("forbidden", "declares role 'platform'", "definition.create"),
    "horizon-above-grant": (
        "forbidden", f"policies.horizon_s={HORIZON_MAX + 1} is above the ceiling {HORIZON_MAX}",
        "horizon.above_default",
    ),
    "backfill-quota-above-grant": (
        "forbidden", f"above the ceiling {BACKFILL_MAX} granted to tenant 'acme'",
        "quotas.above_default",
    ),
    "author-horizon": ("forbidden", "needs role 'policy'", "horizon.above_default"),
    "author-amends-quota": ("forbidden", "needs role 'policy'", "quotas.above_default"),
    "manual-run-by-read-key": ("forbidden", "needs role 'author'", "manual_run.request"),
    "backfill-by-author-key": ("forbidden", "needs role 'policy'", "backfill.request"),
    "backfill-declaring-policy": ("forbidden", "needs role 'policy'", "backfill.request"),
}  # fmt: skip


@pytest.mark.parametrize("name", list(REFUSED))
def test_refused_with_cause_and_nothing_fired(outcome: Outcome, name: str) -> None:
    cause, fragment, act = REFUSED[name]
    [refused] = outcome.refusals(name)
    assert refused.cause == cause and fragment in refused.detail, refused.detail
    audits = outcome.audits(name)
    if act is None:
        assert audits == []
    else:
        assert [(a.action, a.allowed) for a in audits] == [(act, False)]
        assert audits[0].principal in refused.detail  # the actor is the signing key
    if name in outcome.commands:  # nothing of the command fired
        hourly = [f for f in outcome.fires if f.trigger_id == "hourly"]
        assert not [f for f in hourly if f.origin is ev.Origin.MANUAL]
        asked = outcome.commands["backfill-by-author-key"]  # the refused backfills' window
        assert asked.backfill_from is not None and asked.backfill_to is not None
        assert not [f for f in hourly if asked.backfill_from <= f.scheduled_at <= asked.backfill_to]
    elif name == "author-amends-quota":  # version 1 stands, version 2 never applied
        assert [d.version for d in outcome.accepted if d.trigger_id == name] == [1]
    else:
        assert not [d for d in outcome.accepted if d.trigger_id == name]
        assert not [f for f in outcome.fires if f.trigger_id == name]


def test_policy_key_backfills(outcome: Outcome) -> None:
    """Its 3 instants are fired (the refused backfills ask for an earlier window)."""
    assert outcome.refusals("backfill-by-policy-key") == []
    backfill = [f for f in outcome.fires if f.origin is ev.Origin.BACKFILL]
    assert len(backfill) == 3 and {f.trigger_id for f in backfill} == {"hourly"}
    audits = outcome.audits("backfill-by-policy-key")
    assert [(a.action, a.allowed, a.principal) for a in audits] == [
        ("backfill.request", True, "acme-policy")
    ]


def test_platform_granted_ceiling_allows_more(outcome: Outcome) -> None:
    assert outcome.refusals("granted-ceiling") == []
    [accepted] = [d for d in outcome.accepted if d.trigger_id == "granted-ceiling"]
    assert accepted.policies.horizon_s == HORIZON_MAX
    assert accepted.quotas.backfill_max_fires == BACKFILL_MAX
    acts = {(a.action, a.allowed) for a in outcome.audits("granted-ceiling")}
    assert acts == {("horizon.above_default", True), ("quotas.above_default", True)}
    assert [f for f in outcome.fires if f.trigger_id == "granted-ceiling"]
