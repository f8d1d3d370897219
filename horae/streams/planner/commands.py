"""Commands to the planner: manual runs and backfills (pause/resume are state transitions).

- A command must be signed by a key of its own tenant, like a definition, and keyed by its
  trigger; otherwise it is quarantined with the cause and changes nothing. The signing key must
  grant the role its act needs (:data:`horae.contracts.grants.REQUIRED`; the role the body
  declares must be granted too), else it is quarantined ``forbidden`` and audited.
- Manual run: one fire with its own key (origin ``manual``, the requested instant), on the
  ``manual`` lane; the schedule is not displaced.
- Backfill: every instant of ``[from, to)`` as origin ``backfill`` on the ``backfill`` lane — only
  for the ``policy`` (or ``platform``) role and within the trigger's volume ceiling
  (``quotas.backfill_max_fires``). A refused backfill is audited with its cause and announced as
  ``schedule.rejected``; an accepted one is audited too.
- Exactly once: a command needs ``expires_at``, at most ``max_ttl_s`` after the planner reads it;
  one without it (``no-expiry``), past it (``expired``), too far (``expiry-too-far``) or already
  applied (``replayed``: its id is in the trigger's remembered ``applied_commands``, kept in the
  planner state until they expire) is quarantined and audited, and changes nothing.
- A manual run's requested time (``requested_at``, whole seconds: its fire's instant) must lie
  within ``[now - max_ttl_s, now + MANUAL_AHEAD_S]`` of the planner's clock — a run fires now,
  not hours ahead, and no earlier than its command's longest lifetime ago — else it is
  quarantined ``requested-at`` and audited, and fires nothing.
- A manual run's fire key carries a sequence: one more than the highest sequence of the manual
  runs remembered at the same instant (0 for the first), so two in the same second get distinct
  keys. A manual run is remembered until its command expires or its instant leaves that window,
  whichever is later, so a run at an instant still in the window always finds the earlier runs
  at it and never reuses their fire key.
- Tenant suspension: a ``pause`` (suspend) or ``resume`` (lift) command with trigger id
  :data:`~horae.contracts.events.TENANT_WIDE`, role ``platform`` only, produced to every partition
  of ``commands``; each partition records it in a tenant state record (key ``<tenant>/*``).
"""

from __future__ import annotations

from datetime import timedelta

from horae.contracts import events as ev
from horae.contracts import signing
from horae.contracts.grants import Grants
from horae.contracts.ids import event_id
from horae.contracts.ingress import TenantKeys
from horae.contracts.routing import Router
from horae.delivery.table import deliverer
from horae.domain.cancel import cancel_cause
from horae.domain.errors import ValidationError
from horae.domain.keys import FireKey, short_hash_of
from horae.domain.schedule import Schedule
from horae.ports import Emit
from horae.streams.planner.records import (
    CAUSE_SUSPENDED,
    fire_outputs,
    schedule_event,
    utc_datetime,
)

BACKFILL_ROLES = (ev.Role.POLICY, ev.Role.PLATFORM)
MAX_APPLIED = 1000  # commands remembered per trigger (or tenant) at once; more are refused
SUSPENDED = CAUSE_SUSPENDED
DEFAULT_MAX_TTL_S = 3600
#: how far past the planner's clock a manual run's requested time may lie (producers' clocks)
MANUAL_AHEAD_S = 60
#: the quarantine cause of a manual run whose requested time is outside the window
REQUESTED_AT = "requested-at"


def remembered(applied: tuple[ev.AppliedCommand, ...], now: float) -> tuple[ev.AppliedCommand, ...]:
    """The applied commands not yet expired at ``now``."""
    if not applied:
        return applied
    return tuple(a for a in applied if a.expires_at.timestamp() > now)


