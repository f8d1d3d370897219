"""Building the planner's output records from domain decisions (pure: ``now`` is an argument).

Every fire the planner commits is a :class:`~horae.contracts.events.FireRecord` on the ledger
(keyed by its fire key) plus, when it fires, its hand-over, as its target kind's deliverer says
(:mod:`horae.delivery`): a :class:`~horae.contracts.events.DispatchOrder` on a lane (``dispatch``:
webhook targets) or a ``schedule.triggered`` :class:`~horae.contracts.events.ScheduleEvent`
(``topic``: event targets; the event *is* the delivery, so it is exactly-once into Kafka).
Instants not fired get a ledger record with their state and cause and no hand-over. A fire
replaced by a newer one (overlap ``replace``) gets a second ledger record, state ``replaced``, and
a *cancel marker* (a ``DispatchOrder`` with ``cancel`` set) on its own lane partition, after its
order (:func:`replaced_outputs`).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from functools import lru_cache

from horae.contracts import events as ev
from horae.contracts.domain_map import retry_to_domain
from horae.contracts.ids import event_id
from horae.contracts.routing import Router
from horae.delivery.port import HandOver
from horae.delivery.table import deliverer
from horae.domain.keys import canonical_text, short_hash_of
from horae.domain.misfire import CAUSE_EXPIRED
from horae.domain.overlap import CAUSE_REPLACED
from horae.domain.retry import CAUSE_EXPIRED as CAUSE_TOO_OLD
from horae.domain.retry import age_origin_ms, expiry
from horae.domain.tzdb import tzdata_version
from horae.ports import Emit

#: The state of an instant not fired, by its cause (any other cause: ``skipped``).
CAUSE_SUSPENDED = "tenant suspended"
STATE_OF_CAUSE = {
    CAUSE_SUSPENDED: ev.FireState.PAUSED,
    CAUSE_EXPIRED: ev.FireState.EXPIRED,
    CAUSE_REPLACED: ev.FireState.REPLACED,
    CAUSE_TOO_OLD: ev.FireState.EXPIRED,
}
# Members looked up once (an enum attribute costs ~0.2 µs, and a peak builds 100,000 fires).
_FIRED, _SKIPPED, _TOPIC = ev.FireState.FIRED, ev.FireState.SKIPPED, HandOver.TOPIC


@lru_cache(maxsize=8192)
def utc_datetime(epoch: float) -> datetime:
    """The aware UTC datetime of an epoch (cached: a batch shares its ``now`` and, at a peak, its
    scheduled instant)."""
    return datetime.fromtimestamp(epoch, UTC)


def fire_outputs(
    router: Router,
    d: ev.TriggerDefinition,
    partition: int,
    *,
    scheduled: int,
    origin: ev.Origin,
    lane: ev.Lane | None,
    now: float,
    jitter_ms: int = 0,
    cause: str | None = None,
    detail: str | None = None,
    command_id: str | None = None,
    tzdata: str | None = None,
    next_instant: int | None = None,
    sequence: int = 0,
) -> list[Emit]:
    """The ledger record of one decided instant and, when ``lane`` is set, its hand-over.
    ``next_instant`` (the trigger's following instant) is the dispatch deadline: retries are
    truncated there. ``sequence`` tells apart manual runs of one instant. A fire this planner
    hands over itself (an event target) that is older than ``policies.retry.max_event_age_s``
    at ``now`` is not: its record is ``expired`` (cause ``expired: max event age``) with a
    ``schedule.expired`` event (a dispatched fire's age is the dispatcher's to judge, when it
    would send it)."""
    max_age_s = d.policies.retry.max_event_age_s
    if max_age_s is not None and lane is not None and deliverer(d.target.kind).hand_over is _TOPIC:
        due_ms = scheduled * 1000 + jitter_ms
        origin_ms = age_origin_ms(origin.value, due_ms, int(now * 1000))
        if expiry(retry_to_domain(d.policies.retry), origin_ms, int(now * 1000)) is not None:
            out = fire_outputs(
                router, d, partition, scheduled=scheduled, origin=origin, lane=None, now=now,
                jitter_ms=jitter_ms, cause=CAUSE_TOO_OLD, command_id=command_id, tzdata=tzdata,
                detail=f"{now - due_ms / 1000:.3f} s old when handed over; max_event_age_s "
                f"{max_age_s}", sequence=sequence,
            )  # fmt: skip
            record = out[0].event
            assert isinstance(record, ev.FireRecord)
            return [*out, fire_event(router, d, partition, record, ev.ScheduleEventType.EXPIRED)]
    canonical = canonical_text(d.tenant, d.trigger_id, scheduled, sequence, origin)  # a StrEnum
    scheduled_at = utc_datetime(scheduled)
    record = ev.FireRecord(
        fire_key=canonical,
        key_hash=short_hash_of(canonical),
        tenant=d.tenant,
        trigger_id=d.trigger_id,
        origin=origin,
        scheduled_at=scheduled_at,
        sequence=sequence,
        jitter_ms=jitter_ms,
        due_at=utc_datetime(scheduled + jitter_ms / 1000.0) if jitter_ms else scheduled_at,
        decided_at=utc_datetime(now),
        state=_FIRED if lane is not None else STATE_OF_CAUSE.get(cause or "", _SKIPPED),
        trigger_version=d.version,
        tzdata_version=tzdata or tzdata_version(d.recurrence.zone),
        target_kind=d.target.kind,
        lane=lane,
        cause=cause,
        cause_detail=detail,
        command_id=command_id,
    )
    outputs = [router.emit(record, partition)]
    if lane is None:
        return outputs
    if deliverer(d.target.kind).hand_over is _TOPIC:
        event = triggered_event(d, record)
        outputs.append(router.emit(event, partition, to=router.target_topic(d)))
    else:
        order = ev.DispatchOrder(
            fire=record,
            target=d.target,
            lane=lane,
            attempt=1,
            not_before=record.due_at,
            retry=d.policies.retry,
            payload=d.payload,
            content_type=d.content_type,
            deadline=None if next_instant is None else utc_datetime(next_instant),
        )
        outputs.append(router.emit(order, partition))
    return outputs


def replaced_outputs(
    router: Router,
    d: ev.TriggerDefinition,
    partition: int,
    *,
    scheduled: int,
    lane: ev.Lane | None,
    now: float,
    jitter_ms: int,
    detail: str,
    tzdata: str | None = None,
) -> list[Emit]:
    """A scheduled fire replaced by a newer one: its ledger record with state ``replaced``
    (cause ``cancelled: replaced``) and, when its order was emitted on ``lane``, a cancel marker
    on that lane (same partition, so after the order): a dispatcher that has not started the
    fire drops it and concludes it ``cancelled``."""
    out = fire_outputs(
        router, d, partition, scheduled=scheduled, origin=ev.Origin.SCHEDULED, lane=None,
        now=now, jitter_ms=jitter_ms, cause=CAUSE_REPLACED, detail=detail, tzdata=tzdata,
    )  # fmt: skip
    record = out[0].event
    assert isinstance(record, ev.FireRecord)
    out.append(fire_event(router, d, partition, record, ev.ScheduleEventType.REPLACED))
    if lane is not None:
        marker = ev.DispatchOrder(
            fire=replace(record, lane=lane),
            target=d.target,
            lane=lane,
            attempt=1,
            not_before=record.decided_at,
            retry=d.policies.retry,
            cancel=CAUSE_REPLACED,
        )
        out.append(router.emit(marker, partition))
    return out


def fire_event(
    router: Router,
    d: ev.TriggerDefinition,
    partition: int,
    fire: ev.FireRecord,
    kind: ev.ScheduleEventType,
) -> Emit:
    """A tenant-facing event about one decided instant not handed over (an overlap skip, a
    replaced fire): its fire key, instant, cause and the fire's tzdata release."""
    event = ev.ScheduleEvent(
        event_id=event_id(kind.value, fire.fire_key),
        type=kind.value,
        tenant=d.tenant,
        trigger_id=d.trigger_id,
        emitted_at=fire.decided_at,
        trigger_version=d.version,
        fire_key=fire.fire_key,
        key_hash=fire.key_hash,
        origin=fire.origin,
        scheduled_at=fire.scheduled_at,
        due_at=fire.due_at,
        cause=fire.cause,
        tzdata_version=fire.tzdata_version,
    )
    return router.emit(event, partition)


def triggered_event(d: ev.TriggerDefinition, fire: ev.FireRecord) -> ev.ScheduleEvent:
    return ev.ScheduleEvent(
        event_id=event_id("triggered", fire.fire_key),
        type=ev.ScheduleEventType.TRIGGERED.value,
        tenant=d.tenant,
        trigger_id=d.trigger_id,
        emitted_at=fire.decided_at,
        trigger_version=d.version,
        fire_key=fire.fire_key,
        key_hash=fire.key_hash,
        origin=fire.origin,
        scheduled_at=fire.scheduled_at,
        due_at=fire.due_at,
        payload=d.payload,
        content_type=d.content_type,
        tzdata_version=fire.tzdata_version,
    )


def schedule_event(
    router: Router,
    d: ev.TriggerDefinition,
    partition: int,
    kind: ev.ScheduleEventType,
    now: float,
    cause: str | None = None,
    *id_parts: object,
    tzdata: str | None = None,
) -> Emit:
    """A tenant-facing event about the trigger itself (paused, resumed, rejected, ...);
    ``tzdata``: the release of the trigger's schedule."""
    event = ev.ScheduleEvent(
        event_id=event_id(kind.value, d.tenant, d.trigger_id, d.version, cause, *id_parts),
        type=kind.value,
        tenant=d.tenant,
        trigger_id=d.trigger_id,
        emitted_at=utc_datetime(now),
        trigger_version=d.version,
        cause=cause,
        tzdata_version=tzdata,
    )
    return router.emit(event, partition)
