"""Grants: what an ingress key may do, and the ceilings the platform grants a tenant.

An ingress key belongs to one tenant and grants a set of roles (``author``, ``policy``, ``read``);
the platform key grants ``platform`` and every other role, and no other key may grant
``platform``. The role a definition or command declares in its body is *not* a grant: an act is
allowed only when the signing key grants the role :data:`REQUIRED` names for it, and a body that
declares a role its key does not grant is refused too (so an audit entry never records a role
that was not granted).

Quotas and the catch-up horizon ceiling come from the platform (:class:`TenantGrant`, settings
``tenant_grants``), never from the tenant's definition: a definition may ask for the schema
default of ``policies.horizon_s`` and ``quotas.backfill_max_fires`` without a grant, for more
only with the ``policy`` role, and never for more than its tenant's ceiling (a platform-signed
version is not held to the ceiling); less is applied (the lower wins). The dispatch limits
(``dispatch_per_s``, ``catchup_share``, ``max_concurrency``) are the tenant's grant alone, applied
by the dispatcher; a definition must leave the per-trigger fields at their defaults
(:func:`horae.contracts.ingress.validate_definition` refuses any other value).

Every check returns a :class:`Forbidden` (cause ``forbidden``: the act, the role it needs, the
key and its roles) or ``None``; nothing here raises or does I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from horae.contracts import events as ev
from horae.contracts.ids import event_id
from horae.delivery.table import deliverer

Role = ev.Role


class Act(StrEnum):
    DEFINITION_CREATE = "definition.create"
    DEFINITION_AMEND = "definition.amend"
    DEFINITION_DELETE = "definition.delete"
    PAUSE = "pause.request"
    RESUME = "resume.request"
    MANUAL_RUN = "manual_run.request"
    BACKFILL = "backfill.request"
    TENANT_SUSPEND = "tenant.suspend"
    TENANT_RESUME = "tenant.resume"
    HORIZON_ABOVE_DEFAULT = "horizon.above_default"
    QUOTAS_ABOVE_DEFAULT = "quotas.above_default"
    FIRE_CANCEL = "fire.cancel"  # a command with cancel_fire_key (since Command v9)


#: THE table: the role a key must grant for each act (docs/security.md and docs/contracts.md
#: show the same table; a unit test compares them).
_ACT_ORDER = {act: i for i, act in enumerate(Act)}  # the audit order of acts
REQUIRED: Mapping[Act, Role] = {
    Act.DEFINITION_CREATE: Role.AUTHOR,
    Act.DEFINITION_AMEND: Role.AUTHOR,
    Act.DEFINITION_DELETE: Role.AUTHOR,
    Act.PAUSE: Role.AUTHOR,
    Act.RESUME: Role.AUTHOR,
    Act.MANUAL_RUN: Role.AUTHOR,
    Act.BACKFILL: Role.POLICY,
    Act.TENANT_SUSPEND: Role.PLATFORM,
    Act.TENANT_RESUME: Role.PLATFORM,
    Act.HORIZON_ABOVE_DEFAULT: Role.POLICY,
    Act.QUOTAS_ABOVE_DEFAULT: Role.POLICY,
    Act.FIRE_CANCEL: Role.AUTHOR,
}

COMMAND_ACTS: Mapping[ev.CommandKind, Act] = {
    ev.CommandKind.MANUAL_RUN: Act.MANUAL_RUN,
    ev.CommandKind.BACKFILL: Act.BACKFILL,
    ev.CommandKind.PAUSE: Act.PAUSE,
    ev.CommandKind.RESUME: Act.RESUME,
}
#: A command naming trigger :data:`~horae.contracts.events.TENANT_WIDE` acts on its whole tenant.
TENANT_ACTS: Mapping[ev.CommandKind, Act] = {
    ev.CommandKind.PAUSE: Act.TENANT_SUSPEND,
    ev.CommandKind.RESUME: Act.TENANT_RESUME,
}

ALL_ROLES = frozenset(Role)
DEFAULT_ROLES = frozenset({Role.AUTHOR})  # a key configured as a plain secret string
DEFAULT_POLICIES = ev.Policies()
DEFAULT_QUOTAS = ev.Quotas()


@dataclass(frozen=True, slots=True)
class TenantGrant:
    """What the platform grants one tenant (defaults: the schema defaults, so a tenant without a
    grant may ask for nothing above them).

    ``horizon_max_s`` and ``backfill_max_fires``: ceilings a definition may ask up to (the
    planner). ``dispatch_per_s``, ``catchup_share`` and ``max_concurrency``: the tenant's dispatch
    limits, summed over every dispatcher process (each applies its share of them,
    :mod:`horae.streams.dispatcher.admission`): the dispatch rate (hard for catch-up and
    backfill; on-time work over it only takes spare capacity), the share of that rate catch-up
    may use, and the sends in flight at once."""

    horizon_max_s: int = DEFAULT_POLICIES.horizon_s
    backfill_max_fires: int = DEFAULT_QUOTAS.backfill_max_fires
    dispatch_per_s: float = DEFAULT_QUOTAS.dispatch_per_s
    catchup_share: float = DEFAULT_QUOTAS.catchup_share
    max_concurrency: int = 64


@dataclass(frozen=True, slots=True)
class Forbidden:
    """A refused act: ``detail`` names the role needed (or the ceiling) and the key's roles."""

    act: Act
    needed: Role
    key_id: str
    key_roles: frozenset[Role]
    why: str

    cause = "forbidden"

    @property
    def detail(self) -> str:
        return f"{self.act.value}: {self.why} (key {self.key_id!r} grants {names(self.key_roles)})"

    def audit(
        self, tenant: str, trigger_id: str, at: datetime, *ids: object, command_id: str | None
    ) -> ev.AuditEntry:
        """The audit entry of this refusal (``ids`` make its id unique and repeatable)."""
        return audit_entry(
            tenant, trigger_id, self.act, self.needed, self.key_id, at, False,
            {"why": self.why, "key_roles": names(self.key_roles)}, *ids, command_id=command_id,
        )  # fmt: skip


