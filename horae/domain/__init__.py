"""Horae's time core: pure decision logic shared by the planner, the API's dry-run and the CLI.

No clock and no I/O: ``now`` is always an argument; instants are ``int`` epoch seconds (UTC);
retry times are milliseconds. (The only file access is identifying the tzdata release, in
:mod:`horae.domain.tzdb`.)

Definitions
    :class:`TriggerSpec` (recurrence + zone + :class:`DstPolicy` + :class:`MisfirePolicy` +
    horizon + :class:`OverlapPolicy` + :class:`JitterPolicy` + :class:`BackoffPolicy`), with
    ``to_dict``/``from_dict``; :func:`parse_expression` (``cron``, ``@every 5m``, ``@at ...``);
    :func:`validate_trigger` ``(spec, now, limits)``; errors are :class:`ValidationError`
    ``(field, value, message)``.

Instants
    ``schedule = spec.schedule()`` or :func:`compile_schedule` ``(recurrence, zone, dst)``
    (shared per expression/zone/DST); ``schedule.next_after(t) -> int | None`` (the hot path);
    :func:`next_instants`, :func:`instants_between`, :func:`what_if`, :func:`occurrences`,
    :func:`dst_adjustments`; ``schedule.tzdata`` / :func:`tzdata_version`.

Decisions
    :func:`evaluate_misfire` ``(schedule, last_decided, now, policy, horizon_s, paused)``;
    :func:`decide_overlap` ``(policy, in_flight)``; :func:`jitter_offset`
    ``(trigger_key, instant, jitter_ms, next_instant)``; :func:`next_retry` /
    :func:`retry_schedule`; :class:`FireKey` ``(tenant, trigger, scheduled, sequence, origin)``
    with ``canonical()`` and ``short_hash()``.
"""

from horae.domain.cron import CronExpr, parse_cron
from horae.domain.dst import DstPolicy, GapPolicy, RepeatPolicy
from horae.domain.errors import ValidationError
from horae.domain.jitter import JitterPolicy, jitter_offset
from horae.domain.keys import FireKey, Origin
from horae.domain.misfire import (
    CAUSE_EXPIRED,
    CAUSE_PAUSED,
    CAUSE_SKIPPED,
    Fire,
    MisfireKind,
    MisfireOutcome,
    MisfirePolicy,
    NotFired,
    Omitted,
    evaluate_misfire,
)
from horae.domain.overlap import (
    InFlight,
    OverlapAction,
    OverlapDecision,
    OverlapPolicy,
    decide_overlap,
)
from horae.domain.queries import (
    DstAdjustment,
    InstantPage,
    Occurrence,
    WhatIf,
    dst_adjustments,
    first_within,
    instants_between,
    next_instants,
    occurrences,
    what_if,
)
from horae.domain.recurrence import (
    AtSpec,
    CronSpec,
    EverySpec,
    RecurrenceSpec,
    parse_expression,
    recurrence_from_dict,
)
from horae.domain.retry import BackoffPolicy, RetryDecision, next_retry, retry_schedule
from horae.domain.schedule import (
    AtSchedule,
    CronSchedule,
    EverySchedule,
    Schedule,
    compile_schedule,
)
from horae.domain.timefmt import format_local, format_utc, from_epoch, parse_instant, to_epoch
from horae.domain.trigger import Limits, TriggerSpec, validate_trigger
from horae.domain.tzdb import load_zone, tzdata_version

__all__ = [
    "CAUSE_EXPIRED",
    "CAUSE_PAUSED",
    "CAUSE_SKIPPED",
    "AtSchedule",
    "AtSpec",
    "BackoffPolicy",
    "CronExpr",
    "CronSchedule",
    "CronSpec",
    "DstAdjustment",
    "DstPolicy",
    "EverySchedule",
    "EverySpec",
    "Fire",
    "FireKey",
    "GapPolicy",
    "InFlight",
    "InstantPage",
    "JitterPolicy",
    "Limits",
    "MisfireKind",
    "MisfireOutcome",
    "MisfirePolicy",
    "NotFired",
    "Occurrence",
    "Omitted",
    "Origin",
    "OverlapAction",
    "OverlapDecision",
    "OverlapPolicy",
    "RecurrenceSpec",
    "RepeatPolicy",
    "RetryDecision",
    "Schedule",
    "TriggerSpec",
    "ValidationError",
    "WhatIf",
    "compile_schedule",
    "decide_overlap",
    "dst_adjustments",
    "evaluate_misfire",
    "first_within",
    "format_local",
    "format_utc",
    "from_epoch",
    "instants_between",
    "jitter_offset",
    "load_zone",
    "next_instants",
    "next_retry",
    "occurrences",
    "parse_cron",
    "parse_expression",
    "parse_instant",
    "recurrence_from_dict",
    "retry_schedule",
    "to_epoch",
    "tzdata_version",
    "validate_trigger",
    "what_if",
]
