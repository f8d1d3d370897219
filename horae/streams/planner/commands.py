"""Commands to the planner: manual runs and backfills (pause/resume are state transitions).

- A command must be signed by a key of its own tenant, like a definition, and keyed by its
  trigger; otherwise it is quarantined with the cause and changes nothing.
- Manual run: one fire with its own key (origin ``manual``, the requested instant), on the
  ``manual`` lane; the schedule is not displaced.
- Backfill: every instant of ``[from, to)`` as origin ``backfill`` on the ``backfill`` lane — only
  for the ``policy`` (or ``platform``) role and within the trigger's volume ceiling
  (``quotas.backfill_max_fires``). A refused backfill is audited with its cause and announced as
  ``schedule.rejected``; an accepted one is audited too.
"""

from __future__ import annotations

from horae.contracts import events as ev
from horae.contracts import signing
from horae.contracts.ids import event_id
from horae.contracts.ingress import TenantKeys
from horae.contracts.routing import Router
from horae.domain.schedule import Schedule
from horae.ports import Emit
from horae.streams.planner.records import fire_outputs, schedule_event, utc_datetime

BACKFILL_ROLES = (ev.Role.POLICY, ev.Role.PLATFORM)


class CommandHandler:
    def __init__(self, tenant_keys: TenantKeys, router: Router) -> None:
        self.tenant_keys = tenant_keys
        self.router = router

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
        return None

    def handle(
        self,
        partition: int,
        d: ev.TriggerDefinition,
        command: ev.Command,
        now: float,
        schedule: Schedule | None = None,
    ) -> list[Emit]:
        if command.kind is ev.CommandKind.MANUAL_RUN:
            instant = int(command.requested_at.timestamp())
            return fire_outputs(
                self.router,
                d,
                partition,
                scheduled=instant,
                origin=ev.Origin.MANUAL,
                lane=ev.Lane.MANUAL,
                now=now,
                command_id=command.command_id,
            )
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
        ceiling = d.quotas.backfill_max_fires
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
        detail = {"instants": str(count)}
        if cause is not None:
            detail["cause"] = cause
        if command.backfill_from is not None and command.backfill_to is not None:
            detail["window"] = (
                f"{command.backfill_from.isoformat()}/{command.backfill_to.isoformat()}"
            )
        entry = ev.AuditEntry(
            audit_id=event_id("audit", command.command_id),
            tenant=command.tenant,
            principal=command.requested_by,
            role=command.role,
            action="backfill.request",
            at=utc_datetime(now),
            allowed=cause is None,
            trigger_id=command.trigger_id,
            command_id=command.command_id,
            detail=detail,
        )
        return self.router.emit(entry, None)
