"""Retry schedule: exponential backoff with deterministic jitter, Retry-After, attempt budget.

Times here are **milliseconds** since the epoch (dispatch works below the second).

- attempt ``n`` (1 = the first attempt) failing -> base delay
  ``min(initial_ms * multiplier ** (n - 1), max_backoff_ms)``, reduced by up to ``jitter_ratio``
  of itself by a stable hash of ``(fire_key, n)`` (the same in every process);
- a ``Retry-After`` from the target is honoured: the retry is never earlier than it;
- no retry once ``max_attempts`` attempts were made (cause ``exhausted: attempt budget``) or when
  the retry would not start before the trigger's next instant (``exhausted: next instant``);
- bounded age (optional, both ``None`` by default): no retry would start later than
  ``max_retry_duration_ms`` after the first attempt started (``exhausted: max retry duration``,
  Cloud Scheduler's ``maxRetryDuration``), nor when the fire is older than ``max_event_age_ms``
  (``exhausted: max event age``, EventBridge's ``MaximumEventAgeInSeconds``); and a fire older
  than ``max_event_age_ms`` when it would be sent is not sent at all (:func:`expiry`, cause
  ``expired: max event age``). A fire's age counts from :func:`age_origin_ms`: a scheduled
  fire's due time (its instant plus jitter), a manual or backfill fire's decision (it is meant
  to go when it is asked for, whatever instant it stands for).

:func:`next_retry` decides after one failure; :func:`retry_schedule` lists the planned retries
when every attempt fails at once and no ``Retry-After`` comes (for dry-runs and docs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from horae.domain.errors import ValidationError
from horae.domain.jitter import stable_unit
from horae.domain.serialization import check_keys, get_bool, get_float, get_int

CAUSE_BUDGET = "exhausted: attempt budget"
CAUSE_NEXT_INSTANT = "exhausted: next instant"
CAUSE_RETRY_DURATION = "exhausted: max retry duration"
CAUSE_EVENT_AGE = "exhausted: max event age"
CAUSE_EXPIRED = "expired: max event age"
MAX_ATTEMPTS = 100
MAX_BACKOFF_MS = 7 * 86_400_000
#: bounds of ``max_event_age_ms`` and ``max_retry_duration_ms`` (1 s .. 7 days)
MIN_BOUND_MS = 1_000
MAX_BOUND_MS = 7 * 86_400_000
_RANGES: dict[str, tuple[float, float]] = {
    "max_attempts": (1, MAX_ATTEMPTS),
    "initial_ms": (1, MAX_BACKOFF_MS),
    "max_backoff_ms": (1, MAX_BACKOFF_MS),
    "multiplier": (1.0, 10.0),
    "jitter_ratio": (0.0, 1.0),
}


def _number_in(value: Any, low: float, high: float, integral: bool) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if integral and not isinstance(value, int):
        return False
    return bool(low <= value <= high)


@dataclass(frozen=True, slots=True)
class BackoffPolicy:
    max_attempts: int = 5
    initial_ms: int = 1_000
    multiplier: float = 2.0
    max_backoff_ms: int = 300_000
    jitter_ratio: float = 0.5
    honor_retry_after: bool = True
    max_event_age_ms: int | None = None  # None: no bound
    max_retry_duration_ms: int | None = None  # None: no bound

    def __post_init__(self) -> None:
        for name, (low, high) in _RANGES.items():
            value = getattr(self, name)
            if not _number_in(value, low, high, name not in ("multiplier", "jitter_ratio")):
                raise ValidationError(f"retry.{name}", value, f"out of range {low}..{high}")
        if self.max_backoff_ms < self.initial_ms:
            raise ValidationError(
                "retry.max_backoff_ms", self.max_backoff_ms, "must be at least initial_ms"
            )
        if not isinstance(self.honor_retry_after, bool):
            raise ValidationError(
                "retry.honor_retry_after", self.honor_retry_after, "expected bool"
            )
        for name in ("max_event_age_ms", "max_retry_duration_ms"):
            value = getattr(self, name)
            if value is not None and not _number_in(value, MIN_BOUND_MS, MAX_BOUND_MS, True):
                raise ValidationError(
                    f"retry.{name}", value, f"out of range {MIN_BOUND_MS}..{MAX_BOUND_MS}"
                )
        object.__setattr__(self, "multiplier", float(self.multiplier))
        object.__setattr__(self, "jitter_ratio", float(self.jitter_ratio))

    def to_dict(self) -> dict[str, Any]:
        return {
            "max_attempts": self.max_attempts,
            "initial_ms": self.initial_ms,
            "multiplier": self.multiplier,
            "max_backoff_ms": self.max_backoff_ms,
            "jitter_ratio": self.jitter_ratio,
            "honor_retry_after": self.honor_retry_after,
        } | {
            name: value
            for name in ("max_event_age_ms", "max_retry_duration_ms")
            if (value := getattr(self, name)) is not None
        }

    @classmethod
    def from_dict(cls, data: Any) -> BackoffPolicy:
        bounds = {"max_event_age_ms", "max_retry_duration_ms"}
        body = check_keys(data, set(_RANGES) | {"honor_retry_after"} | bounds, "retry")
        default = cls()
        optional = {
            name: get_int(body, name, 0, "retry", MIN_BOUND_MS, MAX_BOUND_MS)
            for name in bounds
            if body.get(name) is not None
        }
        return cls(
            max_attempts=get_int(body, "max_attempts", 5, "retry", 1, MAX_ATTEMPTS),
            initial_ms=get_int(body, "initial_ms", 1_000, "retry", 1, MAX_BACKOFF_MS),
            multiplier=get_float(body, "multiplier", default.multiplier, "retry", 1.0, 10.0),
            max_backoff_ms=get_int(body, "max_backoff_ms", 300_000, "retry", 1, MAX_BACKOFF_MS),
            jitter_ratio=get_float(body, "jitter_ratio", default.jitter_ratio, "retry", 0.0, 1.0),
            honor_retry_after=get_bool(body, "honor_retry_after", True, "retry"),
            **optional,
        )


@dataclass(frozen=True, slots=True)
class RetryDecision:
    """``at_ms`` of the next attempt, or ``None`` with the ``cause`` of giving up."""

    at_ms: int | None
    delay_ms: int = 0
    cause: str | None = None


def backoff_ms(policy: BackoffPolicy, fire_key: str, attempt: int) -> int:
    """Delay after failed attempt ``attempt`` (1-based), jitter included."""
    base = min(policy.initial_ms * policy.multiplier ** (attempt - 1), policy.max_backoff_ms)
    fraction = stable_unit(fire_key, attempt) / 2**64
    return max(1, int(base * (1.0 - policy.jitter_ratio * fraction)))


def age_origin_ms(origin: str, due_ms: int, decided_ms: int) -> int:
    """Where a fire's age counts from: a ``scheduled`` fire's due time, a ``manual`` or
    ``backfill`` fire's decision (``origin`` is the fire's origin value)."""
    return due_ms if origin == "scheduled" else decided_ms


def expiry(policy: BackoffPolicy, origin_ms: int, now_ms: int) -> str | None:
    """:data:`CAUSE_EXPIRED` when a fire whose age counts from ``origin_ms`` is older than the
    policy's ``max_event_age_ms`` at ``now_ms`` (it must not be sent), else ``None``."""
    bound = policy.max_event_age_ms
    return CAUSE_EXPIRED if bound is not None and now_ms - origin_ms > bound else None