class CommandHandler:
    def __init__(
        self,
        tenant_keys: TenantKeys,
        router: Router,
        max_ttl_s: int = DEFAULT_MAX_TTL_S,
        grants: Grants | None = None,
    ) -> None:
        """``grants``: the roles of each key and the tenants' ceilings (default: every key
        grants ``author`` only, except the platform key)."""
        self.tenant_keys = tenant_keys
        self.grants = grants or Grants()
        self.router = router
        self.max_ttl_s = max_ttl_s

    def once_refusal(
        self, command: ev.Command, applied: tuple[ev.AppliedCommand, ...], now: float
    ) -> tuple[str, str] | None:
        """``(cause, detail)`` when ``command`` must not apply at ``now`` (no or bad expiry,
        already applied per ``applied``, or too many remembered), else None."""
        expires = command.expires_at
        if expires is None:
            return "no-expiry", "a command needs expires_at"
        at = expires.timestamp()
        if at <= now:
            return "expired", f"expired at {expires.isoformat()} (read at {utc_datetime(now)})"
        if at > now + self.max_ttl_s:
            return "expiry-too-far", (
                f"expires_at {expires.isoformat()} is more than {self.max_ttl_s} s after "
                f"{utc_datetime(now).isoformat()}"
            )
        if any(a.command_id == command.command_id for a in applied):
            return "replayed", f"command {command.command_id!r} was already applied"
        if len(applied) >= MAX_APPLIED:
            return "too-many-commands", f"{MAX_APPLIED} unexpired commands already remembered"
        return None

    def manual_refusal(self, command: ev.Command, now: float) -> tuple[str, str] | None:
        """``(cause, detail)`` when ``command`` is a manual run whose requested time lies
        outside ``[now - max_ttl_s, now + MANUAL_AHEAD_S]``, else None."""
        if command.kind is not ev.CommandKind.MANUAL_RUN:
            return None
        at, asked = command.requested_at.timestamp(), command.requested_at.isoformat()
        read = utc_datetime(now).isoformat()
        if at > now + MANUAL_AHEAD_S:
            return REQUESTED_AT, (
                f"requested_at {asked} is more than {MANUAL_AHEAD_S} s after {read}: a manual run "
                "fires when it is read, it is not scheduled ahead"
            )
        if at < now - self.max_ttl_s:
            return REQUESTED_AT, (
                f"requested_at {asked} is more than {self.max_ttl_s} s before {read} (the longest "
                "a command lives)"
            )
        return None

    def applied_entry(
        self, command: ev.Command, applied: tuple[ev.AppliedCommand, ...]
    ) -> ev.AppliedCommand:
        """The memory of ``command`` once applied: a manual run's sequence is one more than the
        highest of the manual runs in ``applied`` at the same instant, and it is remembered
        until its instant leaves the requested-time window (or its command expires, if
        later)."""
        assert command.expires_at is not None
        if command.kind is not ev.CommandKind.MANUAL_RUN:
            return ev.AppliedCommand(command.command_id, command.expires_at)
        instant = command.requested_at.replace(microsecond=0)
        sequence = 1 + max((a.sequence for a in applied if a.scheduled_at == instant), default=-1)
        kept = max(command.expires_at, instant + timedelta(seconds=self.max_ttl_s + 1))
        return ev.AppliedCommand(command.command_id, kept, instant, sequence)

    def audit(
        self,
        partition: int,
        command: ev.Command,
        now: float,
        action: str,
        cause: str | None,
        *ids: object,
        detail: dict[str, str] | None = None,
    ) -> Emit:
        """The audit entry of ``command`` (``cause``: refused; ``ids`` keep ids distinct)."""
        detail = dict(detail or {})
        detail.setdefault("requested_by", command.requested_by)  # e.g. the API's token subject
        if cause is not None:
            detail["cause"] = cause
        entry = ev.AuditEntry(
            audit_id=event_id("audit", command.command_id, action, cause, partition, *ids),
            tenant=command.tenant,
            principal=command.signature.key_id if command.signature else command.requested_by,
            role=command.role,
            action=action,
            at=utc_datetime(now),
            allowed=cause is None,
            trigger_id=command.trigger_id,
            command_id=command.command_id,
            detail=detail,
        )
        return self.router.emit(entry, partition)

    def refusal(self, command: ev.Command, raw_key: bytes | None) -> tuple[str, str] | None:
        """``(cause, detail)`` when the command must be quarantined, else None."""
        expected = ev.trigger_key(command.tenant, command.trigger_id).encode()
        if raw_key != expected:
            return "key", f"record key {raw_key!r} is not {expected!r}"
        keys = self.tenant_keys.get(command.tenant)
        if keys is None:
            return "unknown-tenant", f"tenant {command.tenant!r} has no ingress key"
        problem = signing.check(command, keys)
        if problem is not None:
            cause = "unsigned" if problem == "unsigned" else "signature"
            return cause, problem
        forbidden = self.grants.check_command(command)  # the key's roles, never the body's
        if forbidden is not None:
            return forbidden.cause, forbidden.detail
        return None

    def handle(
        self,
        partition: int,
        d: ev.TriggerDefinition,
        command: ev.Command,
        now: float,
        schedule: Schedule | None = None,
        sequence: int = 0,
    ) -> list[Emit]:
        """The effects of a manual run (fire key sequence ``sequence``) or a backfill."""
        if command.kind is ev.CommandKind.MANUAL_RUN:
            instant = int(command.requested_at.timestamp())
            return [
                self.audit(partition, command, now, "manual_run.request", None),
                *fire_outputs(
                    self.router,
                    d,
                    partition,
                    scheduled=instant,
                    origin=ev.Origin.MANUAL,
                    lane=ev.Lane.MANUAL,
                    now=now,
                    command_id=command.command_id,
                    sequence=sequence,
                    tzdata=None if schedule is None else schedule.tzdata,
                ),
            ]
        assert schedule is not None
        return self._backfill(partition, d, command, now, schedule)

    def _backfill(
        self,
        partition: int,
        d: ev.TriggerDefinition,
        command: ev.Command,
        now: float,
        schedule: Schedule,
    ) -> list[Emit]:
        start, end = command.backfill_from, command.backfill_to
        ceiling = min(d.quotas.backfill_max_fires, self.grants.grant(d.tenant).backfill_max_fires)
        instants: list[int] = []
        cause: str | None = None
        if command.role not in BACKFILL_ROLES:
            cause = f"backfill refused: role {command.role.value!r} lacks the policy grant"
        elif start is None or end is None or end <= start:
            cause = "backfill refused: needs a window backfill_from < backfill_to"
        elif end.timestamp() > now:
            cause = "backfill refused: the window must lie in the past"
        else:
            t = schedule.next_after(int(start.timestamp()) - 1)
            stop = int(end.timestamp())
            while t is not None and t < stop:
                instants.append(t)
                if len(instants) > ceiling:
                    cause = f"backfill refused: over the volume ceiling of {ceiling} fires"
                    break
                t = schedule.next_after(t)
        out = [self._audit(partition, d, command, now, cause, len(instants))]
        if cause is not None:
            out.append(
                schedule_event(
                    self.router,
                    d,
                    partition,
                    ev.ScheduleEventType.REJECTED,
                    now,
                    cause,
                    command.command_id,
                    tzdata=schedule.tzdata,
                )
            )
            return out
        for t in instants:
            out += fire_outputs(
                self.router,
                d,
                partition,
                scheduled=t,
                origin=ev.Origin.BACKFILL,
                lane=ev.Lane.BACKFILL,
                now=now,
                command_id=command.command_id,
                tzdata=schedule.tzdata,
            )
        return out

    def _audit(
        self,
        partition: int,
        d: ev.TriggerDefinition,
        command: ev.Command,
        now: float,
        cause: str | None,
        count: int,
    ) -> Emit:
        """The audit entry of a backfill: how many instants, and its window."""
        detail = {"instants": str(count)}
        if command.backfill_from is not None and command.backfill_to is not None:
            detail["window"] = (
                f"{command.backfill_from.isoformat()}/{command.backfill_to.isoformat()}"
            )
        return self.audit(partition, command, now, "backfill.request", cause, detail=detail)


