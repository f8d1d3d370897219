"""The planner's decisions: definitions and commands in, records out (no I/O, ``now`` is passed).

Per trigger (a :class:`~horae.streams.planner.index.TriggerEntry`):
- a new live trigger starts deciding after the moment it arrived (no fires for its past);
- each due tick evaluates ``(last_decided, now]`` with :func:`horae.domain.misfire.evaluate_misfire`
  — the same function on a normal tick, after a restart, a rebalance or an outage: on-time instants
  (judged against their jittered due time: the grace stretches with the jitter) fire on the
  ``on_time`` lane, missed ones follow the misfire policy (``catch_up`` lane), instants
  past the catch-up horizon are recorded ``expired: past horizon``;
- an amendment (a higher version) first decides what is already due under the old version, then
  takes effect for later instants; a lower or equal version is stale and quarantined;
- pause stops deciding and is recorded once (``schedule.paused``); resume records the paused
  interval once (``schedule.resumed``) and applies the misfire policy to it; delete stops for good;
- while its tenant is suspended a trigger's instants are decided on time but each is recorded
  not fired with cause ``tenant suspended``; once lifted, deciding goes on under the misfire policy;
- ``Recurrence.start``/``end`` bound the schedule (:class:`~horae.domain.schedule.BoundedSchedule`):
  nothing before ``start``, nothing after ``end``. When deciding moves the cursor past a
  trigger's last instant (past its end, or its last ``at`` instant), it is *completed*:
  ``schedule.completed`` is emitted once and its state keeps ``next_instant`` null (out of the
  due index, also after a restart). ``Recurrence.count`` completes it the same way once that
  many scheduled instants have fired (``PlannerState.fired``; manual runs and backfills do not
  count); later instants are not decided. With ``policies.action_after_completion`` ``delete``
  the completion also writes the definition's next version, ``deleted`` (author
  ``horae-planner/completion``), onto ``definitions.accepted`` and audits it
  (``completion.delete``), in the same transaction;
- every record carries the tzdata release of the trigger's schedule (compiled through the
  :class:`~horae.ports.ZoneSource` of :class:`~horae.streams.planner.sharing.SharedValues`); a
  trigger restored from a state of another release whose next instant moved emits
  ``schedule.recomputed`` (:meth:`Decider.tzdata_change`).
- overlap (``policies.overlap``, :func:`~horae.domain.overlap.decide_overlap`): a webhook
  trigger whose policy is not ``allow`` has its *running* fire (order emitted, no outcome read)
  and its *buffered* fire in :attr:`DueIndex.flights <horae.streams.planner.index.DueIndex>`
  (and in ``PlannerState``: ``running_fire_key``, ``running_until``, ``running_lane``,
  ``buffered_fire_key``, ``buffered_lane``, so a rebuild restores them). The worker also
  consumes the ``outcomes`` partition of each partition it owns; :meth:`Decider.on_outcome_record`
  looks the record's key up in :attr:`DueIndex.running` (one dict lookup, nothing decoded for
  other fires) and ends that fire. A running fire also ends at ``running_until`` = its deadline
  (the next instant) + ``overlap_attempt_s``, through the due index: a trigger with a buffered
  fire is due then. A scheduled fire while one runs: ``skip`` records it ``skipped: overlap``
  (plus ``schedule.skipped`` with its key), ``buffer_one`` holds it (no ledger record, no order)
  until the running fire ends, then fires it with cause ``buffered: overlap`` (a second one is
  ``skipped: overlap (buffer full)``), ``replace`` fires it and records the running one
  ``replaced`` with a cancel marker after its order (:func:`~.records.replaced_outputs`). Manual
  runs, backfills and event targets are never tracked; ``allow`` triggers pay one identity check
  per evaluation (and one dict lookup while the partition tracks any fire).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from horae.contracts import events as ev
from horae.contracts.codec import DecodeError
from horae.contracts.grants import REQUIRED, Act, Grants, audit_entry, command_act
from horae.contracts.ids import event_id
from horae.contracts.ingress import (
    Source,
    TenantKeys,
    accepted_value,
    decode_command,
    ingest_definition,
)
from horae.contracts.quarantine import quarantine
from horae.contracts.routing import Router
from horae.delivery.table import deliverer
from horae.domain.keys import FireKey, canonical_text
from horae.domain.misfire import MisfireOutcome, evaluate_misfire
from horae.domain.overlap import (
    CAUSE_BUFFERED,
    InFlight,
    OverlapAction,
    OverlapPolicy,
    decide_overlap,
)
from horae.domain.trigger import Limits, validate_trigger
from horae.ports import Emit, InputRecord
from horae.streams.planner.commands import (
    DEFAULT_MAX_TTL_S,
    SUSPENDED,
    CommandHandler,
    cancel_outputs,
    cancel_refusal,
    remembered,
)
from horae.streams.planner.index import INDEX, DueIndex, Flight, TenantEntry, TriggerEntry
from horae.streams.planner.records import (
    fire_event,
    fire_outputs,
    replaced_outputs,
    schedule_event,
    utc_datetime,
)
from horae.streams.planner.sharing import SharedValues

MAX_RECORDS_PER_EVALUATION = 1000
#: the author (and audit principal) of the deleted version a completion writes
COMPLETION_AUTHOR = "horae-planner/completion"
DEFAULT_ATTEMPT_S = 30.0  # the dispatcher's default attempt deadline (HORAE_DISPATCHER_DEADLINE_S)
_ALLOW, _ON_TIME = OverlapPolicy.ALLOW, ev.Lane.ON_TIME
Refusal = tuple[str, str, str]  # (audited action, quarantine cause, detail)


class DefinitionPending(Exception):
    """A command names a trigger its partition does not know yet. Definitions and commands are
    two topics: a command produced right after its trigger's definition (the API answers a
    create once the definition is written, not once a planner read it) can be read first."""


class Decider:
    def __init__(
        self,
        tenant_keys: TenantKeys | None = None,
        limits: Limits | None = None,
        shared: SharedValues | None = None,
        router: Router | None = None,
        command_max_ttl_s: int = DEFAULT_MAX_TTL_S,
        grants: Grants | None = None,
        overlap_attempt_s: float = DEFAULT_ATTEMPT_S,
    ) -> None:
        """``router`` names the topics of what is emitted (default prefix ``horae.``);
        ``command_max_ttl_s`` bounds how far ahead a command's ``expires_at`` may lie;
        ``grants``: what each key may do (:mod:`horae.contracts.grants`; default: the platform
        key everything, every other key ``author``; secret refs not checked);
        ``overlap_attempt_s``: how long after its deadline a running fire without an outcome
        still counts as running (the dispatcher's longest attempt)."""
        self.tenant_keys: TenantKeys = tenant_keys or {}
        self.limits = limits or Limits()
        self.shared = shared or SharedValues()
        #: a definition as an entry holds it: the objects index holds a copy of shared parts (no
        #: signature); the compact index packs the parts, shared, into its columns at a settle
        self.held: Callable[[ev.TriggerDefinition], ev.TriggerDefinition] = (
            self.shared.index_copy if INDEX.kind == "objects" else _as_received
        )
        self.router = router or Router("horae.")
        self.grants = grants or Grants()
        self.overlap_attempt_s = overlap_attempt_s
        #: None when the events topics a definition's triggers produce into exist (created if
        #: need be), else why not (the planner sets it; None: topics are not checked)
        self.topics_ready: Callable[[ev.TriggerDefinition], str | None] | None = None
        self.commands = CommandHandler(
            self.tenant_keys, self.router, command_max_ttl_s, self.grants
        )

    # --- input records ------------------------------------------------------------------
    def accept_definition(
        self, msg: InputRecord, now: float = 0.0, check_limits: bool = True
    ) -> ev.TriggerDefinition | ev.Quarantined:
        """The definition ``msg`` carries, if it passes ingress (:func:`ingest_definition`) and,
        with ``check_limits``, the platform limits at ``now``; else its quarantine record."""
        source = Source(msg.topic() or "", msg.partition() or 0, msg.offset() or 0)
        result = ingest_definition(
            msg.value(), msg.key(), source, self.tenant_keys, now=utc_datetime(now),
            grants=self.grants,
        )  # fmt: skip
        if isinstance(result, ev.TriggerDefinition) and check_limits:
            try:  # platform limits and "fires within 5 years" need configuration and now
                spec, schedule = self.shared.compiled(result)
                validate_trigger(spec, int(now), self.limits, schedule)
            except ValueError as exc:
                return quarantine(msg, "invalid", str(exc), utc_datetime(now), result)
        return result

    def on_definition_record(self, index: DueIndex, msg: InputRecord, now: float) -> list[Emit]:
        """A definition record of ``index``'s partition: quarantined (refused at ingress, a
        version not above the one held, or ``forbidden`` to its signing key, which is audited),
        else accepted (a copy onto ``definitions.accepted``) and applied; an accepted version
        asking for more than the defaults is audited as the grant it uses."""
        accepted = self.accept_definition(msg, now)
        if isinstance(accepted, ev.Quarantined):
            return [self.router.emit(accepted, index.partition)]
        key = ev.trigger_key(accepted.tenant, accepted.trigger_id)
        entry = index.get(key)
        if entry is not None and accepted.version <= entry.definition.version:
            detail = f"version {accepted.version} <= current {entry.definition.version}"
            stale = quarantine(msg, "stale-version", detail, utc_datetime(now), accepted)
            return [self.router.emit(stale, index.partition)]
        audits = self._authorized(index.partition, msg, accepted, entry, now)
        if audits and isinstance(audits[0].event, ev.Quarantined):
            return audits
        missing = None if self.topics_ready is None else self.topics_ready(accepted)
        if missing is not None:  # its events topic does not exist: refused, nothing applied
            refused = quarantine(msg, "events-topic", missing, utc_datetime(now), accepted)
            return [self.router.emit(refused, index.partition)]
        accepted_copy = self.router.emit(  # definitions.accepted (the record's bytes if current)
            accepted, index.partition, value=accepted_value(msg.value())
        )
        return [accepted_copy, *audits, *self.apply_definition(index, key, entry, accepted, now)]

    def _authorized(
        self,
        partition: int,
        msg: InputRecord,
        d: ev.TriggerDefinition,
        entry: TriggerEntry | None,
        now: float,
    ) -> list[Emit]:
        """The quarantine record and audit entry of a definition its key may not sign, else
        the audit entries of the grants above the defaults it uses (usually none)."""
        at = utc_datetime(now)
        where = (msg.topic(), msg.partition(), msg.offset())
        forbidden = self.grants.check_definition(d, entry.definition if entry else None)
        if forbidden is not None:
            refused = quarantine(msg, forbidden.cause, forbidden.detail, at, d)
            audit = forbidden.audit(d.tenant, d.trigger_id, at, *where, command_id=None)
            return [self.router.emit(refused, partition), self.router.emit(audit, partition)]
        acts = self.grants.privileged_acts(d)
        key_id = d.signature.key_id if d.signature else ""
        return [
            self.router.emit(
                audit_entry(
                    d.tenant, d.trigger_id, act, REQUIRED[act], key_id, at, True,
                    {"version": str(d.version), "author": d.author}, *where,
                ),
                partition,
            )
            for act in acts
        ]  # fmt: skip

    def on_command_record(
        self, index: DueIndex, msg: InputRecord, now: float, *, final: bool = True
    ) -> list[Emit]:
        """A command record of ``index``'s partition: quarantined when it does not decode or
        breaks a text rule (:mod:`horae.contracts.textrules`, cause ``invalid``), is not signed
        by its tenant, names no live trigger, has no or a bad expiry, was applied already, is a
        manual run whose requested time is outside its window (``requested-at``), or its
        tenant is suspended (the last four audited too); else applied once, and remembered in
        the planner state committed with its effects. A command naming a trigger this
        partition has never seen raises :class:`DefinitionPending` unless ``final`` (its
        definition may be on its way: the worker tries it again shortly, then for good)."""
        value = msg.value()
        try:
            command = decode_command(value or b"")  # and its text rules (cause invalid)
        except DecodeError as exc:
            return [
                self.router.emit(
                    quarantine(msg, exc.cause, exc.detail, utc_datetime(now)), index.partition
                )
            ]
        key = ev.trigger_key(command.tenant, command.trigger_id)
        refused = self.commands.refusal(command, msg.key())
        if refused is not None and refused[0] == "forbidden":  # the key lacks the role: audited
            act = command_act(command).value
            return self._refuse(index.partition, msg, command, now, (act, *refused))
        if refused is not None:
            return [self.router.emit(quarantine(msg, *refused, utc_datetime(now)), index.partition)]
        if command.trigger_id == ev.TENANT_WIDE and command.cancel_fire_key is not None:
            why = "invalid", "cancel_fire_key: a cancel names one trigger's fire, not a tenant"
            return self._refuse(index.partition, msg, command, now, (Act.FIRE_CANCEL.value, *why))
        if command.trigger_id == ev.TENANT_WIDE:
            return self._tenant_command(index, msg, command, now)
        entry = index.get(key)
        if entry is None and not final:
            raise DefinitionPending(key)
        if entry is None or entry.definition.state is ev.DefinitionState.DELETED:
            unknown = quarantine(
                msg, "unknown-trigger", f"no live trigger {key}", utc_datetime(now)
            )
            return [self.router.emit(unknown, index.partition)]
        entry.applied = remembered(entry.applied, now)
        refused = self.commands.once_refusal(command, entry.applied, now)
        if refused is None:  # a manual run's requested time within its window
            refused = self.commands.manual_refusal(command, now)
        cancel = command.cancel_fire_key is not None
        if refused is None and cancel:
            refused = cancel_refusal(command, entry.definition, entry.last_decided)
        tenant = index.tenants.get(command.tenant)
        if refused is None and tenant is not None and tenant.suspended_since is not None:
            refused = "suspended", f"tenant {command.tenant!r} is suspended"
        if refused is not None:
            action = Act.FIRE_CANCEL.value if cancel else f"{command.kind.value}.request"
            return self._refuse(index.partition, msg, command, now, (action, *refused))
        applied = self.commands.applied_entry(command, entry.applied)
        entry.applied = (*entry.applied, applied)
        if cancel:
            return self._cancel(index, key, entry, command, now)
        if command.kind in (ev.CommandKind.PAUSE, ev.CommandKind.RESUME):
            state = (
                ev.DefinitionState.PAUSED
                if command.kind is ev.CommandKind.PAUSE
                else ev.DefinitionState.LIVE
            )
            return self._transition(
                index, key, entry, entry.definition, state, now, cause=command.reason
            )
        out = self.commands.handle(
            index.partition, entry.definition, command, now, entry.schedule, applied.sequence
        )
        out.append(self.state_output(index.partition, entry, now, index.flights.get(key)))
        return out

    def _cancel(
        self, index: DueIndex, key: str, entry: TriggerEntry, command: ev.Command, now: float
    ) -> list[Emit]:
        """A tenant's cancel of one fire of the trigger (checked): audited ``fire.cancel`` with
        the fire key and the actor, its cancel markers on every lane of the partition
        (:func:`~.commands.cancel_outputs`), and the state that remembers the command."""
        detail = {"fire_key": command.cancel_fire_key or ""}
        tzdata = entry.schedule.tzdata
        return [
            self.commands.audit(
                index.partition, command, now, Act.FIRE_CANCEL.value, None, detail=detail
            ),
            *cancel_outputs(self.router, index.partition, entry.definition, command, now, tzdata),
            self.state_output(index.partition, entry, now, index.flights.get(key)),
        ]

    def _refuse(
        self, partition: int, msg: InputRecord, command: ev.Command, now: float, refused: Refusal
    ) -> list[Emit]:
        """Quarantine ``msg`` with the refusal's cause and audit it."""
        action, cause, why = refused
        return [
            self.router.emit(quarantine(msg, cause, why, utc_datetime(now)), partition),
            self.commands.audit(partition, command, now, action, cause, msg.offset()),
        ]

    def _tenant_command(
        self, index: DueIndex, msg: InputRecord, command: ev.Command, now: float
    ) -> list[Emit]:
        """Suspend (``pause``) or lift (``resume``) ``command.tenant`` on this partition:
        platform role only, once; audited either way."""
        action = "tenant.suspend" if command.kind is ev.CommandKind.PAUSE else "tenant.resume"
        tenant = index.tenants.setdefault(command.tenant, TenantEntry())
        tenant.applied = remembered(tenant.applied, now)
        refused = self.commands.once_refusal(command, tenant.applied, now)
        if refused is None and command.role is not ev.Role.PLATFORM:
            refused = "forbidden", f"{action}: needs role 'platform'"
        if refused is None and command.kind not in (ev.CommandKind.PAUSE, ev.CommandKind.RESUME):
            refused = "invalid", f"{command.kind.value} cannot name a whole tenant"
        if refused is not None:
            return self._refuse(index.partition, msg, command, now, (action, *refused))
        tenant.applied = (*tenant.applied, self.commands.applied_entry(command, tenant.applied))
        if command.kind is ev.CommandKind.PAUSE:
            if tenant.suspended_since is None:
                tenant.suspended_since = now
        else:
            tenant.suspended_since = None
        return [
            self.commands.audit(index.partition, command, now, action, None),
            self.tenant_state_output(index.partition, command.tenant, tenant, now),
        ]

    # --- state transitions --------------------------------------------------------------
    def apply_definition(
        self,
        index: DueIndex,
        key: str,
        entry: TriggerEntry | None,
        d: ev.TriggerDefinition,
        now: float,
    ) -> list[Emit]:
        if entry is None:
            last = int(now)
            spec, schedule = self.shared.compiled(d)
            entry = TriggerEntry(
                definition=self.held(d),
                spec=spec,
                schedule=schedule,
                last_decided=last,
            )
            if d.state is ev.DefinitionState.PAUSED:
                entry.paused_since = now
            self._reschedule(key, entry)
            index.put(key, entry)
            return [self.state_output(index.partition, entry, now)]
        return self._transition(index, key, entry, d, d.state, now)

    def _transition(
        self,
        index: DueIndex,
        key: str,
        entry: TriggerEntry,
        d: ev.TriggerDefinition,
        state: ev.DefinitionState,
        now: float,
        cause: str | None = None,
    ) -> list[Emit]:
        """``entry`` under definition ``d`` in ``state``; ``cause``: why it was paused (a pause
        command's reason, e.g. the breaker's), in ``schedule.paused``."""
        out: list[Emit] = []
        was = entry.definition.state
        if was is ev.DefinitionState.LIVE:
            out += self.decide_entry(index, key, entry, now, now)  # old version first
        if d is not entry.definition:
            entry.definition = self.held(d)
            entry.spec, entry.schedule = self.shared.compiled(d)
        if state is not d.state:
            entry.definition = replace(entry.definition, state=state)
        if state is ev.DefinitionState.PAUSED and was is not ev.DefinitionState.PAUSED:
            entry.paused_since = now
            out.append(
                schedule_event(
                    self.router,
                    d,
                    index.partition,
                    ev.ScheduleEventType.PAUSED,
                    now,
                    f"paused: {cause}" if cause else "paused",
                    int(now),
                    tzdata=entry.schedule.tzdata,
                )
            )
        elif state is ev.DefinitionState.LIVE and was is ev.DefinitionState.PAUSED:
            since = entry.paused_since if entry.paused_since is not None else now
            cause = (
                f"paused: from {utc_datetime(since).isoformat()} to {utc_datetime(now).isoformat()}"
            )
            out.append(
                schedule_event(
                    self.router,
                    d,
                    index.partition,
                    ev.ScheduleEventType.RESUMED,
                    now,
                    cause,
                    int(now),
                    tzdata=entry.schedule.tzdata,
                )
            )
            entry.paused_since = None
            out += self.decide_entry(index, key, entry, now, now, resumed=True)
        elif state is ev.DefinitionState.DELETED:
            entry.paused_since = None
        if was is ev.DefinitionState.DELETED and state is not ev.DefinitionState.DELETED:
            entry.last_decided = int(now)  # re-created: starts afresh, like a new trigger
            entry.fired = 0  # its count too
        self._reschedule(key, entry)
        flight = index.flights.get(key)
        if flight is not None:
            self._hold_due(entry, flight)
        index.put(key, entry)
        out.append(self.state_output(index.partition, entry, now, flight))
        return out

    def _reschedule(self, key: str, entry: TriggerEntry) -> None:
        count = entry.definition.recurrence.count
        if (
            entry.definition.state is not ev.DefinitionState.LIVE
            or entry.last_decided is None
            or (count is not None and entry.fired >= count)
        ):
            entry.next_instant = entry.due_ts = None
            return
        nxt = entry.schedule.next_after(entry.last_decided)
        entry.next_instant = nxt
        if nxt is None:
            entry.due_ts = None
            return
        jitter = self._jitter_ms(key, entry, nxt)
        entry.due_ts = nxt + jitter / 1000.0

    def _jitter_ms(self, key: str, entry: TriggerEntry, instant: int) -> int:
        if entry.spec.jitter.max_ms <= 0:
            return 0
        return entry.spec.jitter.offset(key, instant, entry.schedule.next_after(instant))

    # --- deciding -----------------------------------------------------------------------
    def decide_due(self, index: DueIndex, until: float, now: float, limit: int) -> list[Emit]:
        out: list[Emit] = []
        tenants, flights = index.tenants, index.flights
        for key, entry in list(index.pop_due(until, limit)):
            flight = flights.get(key) if flights else None
            if flight is not None:  # a fire in flight: its deadline may have passed
                out += self._expire(index, key, entry, flight, until, now)
            if tenants and self._suspended(index, entry):
                out += self.decide_suspended(index.partition, key, entry, until, now)
            else:
                out += self.decide_entry(index, key, entry, until, now)
            flight = flights.get(key) if flights else None
            if flight is not None:
                self._hold_due(entry, flight)
            index.put(key, entry)
            out.append(self.state_output(index.partition, entry, now, flight))
        return out

    @staticmethod
    def _suspended(index: DueIndex, entry: TriggerEntry) -> bool:
        tenant = index.tenants.get(entry.definition.tenant)
        return tenant is not None and tenant.suspended_since is not None

    def decide_suspended(
        self, partition: int, key: str, entry: TriggerEntry, until: float, now: float
    ) -> list[Emit]:
        """Decide ``(last_decided, until]`` of a live trigger whose tenant is suspended: each
        instant is recorded ``paused`` with cause ``tenant suspended`` (at most
        ``MAX_RECORDS_PER_EVALUATION`` at once; the rest at the next tick)."""
        d = entry.definition
        last = entry.last_decided
        if d.state is not ev.DefinitionState.LIVE or last is None or int(until) <= last:
            return []
        had_next = entry.next_instant is not None
        out: list[Emit] = []
        schedule, stop = entry.schedule, int(until)
        t = schedule.next_after(last)
        while t is not None and t <= stop and len(out) < MAX_RECORDS_PER_EVALUATION:
            out += fire_outputs(
                self.router,
                d,
                partition,
                scheduled=t,
                origin=ev.Origin.SCHEDULED,
                lane=None,
                now=now,
                cause=SUSPENDED,
                tzdata=schedule.tzdata,
            )
            last = t
            t = schedule.next_after(t)
        entry.last_decided = last if t is not None and t <= stop else stop
        self._reschedule(key, entry)
        return self._completed(out, partition, entry, had_next, now)

    def decide_entry(
        self,
        index: DueIndex,
        key: str,
        entry: TriggerEntry,
        until: float,
        now: float,
        resumed: bool = False,
    ) -> list[Emit]:
        """Decide ``(last_decided, until]`` for a live trigger and move its cursor."""
        partition = index.partition
        d = entry.definition
        last = entry.last_decided
        if d.state is not ev.DefinitionState.LIVE or last is None or int(until) <= last:
            return []
        had_next = entry.next_instant is not None
        outcome = evaluate_misfire(
            entry.schedule,
            last,
            int(until),
            entry.spec.misfire,
            entry.spec.horizon_s,
            max_records=0 if resumed else MAX_RECORDS_PER_EVALUATION,
            jitter_ms=entry.spec.jitter.max_ms,
            jitter_key=key,
        )
        limit = d.recurrence.count
        if limit is not None and len(outcome.fires) > limit - entry.fired:
            outcome = _first_fires(outcome, limit - entry.fired)
        entry.fired += len(outcome.fires)
        tz = entry.schedule.tzdata
        out: list[Emit] = []
        tracked = entry.spec.overlap is not _ALLOW or (index.flights and key in index.flights)
        for fire in outcome.fires:
            lane = ev.Lane.CATCH_UP if fire.catch_up else ev.Lane.ON_TIME
            following = entry.schedule.next_after(fire.scheduled)
            if tracked:
                out += self._overlap_fire(
                    index, key, entry, fire.scheduled, fire.jitter_ms, lane, following, now
                )
                continue
            out += fire_outputs(
                self.router,
                d,
                partition,
                scheduled=fire.scheduled,
                origin=ev.Origin.SCHEDULED,
                lane=lane,
                now=now,
                jitter_ms=fire.jitter_ms,
                tzdata=tz,
                next_instant=following,
            )
        for nf in outcome.not_fired:
            out += fire_outputs(
                self.router,
                d,
                partition,
                scheduled=nf.scheduled,
                origin=ev.Origin.SCHEDULED,
                lane=None,
                now=now,
                cause=nf.cause,
                detail=nf.detail or None,
                tzdata=tz,
            )
        for om in outcome.omitted:
            count = "" if om.count is None else f"{om.count} "
            cause = (
                f"{om.cause}: {count}instants from {utc_datetime(om.start).isoformat()} "
                f"to {utc_datetime(om.end).isoformat()} not listed"
            )
            kind = (
                ev.ScheduleEventType.EXPIRED
                if om.cause.startswith("expired")
                else ev.ScheduleEventType.SKIPPED
            )
            out.append(
                schedule_event(
                    self.router, d, partition, kind, now, cause, om.start, om.end, tzdata=tz
                )
            )
        entry.last_decided = outcome.decided_through
        self._reschedule(key, entry)
        return self._completed(out, partition, entry, had_next, now)

    # --- overlap ------------------------------------------------------------------------
    def on_outcome_record(self, index: DueIndex, msg: InputRecord, now: float) -> list[Emit]:
        """An outcome record of ``index``'s partition. When it is the outcome of a trigger's
        running fire, that fire has ended: a buffered fire is released (its order emitted) and
        the state committed; any other outcome costs one dict lookup by its key, undecoded."""
        running = index.running
        if not running:
            return []
        raw = msg.key() or b""
        key = running.get(raw)
        if key is None:
            return []
        entry, flight = index.get(key), index.flights.get(key)
        if entry is None or flight is None or (flight.running or "").encode() != raw:
            del running[raw]
            return []
        before = entry.due_ts
        out = self._ended(index, key, entry, flight, now, "its outcome was read")
        flight = index.flights.get(key)
        if flight is not None:
            self._hold_due(entry, flight)
        if entry.due_ts is not None and entry.due_ts != before:
            index.put(key, entry)
        out.append(self.state_output(index.partition, entry, now, flight))
        return out

    def _overlap_fire(
        self,
        index: DueIndex,
        key: str,
        entry: TriggerEntry,
        scheduled: int,
        jitter_ms: int,
        lane: ev.Lane,
        following: int | None,
        now: float,
    ) -> list[Emit]:
        """One scheduled fire of a trigger whose overlap policy is not ``allow`` (or that has a
        fire in flight): started, skipped, buffered, or started replacing the fires in flight
        (:func:`~horae.domain.overlap.decide_overlap`)."""
        d = entry.definition
        out: list[Emit] = []
        flight = index.flights.get(key)
        if flight is not None:
            out += self._expire(index, key, entry, flight, now, now)
            flight = index.flights.get(key)
        policy = entry.spec.overlap if deliverer(d.target.kind).in_flight else _ALLOW
        in_flight: list[InFlight] = []
        if flight is not None and flight.running is not None:
            in_flight.append(InFlight(flight.running, _instant(flight.running)))
        if flight is not None and flight.buffered is not None:
            in_flight.append(InFlight(flight.buffered, _instant(flight.buffered), True))
        decision = decide_overlap(policy, in_flight)
        fire_key = canonical_text(d.tenant, d.trigger_id, scheduled, 0, ev.Origin.SCHEDULED)
        tz = entry.schedule.tzdata
        if decision.action is OverlapAction.START:
            for old in decision.cancel:
                assert flight is not None
                out += self._replace(index, key, entry, flight, old, fire_key, now)
            out += fire_outputs(
                self.router, d, index.partition, scheduled=scheduled,
                origin=ev.Origin.SCHEDULED, lane=lane, now=now, jitter_ms=jitter_ms, tzdata=tz,
                next_instant=following,
            )  # fmt: skip
            if policy is not _ALLOW:
                self._run(index, key, entry, fire_key, lane, following)
            return out
        assert flight is not None and flight.running is not None
        if decision.action is OverlapAction.BUFFER:
            flight.buffered, flight.buffered_lane = fire_key, lane
            return out
        entry.fired -= 1  # not fired after all (Recurrence.count counts fires)
        skipped = fire_outputs(
            self.router, d, index.partition, scheduled=scheduled, origin=ev.Origin.SCHEDULED,
            lane=None, now=now, jitter_ms=jitter_ms, cause=decision.cause,
            detail=f"fire {flight.running} still running", tzdata=tz,
        )  # fmt: skip
        record = skipped[0].event
        assert isinstance(record, ev.FireRecord)
        skipped.append(
            fire_event(self.router, d, index.partition, record, ev.ScheduleEventType.SKIPPED)
        )
        return out + skipped

    def _run(
        self,
        index: DueIndex,
        key: str,
        entry: TriggerEntry,
        fire_key: str,
        lane: ev.Lane,
        following: int | None,
    ) -> None:
        """``fire_key``'s order was just emitted: it runs until its outcome is read, at most
        until its deadline (the next instant: no retry starts later) plus
        ``overlap_attempt_s`` (an attempt started just before it may last that long). A fire
        with no next instant has nothing to overlap with: it is not tracked."""
        flight = index.flights.get(key)
        if following is None:
            if flight is not None:
                self._tidy(index, key, flight)
            return
        if flight is None:
            flight = index.flights[key] = Flight()
        flight.running, flight.running_lane = fire_key, lane
        flight.running_until = following + self.overlap_attempt_s
        index.running[fire_key.encode()] = key

    def _replace(
        self,
        index: DueIndex,
        key: str,
        entry: TriggerEntry,
        flight: Flight,
        old: str,
        new: str,
        now: float,
    ) -> list[Emit]:
        """The fire ``old`` in flight is replaced by ``new``: recorded ``replaced``; a running
        one gets a cancel marker on its lane, a buffered one was never ordered."""
        lane: ev.Lane | None
        if old == flight.buffered:
            lane, jitter_lane = None, flight.buffered_lane
            flight.buffered = flight.buffered_lane = None
            entry.fired -= 1
        else:
            lane = jitter_lane = flight.running_lane
            self._end_running(index, flight)
        scheduled = _instant(old)
        jitter = self._jitter_ms(key, entry, scheduled) if jitter_lane is _ON_TIME else 0
        return replaced_outputs(
            self.router, entry.definition, index.partition, scheduled=scheduled, lane=lane,
            now=now, jitter_ms=jitter, detail=f"replaced by {new}", tzdata=entry.schedule.tzdata,
        )  # fmt: skip

    def _expire(
        self,
        index: DueIndex,
        key: str,
        entry: TriggerEntry,
        flight: Flight,
        at: float,
        now: float,
    ) -> list[Emit]:
        """End the running fire if its ``running_until`` is at or before ``at``."""
        until = flight.running_until
        if flight.running is None or until is None or until > at:
            return []
        why = f"its deadline {utc_datetime(until).isoformat()} passed"
        return self._ended(index, key, entry, flight, now, why)

    def _ended(
        self, index: DueIndex, key: str, entry: TriggerEntry, flight: Flight, now: float, why: str
    ) -> list[Emit]:
        """The running fire has ended (``why``): the buffered fire, if any, is released."""
        ended = flight.running
        self._end_running(index, flight)
        out: list[Emit] = []
        fire_key, lane = flight.buffered, flight.buffered_lane or _ON_TIME
        if fire_key is not None:
            flight.buffered = flight.buffered_lane = None
            d = entry.definition
            scheduled = _instant(fire_key)
            following = entry.schedule.next_after(scheduled)
            out = fire_outputs(
                self.router, d, index.partition, scheduled=scheduled,
                origin=ev.Origin.SCHEDULED, lane=lane, now=now,
                jitter_ms=self._jitter_ms(key, entry, scheduled) if lane is _ON_TIME else 0,
                cause=CAUSE_BUFFERED, detail=f"held until {ended} ended: {why}",
                tzdata=entry.schedule.tzdata, next_instant=following,
            )  # fmt: skip
            if entry.spec.overlap is not _ALLOW and deliverer(d.target.kind).in_flight:
                self._run(index, key, entry, fire_key, lane, following)
        self._tidy(index, key, flight)
        self._reschedule(key, entry)  # its due time may have been held early (_hold_due)
        return out

    @staticmethod
    def _end_running(index: DueIndex, flight: Flight) -> None:
        if flight.running is not None:
            index.running.pop(flight.running.encode(), None)
        flight.running = flight.running_lane = flight.running_until = None

    @staticmethod
    def _tidy(index: DueIndex, key: str, flight: Flight) -> None:
        if flight.running is None and flight.buffered is None:
            index.flights.pop(key, None)

    @staticmethod
    def _hold_due(entry: TriggerEntry, flight: Flight) -> None:
        """A buffered fire is due when the running one's deadline passes, if that is sooner."""
        until = flight.running_until
        if (
            flight.buffered is not None
            and until is not None
            and (entry.due_ts is None or until < entry.due_ts)
        ):
            entry.due_ts = until

    def restore_flight(
        self, index: DueIndex, key: str, entry: TriggerEntry, state: ev.PlannerState
    ) -> None:
        """The fires in flight a trigger's last committed state records, back in ``index``
        (before ``entry`` is put)."""
        if state.running_fire_key is None and state.buffered_fire_key is None:
            return
        until = state.running_until
        flight = Flight(
            state.running_fire_key,
            state.running_lane,
            None if until is None else until.timestamp(),
            state.buffered_fire_key,
            state.buffered_lane,
        )
        index.flights[key] = flight
        if flight.running is not None:
            index.running[flight.running.encode()] = key
        self._hold_due(entry, flight)

    def _completed(
        self, out: list[Emit], partition: int, entry: TriggerEntry, had_next: bool, now: float
    ) -> list[Emit]:
        """``out``, and ``schedule.completed`` when deciding just passed the last instant
        (``had_next``: the trigger had one before). With ``policies.action_after_completion``
        ``delete``, the completion also deletes the definition (:meth:`_delete_completed`)."""
        if had_next and entry.next_instant is None:
            d = entry.definition
            last, count = entry.spec.end, d.recurrence.count
            if count is not None and entry.fired >= count:
                cause = f"completed: fired {count} times"
            elif last is not None:
                cause = (
                    f"completed: no instant left before its end {utc_datetime(last).isoformat()}"
                )
            else:
                cause = "completed: no instant left"
            kind = ev.ScheduleEventType.COMPLETED
            tz = entry.schedule.tzdata
            if d.policies.action_after_completion is ev.ActionAfterCompletion.DELETE:
                cause += f"; deleted: version {d.version + 1} (action_after_completion delete)"
            out.append(schedule_event(self.router, d, partition, kind, now, cause, tzdata=tz))
            if d.policies.action_after_completion is ev.ActionAfterCompletion.DELETE:
                out += self._delete_completed(partition, entry, cause, now)
        return out

    def _delete_completed(
        self, partition: int, entry: TriggerEntry, cause: str, now: float
    ) -> list[Emit]:
        """A completed trigger's deletion (EventBridge's ``ActionAfterCompletion: DELETE``): the
        next version, state ``deleted``, authored by the planner (author
        :data:`COMPLETION_AUTHOR`, role ``platform``, unsigned: ``definitions.accepted`` is the
        planner's own) onto ``definitions.accepted`` in this transaction, applied to ``entry``,
        and audited (action ``completion.delete``). The caller records the entry's state."""
        d = entry.definition
        gone = replace(
            d,
            version=d.version + 1,
            state=ev.DefinitionState.DELETED,
            authored_at=utc_datetime(int(now)),
            author=COMPLETION_AUTHOR,
            role=ev.Role.PLATFORM,
            signature=None,
        )
        entry.definition = gone
        entry.paused_since = None
        audit = ev.AuditEntry(
            audit_id=event_id("audit", "completion.delete", d.tenant, d.trigger_id, gone.version),
            tenant=d.tenant,
            principal=COMPLETION_AUTHOR,
            role=ev.Role.PLATFORM,
            action="completion.delete",
            at=utc_datetime(now),
            allowed=True,
            trigger_id=d.trigger_id,
            detail={"version": str(gone.version), "completed": cause},
        )
        return [self.router.emit(gone, partition), self.router.emit(audit, partition)]

    # --- durable state ------------------------------------------------------------------
    def state_output(
        self, partition: int, entry: TriggerEntry, now: float, flight: Flight | None = None
    ) -> Emit:
        d = entry.definition
        if flight is not None:
            return self.router.emit(self._state(entry, now, flight), partition)
        state = ev.PlannerState(
            tenant=d.tenant,
            trigger_id=d.trigger_id,
            trigger_version=d.version,
            state=d.state,
            updated_at=utc_datetime(now),
            next_instant=None if entry.next_instant is None else utc_datetime(entry.next_instant),
            last_decided=None if entry.last_decided is None else utc_datetime(entry.last_decided),
            paused_since=None if entry.paused_since is None else utc_datetime(entry.paused_since),
            applied_commands=entry.applied,
            fired=entry.fired,
            tzdata_version=entry.schedule.tzdata,
        )
        return self.router.emit(state, partition)

    @staticmethod
    def _state(entry: TriggerEntry, now: float, flight: Flight) -> ev.PlannerState:
        """The state record of a trigger with fires in flight."""
        d, until = entry.definition, flight.running_until
        return ev.PlannerState(
            tenant=d.tenant,
            trigger_id=d.trigger_id,
            trigger_version=d.version,
            state=d.state,
            updated_at=utc_datetime(now),
            next_instant=None if entry.next_instant is None else utc_datetime(entry.next_instant),
            last_decided=None if entry.last_decided is None else utc_datetime(entry.last_decided),
            paused_since=None if entry.paused_since is None else utc_datetime(entry.paused_since),
            applied_commands=entry.applied,
            fired=entry.fired,
            running_fire_key=flight.running,
            running_until=None if until is None else utc_datetime(until),
            running_lane=flight.running_lane,
            buffered_fire_key=flight.buffered,
            buffered_lane=flight.buffered_lane,
            tzdata_version=entry.schedule.tzdata,
        )

    def tenant_state_output(
        self, partition: int, tenant: str, entry: TenantEntry, now: float
    ) -> Emit:
        """The state record of a tenant on ``partition`` (key ``<tenant>/*``): ``paused`` while
        suspended (since ``paused_since``), and the tenant-wide commands remembered."""
        since = entry.suspended_since
        state = ev.PlannerState(
            tenant=tenant,
            trigger_id=ev.TENANT_WIDE,
            trigger_version=0,
            state=ev.DefinitionState.LIVE if since is None else ev.DefinitionState.PAUSED,
            updated_at=utc_datetime(now),
            paused_since=None if since is None else utc_datetime(since),
            applied_commands=entry.applied,
        )
        return self.router.emit(state, partition)

    @staticmethod
    def restore_tenant(state: ev.PlannerState, now: float) -> TenantEntry:
        """The tenant entry of a partition rebuilt from its last committed tenant state."""
        since = state.paused_since
        return TenantEntry(
            suspended_since=None if since is None else since.timestamp(),
            applied=remembered(state.applied_commands, now),
        )

    def restore(
        self, d: ev.TriggerDefinition, state: ev.PlannerState | None, now: float
    ) -> TriggerEntry:
        """The entry of a trigger rebuilt from its definition and last committed state."""
        if state is None or state.last_decided is None:
            last = int(now)
        else:
            last = int(state.last_decided.timestamp())
        spec, schedule = self.shared.compiled(d)
        entry = TriggerEntry(
            definition=self.held(d), spec=spec, schedule=schedule, last_decided=last
        )
        if state is not None and state.state is not d.state:
            entry.definition = replace(entry.definition, state=state.state)  # by a command
        if state is not None and state.paused_since is not None:
            entry.paused_since = state.paused_since.timestamp()
        if state is not None and state.applied_commands:
            entry.applied = remembered(state.applied_commands, now)
        if state is not None:
            entry.fired = state.fired
        key = ev.trigger_key(d.tenant, d.trigger_id)
        self._reschedule(key, entry)
        return entry

    def tzdata_change(
        self,
        partition: int,
        entry: TriggerEntry,
        state: ev.PlannerState,
        now: float,
        flight: Flight | None = None,
    ) -> list[Emit]:
        """What a trigger restored from ``state`` owes the log when ``state`` was decided with
        another tzdata release than this planner's (an upgrade, or any change): its next instant
        is already recomputed (:meth:`restore` derives it from ``last_decided`` under the current
        release, and that instant governs); if it moved, ``schedule.recomputed`` says from what
        to what, with a state recording the current release. Nothing when it did not move (the
        next state written records the release), when the releases agree, or when ``state``
        predates PlannerState v4 (no release recorded). ``flight``: its fires in flight, restored
        from ``state`` (:meth:`restore_flight`), which the new state keeps."""
        old = None if state.next_instant is None else int(state.next_instant.timestamp())
        return self._moved(partition, entry, state.tzdata_version, old, now, flight)

    def recompute(
        self,
        partition: int,
        key: str,
        entry: TriggerEntry,
        flight: Flight | None,
        tzdata: str | None,
        now: float,
    ) -> list[Emit]:
        """A trigger loaded from a snapshot written by other planner code or under tzdata
        release ``tzdata``: its next instant and due time derived again from its last decided
        one, as :meth:`restore` derives them; what it then owes the log as
        :meth:`tzdata_change` says."""
        old = entry.next_instant
        self._reschedule(key, entry)
        if flight is not None:
            self._hold_due(entry, flight)
        return self._moved(partition, entry, tzdata, old, now, flight)

    def _moved(
        self,
        partition: int,
        entry: TriggerEntry,
        before: str | None,
        old: int | None,
        now: float,
        flight: Flight | None = None,
    ) -> list[Emit]:
        """``schedule.recomputed`` and a state when the next instant computed under release
        ``before`` (``old``) moved under this planner's."""
        current = entry.schedule.tzdata
        if before is None or before == current:
            return []
        new = entry.next_instant
        if old == new:
            return []
        cause = (
            f"recomputed: tzdata {before} -> {current}: next instant "
            f"{'none' if old is None else utc_datetime(old).isoformat()} -> "
            f"{'none' if new is None else utc_datetime(new).isoformat()}"
        )
        kind, d = ev.ScheduleEventType.RECOMPUTED, entry.definition
        return [
            schedule_event(self.router, d, partition, kind, now, cause, tzdata=current),
            self.state_output(partition, entry, now, flight),
        ]


def _as_received(d: ev.TriggerDefinition) -> ev.TriggerDefinition:
    return d


def _instant(fire_key: str) -> int:
    """The scheduled instant of a fire key (epoch s)."""
    return FireKey.parse(fire_key).scheduled


def _first_fires(outcome: MisfireOutcome, n: int) -> MisfireOutcome:
    """``outcome`` cut after its ``n``-th fire (``n >= 1``; ``n <= 0``: nothing): the rest is
    not decided — the trigger has fired its ``recurrence.count``."""
    if n <= 0:
        return MisfireOutcome((), (), (), outcome.decided_through)
    fires = outcome.fires[:n]
    cut = fires[-1].scheduled
    return MisfireOutcome(
        fires=fires,
        not_fired=tuple(r for r in outcome.not_fired if r.scheduled < cut),
        omitted=tuple(o for o in outcome.omitted if o.start < cut),
        decided_through=cut,
    )
