"""Conversions between the event contracts and the pure time core (:mod:`horae.domain`).

The contracts carry instants as aware datetimes; the domain carries epoch seconds. Conversions
validate: a :class:`horae.domain.errors.ValidationError` names the offending field.
"""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import UTC, datetime

from horae.contracts import events as ev
from horae.contracts.memo import INGEST_MEMO, PairMemo
from horae.domain.dst import DstPolicy, GapPolicy, RepeatPolicy
from horae.domain.errors import ValidationError
from horae.domain.jitter import JitterPolicy
from horae.domain.misfire import MisfireKind, MisfirePolicy
from horae.domain.overlap import OverlapPolicy
from horae.domain.recurrence import AtSpec, CronSpec, EverySpec, RecurrenceSpec
from horae.domain.retry import BackoffPolicy
from horae.domain.trigger import TriggerSpec
from horae.domain.tzdb import load_zone


def _epoch(value: datetime, field: str) -> int:
    if value.microsecond:
        raise ValidationError(field, value.isoformat(), "instants are whole seconds")
    return int(value.timestamp())


def _instant(epoch: int) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


def recurrence_to_domain(r: ev.Recurrence) -> RecurrenceSpec:
    """The domain recurrence spec of a contract recurrence (zone and DST choices aside)."""
    try:
        if r.kind is ev.RecurrenceKind.CRON:
            if r.expr is None:
                raise ValidationError("expr", None, "required for a cron recurrence")
            return CronSpec(r.expr)
        if r.kind is ev.RecurrenceKind.EVERY:
            if r.interval_s is None:
                raise ValidationError("interval_s", None, "required for an every recurrence")
            anchor = 0 if r.anchor is None else _epoch(r.anchor, "anchor")
            return EverySpec(r.interval_s, anchor)
        instants = tuple(sorted({_epoch(i, "instants") for i in r.instants}))
        return AtSpec(instants)
    except ValidationError as exc:
        raise exc.prefixed("recurrence") from None


def recurrence_from_domain(
    spec: RecurrenceSpec, zone: str = "UTC", **choices: object
) -> ev.Recurrence:
    """The contract recurrence of a domain spec (``choices``: dst_gap, dst_repeat, start, end)."""
    if isinstance(spec, CronSpec):
        base = ev.Recurrence(kind=ev.RecurrenceKind.CRON, expr=spec.expr, zone=zone)
    elif isinstance(spec, EverySpec):
        anchor = None if spec.anchor == 0 else _instant(spec.anchor)
        base = ev.Recurrence(
            kind=ev.RecurrenceKind.EVERY, interval_s=spec.interval_s, anchor=anchor, zone=zone
        )
    else:
        instants = tuple(_instant(i) for i in spec.instants)
        base = ev.Recurrence(kind=ev.RecurrenceKind.AT, instants=instants, zone=zone)
    return replace(base, **choices)  # type: ignore[arg-type]


def check_zone(zone: str) -> None:
    """:class:`ValidationError` ``recurrence.zone`` unless ``zone`` is a known IANA zone."""
    load_zone(zone, "recurrence.zone")


def retry_to_domain(r: ev.RetryPolicy) -> BackoffPolicy:
    """The domain retry policy (seconds become milliseconds)."""
    return BackoffPolicy(
        max_attempts=r.max_attempts,
        initial_ms=round(r.base_s * 1000),
        multiplier=r.multiplier,
        max_backoff_ms=round(r.max_s * 1000),
        jitter_ratio=r.jitter_ratio,
        honor_retry_after=r.honour_retry_after,
        max_event_age_ms=None if r.max_event_age_s is None else r.max_event_age_s * 1000,
        max_retry_duration_ms=(
            None if r.max_retry_duration_s is None else r.max_retry_duration_s * 1000
        ),
    )


#: the specs of the (recurrence, policies) pairs that passed ingress validation recently
#: (:func:`horae.contracts.ingress.domain_checked` fills it while the ingest memo is on)
CHECKED_SPECS: PairMemo[ev.Recurrence, ev.Policies, TriggerSpec] = PairMemo()


def trigger_spec(d: ev.TriggerDefinition) -> TriggerSpec:
    """The domain :class:`TriggerSpec` of a definition; :class:`ValidationError` names the field
    (paths of the domain, e.g. ``misfire.max_fires``). While the ingest memo
    (:mod:`horae.contracts.memo`) is on, the spec validation compiled for the same pair is
    returned (an equal value) instead of compiling it again."""
    if INGEST_MEMO.enabled:
        found = CHECKED_SPECS.get(d.recurrence, d.policies)
        if found is not None:
            return found
    return spec_of(d.recurrence, d.policies)


def spec_of(r: ev.Recurrence, p: ev.Policies) -> TriggerSpec:
    """:func:`trigger_spec` from the only two parts of a definition it reads."""
    return TriggerSpec(
        recurrence=recurrence_to_domain(r),
        zone=r.zone,
        dst=DstPolicy(GapPolicy(r.dst_gap.value), RepeatPolicy(r.dst_repeat.value)),
        misfire=MisfirePolicy(MisfireKind(p.misfire.value), p.max_catchup, p.misfire_grace_s),
        horizon_s=p.horizon_s,
        overlap=OverlapPolicy(p.overlap.value),
        jitter=JitterPolicy(p.jitter_s * 1000),
        retry=retry_to_domain(p.retry),
        start=None if r.start is None else math.ceil(r.start.timestamp()),
        end=None if r.end is None else math.floor(r.end.timestamp()),
    )