def next_retry(
    policy: BackoffPolicy,
    fire_key: str,
    attempt: int,
    failed_at_ms: int,
    retry_after_ms: int | None = None,
    next_instant_ms: int | None = None,
    first_attempt_ms: int | None = None,
    origin_ms: int | None = None,
) -> RetryDecision:
    """After attempt ``attempt`` (1-based) failed at ``failed_at_ms``: when to try again.
    ``first_attempt_ms`` (when the first attempt started) bounds the retries by
    ``max_retry_duration_ms``, ``origin_ms`` (:func:`age_origin_ms`) by ``max_event_age_ms``;
    either unknown (``None``) leaves its bound unapplied."""
    if isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 1:
        raise ValidationError("attempt", attempt, "must be an integer >= 1")
    if attempt >= policy.max_attempts:
        return RetryDecision(None, 0, CAUSE_BUDGET)
    delay = backoff_ms(policy, fire_key, attempt)
    if retry_after_ms is not None and policy.honor_retry_after:
        delay = max(delay, retry_after_ms)
    at = failed_at_ms + delay
    if next_instant_ms is not None and at >= next_instant_ms:
        return RetryDecision(None, delay, CAUSE_NEXT_INSTANT)
    duration = policy.max_retry_duration_ms
    if duration is not None and first_attempt_ms is not None and at > first_attempt_ms + duration:
        return RetryDecision(None, delay, CAUSE_RETRY_DURATION)
    if origin_ms is not None and expiry(policy, origin_ms, at) is not None:
        return RetryDecision(None, delay, CAUSE_EVENT_AGE)
    return RetryDecision(at, delay, None)


def retry_schedule(
    policy: BackoffPolicy,
    fire_key: str,
    first_attempt_ms: int,
    next_instant_ms: int | None = None,
    origin_ms: int | None = None,
) -> list[int]:
    """Start times of the retries if every attempt fails immediately, without Retry-After."""
    out = []
    at = first_attempt_ms
    for attempt in range(1, policy.max_attempts):
        decision = next_retry(
            policy, fire_key, attempt, at, None, next_instant_ms, first_attempt_ms, origin_ms
        )
        if decision.at_ms is None:
            break
        at = decision.at_ms
        out.append(at)
    return out