#: the lanes a cancel marker goes on: every lane a fire's order can be held on (its first
#: attempt's, whichever it was, and the retry lane, where retries and redrives go)
CANCEL_LANES = tuple(ev.Lane)


def cancel_refusal(
    command: ev.Command, d: ev.TriggerDefinition, last_decided: int | None
) -> tuple[str, str] | None:
    """``(cause, detail)`` when the cancel ``command`` (``cancel_fire_key`` set) must be refused
    for trigger ``d`` (quarantined and audited, cause ``invalid``), else None: the key must be a
    fire key of this very trigger (so no key of another tenant's or trigger's fire is ever
    cancelled), of a webhook target (an event target's fire is delivered when it is decided),
    of an instant already decided, and the command must travel as kind ``pause``."""
    text = command.cancel_fire_key
    assert text is not None
    if command.kind is not ev.CommandKind.PAUSE:
        why = f"a cancel travels as kind 'pause', not {command.kind.value!r}"
        return "invalid", f"cancel_fire_key: {why}"
    try:
        key = FireKey.parse(text)
    except ValidationError as exc:
        return "invalid", f"cancel_fire_key: {exc.message}"
    if key.canonical() != text:
        return "invalid", f"cancel_fire_key: {text!r} is not canonical ({key.canonical()!r})"
    if (key.tenant, key.trigger) != (command.tenant, command.trigger_id):
        return "invalid", (
            f"cancel_fire_key: {text!r} is not a fire of trigger "
            f"{ev.trigger_key(command.tenant, command.trigger_id)}"
        )
    if not deliverer(d.target.kind).in_flight:
        return "invalid", (
            "cancel_fire_key: an event target's fire is delivered when it is decided; "
            "nothing is left to cancel"
        )
    undecided = last_decided is None or key.scheduled > last_decided
    if key.origin is ev.Origin.SCHEDULED and undecided:
        return "invalid", f"cancel_fire_key: {text!r} is not decided yet"
    return None