def audit_entry(
    tenant: str,
    trigger_id: str,
    act: Act,
    role: Role,
    key_id: str,
    at: datetime,
    allowed: bool,
    detail: Mapping[str, str],
    *ids: object,
    command_id: str | None = None,
) -> ev.AuditEntry:
    """An audit entry: the actor is the signing key id, ``role`` the role the act needs."""
    return ev.AuditEntry(
        audit_id=event_id("audit", act.value, *ids),
        tenant=tenant,
        principal=key_id,
        role=role,
        action=act.value,
        at=at,
        allowed=allowed,
        trigger_id=trigger_id,
        command_id=command_id,
        detail=dict(detail),
    )


def names(roles: frozenset[Role]) -> str:
    return ",".join(sorted(r.value for r in roles)) or "nothing"


@dataclass(frozen=True)
class Grants:
    """What the planner knows of keys and tenants.

    ``roles``: tenant -> key id -> roles (a key absent here grants ``author`` only);
    ``tenants``: tenant -> ceilings (absent: ``default``); ``secret_refs``: tenant -> the webhook
    secret refs it owns (``None``: refs are not checked, e.g. in tests without secrets)."""

    roles: Mapping[str, Mapping[str, frozenset[Role]]] = field(default_factory=dict)
    tenants: Mapping[str, TenantGrant] = field(default_factory=dict)
    default: TenantGrant = field(default_factory=TenantGrant)
    secret_refs: Mapping[str, frozenset[str]] | None = None
    platform_key_id: str = "horae-platform"

    def key_roles(self, tenant: str, key_id: str) -> frozenset[Role]:
        if key_id == self.platform_key_id:
            return ALL_ROLES
        return self.roles.get(tenant, {}).get(key_id, DEFAULT_ROLES)

    def grant(self, tenant: str) -> TenantGrant:
        return self.tenants.get(tenant, self.default)

    def check_command(self, command: ev.Command) -> Forbidden | None:
        """``None`` when the command's signing key grants its act and its declared role."""
        key_id = command.signature.key_id if command.signature else ""
        roles = self.key_roles(command.tenant, key_id)
        return _check_role(command_act(command), command.role, key_id, roles)

    def check_definition(
        self, d: ev.TriggerDefinition, prior: ev.TriggerDefinition | None
    ) -> Forbidden | None:
        """``None`` when the definition's signing key grants the act (create, amend or delete
        against ``prior``, the live or paused version held), the role the body declares, and
        every policy or quota above the defaults; and no value exceeds the tenant's ceiling."""
        key_id = d.signature.key_id if d.signature else ""
        roles = self.key_roles(d.tenant, key_id)
        refused = _check_role(definition_act(d, prior), d.role, key_id, roles)
        if refused is not None or d.state is ev.DefinitionState.DELETED:
            return refused
        for act, field_name, asked, default, ceiling in self._asks(d):
            if asked <= default:
                continue
            if REQUIRED[act] not in roles:
                why = f"{field_name}={asked} is above the default {default}: needs role "
                why += f"{REQUIRED[act].value!r}"
                return Forbidden(act, REQUIRED[act], key_id, roles, why)
            if asked > ceiling and Role.PLATFORM not in roles:
                why = f"{field_name}={asked} is above the ceiling {ceiling} granted to tenant "
                why += f"{d.tenant!r}"
                return Forbidden(act, Role.PLATFORM, key_id, roles, why)
        return None

    def privileged_acts(self, d: ev.TriggerDefinition) -> list[Act]:
        """The acts above the defaults an allowed definition exercises (each is audited)."""
        acts = [act for act, _, asked, default, _ in self._asks(d) if asked > default]
        return sorted(set(acts), key=_ACT_ORDER.__getitem__) if acts else acts

    def _asks(self, d: ev.TriggerDefinition) -> list[tuple[Act, str, float, float, float]]:
        g = self.grant(d.tenant)
        q, h = Act.QUOTAS_ABOVE_DEFAULT, Act.HORIZON_ABOVE_DEFAULT
        return [
            (h, "policies.horizon_s", d.policies.horizon_s, DEFAULT_POLICIES.horizon_s,
             g.horizon_max_s),
            (q, "quotas.backfill_max_fires", d.quotas.backfill_max_fires,
             DEFAULT_QUOTAS.backfill_max_fires, g.backfill_max_fires),
        ]  # fmt: skip

    def check_secret_refs(self, d: ev.TriggerDefinition) -> str | None:
        """``None`` when a signed target (a webhook: :attr:`horae.delivery.port.Deliverer.signed`)
        names only secret refs its own tenant owns, at least one; else why not (cause
        ``invalid``). Not checked when ``secret_refs`` is ``None``."""
        if self.secret_refs is None or not deliverer(d.target.kind).signed:
            return None
        if d.state is ev.DefinitionState.DELETED:
            return None
        owned = self.secret_refs.get(d.tenant, frozenset())
        if not d.target.secret_refs:
            return f"target.secret_refs: a {d.target.kind} target needs a signing secret ref"
        for ref in d.target.secret_refs:
            if ref not in owned:
                return f"target.secret_refs: {ref!r} is not a webhook secret of tenant {d.tenant!r}"
        return None


def command_act(command: ev.Command) -> Act:
    """The act of ``command`` (a tenant-wide one that no table names needs ``platform``)."""
    if command.trigger_id == ev.TENANT_WIDE:
        return TENANT_ACTS.get(command.kind, Act.TENANT_SUSPEND)
    if command.cancel_fire_key is not None:  # a fire's cancel, whatever kind it travels as
        return Act.FIRE_CANCEL
    return COMMAND_ACTS[command.kind]


def definition_act(d: ev.TriggerDefinition, prior: ev.TriggerDefinition | None) -> Act:
    if d.state is ev.DefinitionState.DELETED:
        return Act.DEFINITION_DELETE
    if prior is None or prior.state is ev.DefinitionState.DELETED:
        return Act.DEFINITION_CREATE
    return Act.DEFINITION_AMEND


def _check_role(act: Act, declared: Role, key_id: str, roles: frozenset[Role]) -> Forbidden | None:
    needed = REQUIRED[act]
    if needed not in roles:
        return Forbidden(act, needed, key_id, roles, f"needs role {needed.value!r}")
    if declared not in roles:
        why = f"the body declares role {declared.value!r}, which its key does not grant"
        return Forbidden(act, declared, key_id, roles, why)
    return None
