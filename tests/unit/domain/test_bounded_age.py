"""Bounded age of a fire (``max_event_age_ms``, ``max_retry_duration_ms``): pure, property-tested
against the unbounded retry schedule it must be a prefix of."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from horae.domain import BackoffPolicy, ValidationError, next_retry, retry_schedule
from horae.domain.retry import (
    CAUSE_EVENT_AGE,
    CAUSE_EXPIRED,
    CAUSE_RETRY_DURATION,
    MAX_BOUND_MS,
    age_origin_ms,
    expiry,
)

policies = st.builds(
    BackoffPolicy,
    max_attempts=st.integers(1, 30),
    initial_ms=st.integers(1, 5_000),
    multiplier=st.floats(1.0, 4.0),
    max_backoff_ms=st.just(60_000),
    jitter_ratio=st.floats(0.0, 1.0),
)
bounds = st.integers(1_000, 10 * 60_000)
T0 = 1_780_000_000_000


@settings(max_examples=400, deadline=None)
@given(
    policy=policies,
    duration=bounds,
    key=st.text(min_size=1, max_size=8),
    first=st.integers(T0, T0 + 10**9),
)
def test_retries_stop_at_the_max_retry_duration(
    policy: BackoffPolicy, duration: int, key: str, first: int
) -> None:
    unbounded = retry_schedule(policy, key, first)
    bounded_policy = BackoffPolicy(**{**policy.to_dict(), "max_retry_duration_ms": duration})
    bounded = retry_schedule(bounded_policy, key, first)
    assert bounded == [t for t in unbounded if t <= first + duration][: len(bounded)]
    assert bounded == unbounded[: len(bounded)]
    assert all(t <= first + duration for t in bounded)
    if len(bounded) < len(unbounded):  # it stopped because of the bound, and says so
        at = bounded[-1] if bounded else first
        decision = next_retry(bounded_policy, key, len(bounded) + 1, at, first_attempt_ms=first)
        assert decision.at_ms is None and decision.cause == CAUSE_RETRY_DURATION
        assert unbounded[len(bounded)] > first + duration


@settings(max_examples=400, deadline=None)
@given(
    policy=policies,
    age=bounds,
    key=st.text(min_size=1, max_size=8),
    origin=st.integers(T0, T0 + 10**9),
    late=st.integers(0, 5_000),
)
def test_retries_stop_at_the_max_event_age(
    policy: BackoffPolicy, age: int, key: str, origin: int, late: int
) -> None:
    first = origin + late
    unbounded = retry_schedule(policy, key, first)
    aged = BackoffPolicy(**{**policy.to_dict(), "max_event_age_ms": age})
    bounded = retry_schedule(aged, key, first, origin_ms=origin)
    assert bounded == unbounded[: len(bounded)]
    assert all(t - origin <= age for t in bounded)
    assert all(expiry(aged, origin, t) is None for t in bounded)
    if len(bounded) < len(unbounded):
        assert unbounded[len(bounded)] - origin > age
        at = bounded[-1] if bounded else first
        decision = next_retry(aged, key, len(bounded) + 1, at, origin_ms=origin)
        assert decision.cause == CAUSE_EVENT_AGE


def test_expiry_is_strictly_older_than_the_bound() -> None:
    policy = BackoffPolicy(max_event_age_ms=60_000)
    assert expiry(policy, T0, T0 + 60_000) is None
    assert expiry(policy, T0, T0 + 60_001) == CAUSE_EXPIRED
    assert expiry(BackoffPolicy(), T0, T0 + 10**12) is None  # no bound


def test_age_counts_from_the_due_time_or_the_decision() -> None:
    assert age_origin_ms("scheduled", 1_000, 5_000) == 1_000
    assert age_origin_ms("manual", 1_000, 5_000) == 5_000
    assert age_origin_ms("backfill", 1_000, 5_000) == 5_000


def test_bounds_unset_change_nothing() -> None:
    policy = BackoffPolicy()
    assert retry_schedule(policy, "k", T0) == retry_schedule(policy, "k", T0, origin_ms=T0)
    assert "max_event_age_ms" not in policy.to_dict()


@pytest.mark.parametrize("name", ["max_event_age_ms", "max_retry_duration_ms"])
@pytest.mark.parametrize("value", [0, 999, MAX_BOUND_MS + 1, 1.5, True, "60"])
def test_out_of_range_bounds_are_refused_naming_the_field(name: str, value: object) -> None:
    with pytest.raises(ValidationError) as info:
        BackoffPolicy(**{name: value})  # type: ignore[arg-type]
    assert info.value.field == f"retry.{name}"


def test_round_trip() -> None:
    policy = BackoffPolicy(max_event_age_ms=60_000, max_retry_duration_ms=3_600_000)
    assert BackoffPolicy.from_dict(policy.to_dict()) == policy
    with pytest.raises(ValidationError) as info:
        BackoffPolicy.from_dict({"max_event_age_ms": 10})
    assert info.value.field.startswith("retry.max_event_age_ms")