def cancel_outputs(
    router: Router,
    partition: int,
    d: ev.TriggerDefinition,
    command: ev.Command,
    now: float,
    tzdata: str | None,
) -> list[Emit]:
    """A cancel marker for the fire ``command.cancel_fire_key`` names (already checked by
    :func:`cancel_refusal`) on each lane of :data:`CANCEL_LANES`, partition ``partition`` —
    after any order of the fire there — with the cause naming the actor
    (:func:`~horae.domain.cancel.cancel_cause`). The dispatcher that owns the partition drops
    every attempt of the fire it holds and starts no retry after one in flight."""
    assert command.cancel_fire_key is not None
    key = FireKey.parse(command.cancel_fire_key)
    at = utc_datetime(now)
    scheduled = utc_datetime(key.scheduled)
    cause = cancel_cause(command.requested_by, command.reason)
    out: list[Emit] = []
    for lane in CANCEL_LANES:
        record = ev.FireRecord(
            fire_key=command.cancel_fire_key,
            key_hash=short_hash_of(command.cancel_fire_key),
            tenant=d.tenant,
            trigger_id=d.trigger_id,
            origin=key.origin,
            scheduled_at=scheduled,
            sequence=key.sequence,
            jitter_ms=0,
            due_at=scheduled,
            decided_at=at,
            state=ev.FireState.FIRED,
            trigger_version=d.version,
            tzdata_version=tzdata or "",
            target_kind=d.target.kind,
            lane=lane,
            command_id=command.command_id,
        )
        marker = ev.DispatchOrder(
            fire=record,
            target=d.target,
            lane=lane,
            attempt=1,
            not_before=at,
            retry=d.policies.retry,
            cancel=cause,
        )
        out.append(router.emit(marker, partition))
    return out
