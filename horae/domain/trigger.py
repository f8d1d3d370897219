"""The trigger specification: recurrence, zone and every policy, validated and serialisable.

:class:`TriggerSpec` bundles what the planner needs to decide a trigger's instants:

================  =============================================  ==========================
field             type                                           default
================  =============================================  ==========================
``recurrence``    :class:`CronSpec` | :class:`EverySpec` | ``At``  (required)
``zone``          IANA zone name                                 ``"UTC"``
``dst``           :class:`DstPolicy` (gap shift|skip, repeat)    ``shift`` / ``first``
``misfire``       :class:`MisfirePolicy`                         ``fire_once``, grace 60 s
``horizon_s``     catch-up horizon, seconds                      86400
``overlap``       :class:`OverlapPolicy`                         ``allow``
``jitter``        :class:`JitterPolicy`                          0 ms
``retry``         :class:`BackoffPolicy`                           5 attempts, 1 s x2 .. 5 min
``start``         epoch seconds: no instant before it            ``None``
``end``           epoch seconds: no instant after it             ``None``
================  =============================================  ==========================

Construction checks structure (types, ranges, known zone). :func:`validate_trigger` ``(spec, now,
limits)`` adds the checks that depend on configuration or on ``now``: minimum interval (default
60 s, cron included), horizon ceiling, an ``end`` not in the past, and at least one instant (within
``start``/``end``) in the next 5 years.
``TriggerSpec.from_dict(spec.to_dict()) == spec`` for every spec; :meth:`TriggerSpec.schedule`
returns the shared compiled schedule.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from horae.domain.dst import DstPolicy, enum_value
from horae.domain.errors import ValidationError
from horae.domain.jitter import JitterPolicy
from horae.domain.misfire import MAX_HORIZON_S, MisfirePolicy
from horae.domain.overlap import OverlapPolicy
from horae.domain.queries import first_within
from horae.domain.recurrence import (
    AtSpec,
    CronSpec,
    EverySpec,
    RecurrenceSpec,
    format_duration,
    recurrence_from_dict,
)
from horae.domain.retry import BackoffPolicy
from horae.domain.schedule import (
    AtSchedule,
    BoundedSchedule,
    CronSchedule,
    EverySchedule,
    Schedule,
    compile_schedule,
)
from horae.domain.serialization import check_keys, get_int, get_str
from horae.domain.timefmt import MAX_EPOCH, MIN_EPOCH, format_utc, parse_instant
from horae.domain.tzdb import load_zone

_KEYS = {
    "recurrence", "zone", "dst", "misfire", "horizon_s", "overlap", "jitter", "retry", "start",
    "end",
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Limits:
    """Platform limits applied by :func:`validate_trigger` (configuration, not tenant input)."""

    min_interval_s: int = 60
    max_horizon_s: int = 7 * 86400
    max_fires: int = 1000
    satisfiable_years: int = 5


@dataclass(frozen=True, slots=True)
class TriggerSpec:
    recurrence: RecurrenceSpec
    zone: str = "UTC"
    dst: DstPolicy = field(default_factory=DstPolicy)
    misfire: MisfirePolicy = field(default_factory=MisfirePolicy)
    horizon_s: int = 86400
    overlap: OverlapPolicy = OverlapPolicy.ALLOW
    jitter: JitterPolicy = field(default_factory=JitterPolicy)
    retry: BackoffPolicy = field(default_factory=BackoffPolicy)
    start: int | None = None  # no instant before it (epoch seconds)
    end: int | None = None  # no instant after it (epoch seconds)

    def __post_init__(self) -> None:
        if not isinstance(self.recurrence, CronSpec | EverySpec | AtSpec):
            raise ValidationError("recurrence", self.recurrence, "expected cron, every or at")
        load_zone(self.zone)
        horizon = self.horizon_s
        if isinstance(horizon, bool) or not isinstance(horizon, int):
            raise ValidationError("horizon_s", horizon, "expected an integer")
        if not 0 <= horizon <= MAX_HORIZON_S:
            raise ValidationError("horizon_s", horizon, f"out of range 0..{MAX_HORIZON_S}")
        object.__setattr__(self, "overlap", enum_value(OverlapPolicy, self.overlap, "overlap"))
        for name in ("start", "end"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool)
                or not isinstance(value, int)
                or not MIN_EPOCH <= value <= MAX_EPOCH
            ):
                raise ValidationError(name, value, "expected an instant (epoch seconds)")
        if self.start is not None and self.end is not None and self.end < self.start:
            raise ValidationError("end", format_utc(self.end), "before start")

    def schedule(self) -> CronSchedule | EverySchedule | AtSchedule | BoundedSchedule:
        """The compiled schedule of this trigger (the recurrence's is shared), within
        ``start``/``end`` when either is set."""
        inner = compile_schedule(self.recurrence, self.zone, self.dst)
        if self.start is None and self.end is None:
            return inner
        return BoundedSchedule(inner, self.start, self.end)

    def to_dict(self) -> dict[str, Any]:
        return {
            "recurrence": self.recurrence.to_dict(),
            "zone": self.zone,
            "dst": self.dst.to_dict(),
            "misfire": self.misfire.to_dict(),
            "horizon_s": self.horizon_s,
            "overlap": self.overlap.value,
            "jitter": self.jitter.to_dict(),
            "retry": self.retry.to_dict(),
        } | {
            name: format_utc(value)
            for name in ("start", "end")
            if (value := getattr(self, name)) is not None
        }

    @classmethod
    def from_dict(cls, data: Any) -> TriggerSpec:
        body = check_keys(data, _KEYS, "")
        if "recurrence" not in body:
            raise ValidationError("recurrence", None, "required")
        return cls(
            recurrence=recurrence_from_dict(body["recurrence"]),
            zone=get_str(body, "zone", "UTC", ""),
            dst=DstPolicy.from_dict(body.get("dst", {})),
            misfire=MisfirePolicy.from_dict(body.get("misfire", {})),
            horizon_s=get_int(body, "horizon_s", 86400, "", 0, MAX_HORIZON_S),
            overlap=enum_value(OverlapPolicy, body.get("overlap", "allow"), "overlap"),
            jitter=JitterPolicy.from_dict(body.get("jitter", {})),
            retry=BackoffPolicy.from_dict(body.get("retry", {})),
            start=_instant_or_none(body, "start"),
            end=_instant_or_none(body, "end"),
        )


def _instant_or_none(body: Mapping[str, Any], name: str) -> int | None:
    value = body.get(name)
    return None if value is None else parse_instant(value, name, whole_seconds=True)


@functools.lru_cache(maxsize=4096)
def min_spacing_s(recurrence: RecurrenceSpec) -> int | None:
    """The smallest wall-clock distance between two instants (``None`` for a single ``at``).
    A pure function of a frozen value, remembered for the last 4,096 (a cron expression's
    times of day are up to 86,400 gaps to compare; the definitions ingested share few)."""
    if isinstance(recurrence, EverySpec):
        return recurrence.interval_s
    if isinstance(recurrence, AtSpec):
        values = recurrence.instants
        return min((b - a for a, b in itertools.pairwise(values)), default=None)
    tods = recurrence.parsed.times_of_day()
    gaps = [b - a for a, b in itertools.pairwise(tods)]
    return min([*gaps, tods[0] + 86400 - tods[-1]])


def validate_trigger(
    spec: TriggerSpec, now: int, limits: Limits = Limits(), schedule: Schedule | None = None
) -> None:
    """Checks needing configuration or ``now``; raises :class:`ValidationError`. ``schedule``:
    the spec's compiled schedule when the caller holds it (default: compiled here)."""
    spacing = min_spacing_s(spec.recurrence)
    if (
        spacing is not None
        and spacing < limits.min_interval_s
        and not isinstance(spec.recurrence, AtSpec)
    ):
        raise ValidationError(
            "recurrence",
            spec.recurrence.text(),
            f"fires every {format_duration(spacing)}; the minimum interval is "
            f"{format_duration(limits.min_interval_s)}",
        )
    if spec.horizon_s > limits.max_horizon_s:
        raise ValidationError("horizon_s", spec.horizon_s, f"at most {limits.max_horizon_s}")
    if spec.misfire.max_fires > limits.max_fires:
        raise ValidationError(
            "misfire.max_fires", spec.misfire.max_fires, f"at most {limits.max_fires}"
        )
    if spec.end is not None and spec.end < now:
        raise ValidationError(
            "end", format_utc(spec.end), "in the past: the trigger would never fire"
        )
    compiled = spec.schedule() if schedule is None else schedule
    if first_within(compiled, now, limits.satisfiable_years) is None:
        raise ValidationError(
            "recurrence",
            spec.recurrence.text(),
            f"no instant in the next {limits.satisfiable_years} years",
        )
