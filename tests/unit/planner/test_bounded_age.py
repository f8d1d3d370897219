"""Bounded age where the planner is the sender (an event target's ``schedule.triggered`` goes out
with the decision), and the definition's bounded-age fields refused when out of range or without
effect."""

from __future__ import annotations

from dataclasses import replace

import pytest

from horae.contracts import events as ev
from horae.contracts.ingress import validate_definition
from horae.contracts.routing import Router
from horae.domain.errors import ValidationError
from horae.streams.planner.records import fire_outputs
from tests.unit.planner.builders import definition

ROUTER = Router("unit.")
INSTANT = 1_780_000_000
EVENT = ev.Target(kind=ev.TargetKind.EVENT, topic="events.acme.jobs")


def _aged(age: int | None = 60, target: ev.Target = EVENT) -> ev.TriggerDefinition:
    return definition(
        "aged",
        policies=ev.Policies(retry=ev.RetryPolicy(max_event_age_s=age)),
        target=target,
    )


def _fire(
    d: ev.TriggerDefinition, now: float, origin: ev.Origin = ev.Origin.SCHEDULED, jitter: int = 0
) -> list[ev.Event]:
    outputs = fire_outputs(
        ROUTER, d, 0, scheduled=INSTANT, origin=origin, lane=ev.Lane.CATCH_UP, now=now,
        jitter_ms=jitter,
    )  # fmt: skip
    return [o.event for o in outputs]


def test_an_event_fire_older_than_its_max_age_is_expired_not_triggered() -> None:
    record, event = _fire(_aged(), INSTANT + 61)
    assert isinstance(record, ev.FireRecord) and isinstance(event, ev.ScheduleEvent)
    assert record.state is ev.FireState.EXPIRED and record.lane is None
    assert record.cause == "expired: max event age"
    assert record.cause_detail == "61.000 s old when handed over; max_event_age_s 60"
    assert event.type == ev.ScheduleEventType.EXPIRED.value and event.fire_key == record.fire_key


def test_a_fire_within_its_max_age_goes_as_before() -> None:
    fresh = _fire(_aged(), INSTANT + 60)
    assert fresh == _fire(_aged(None), INSTANT + 60)  # the bound changes nothing inside it
    record, event = fresh
    assert isinstance(record, ev.FireRecord) and record.state is ev.FireState.FIRED
    assert isinstance(event, ev.ScheduleEvent) and event.type == "schedule.triggered"
    # jitter: the age counts from the due time (instant + jitter)
    record, _ = _fire(_aged(), INSTANT + 61, jitter=2_000)
    assert isinstance(record, ev.FireRecord) and record.state is ev.FireState.FIRED


def test_manual_and_backfill_fires_count_from_their_decision() -> None:
    for origin in (ev.Origin.MANUAL, ev.Origin.BACKFILL):
        record, _ = _fire(_aged(), INSTANT + 7 * 86400, origin)
        assert isinstance(record, ev.FireRecord) and record.state is ev.FireState.FIRED


def test_a_dispatched_fire_is_left_to_the_dispatcher() -> None:
    hook = ev.Target(kind=ev.TargetKind.WEBHOOK, url="https://hooks.example/x")
    _record, order = _fire(_aged(target=hook), INSTANT + 3600)
    assert isinstance(order, ev.DispatchOrder) and order.retry.max_event_age_s == 60


@pytest.mark.parametrize(
    ("retry", "target", "field", "fragment"),
    [
        (ev.RetryPolicy(max_event_age_s=0), EVENT, "max_event_age_s", "out of range 1..604800"),
        (ev.RetryPolicy(max_event_age_s=604_801), EVENT, "max_event_age_s", "out of range"),
        (ev.RetryPolicy(max_retry_duration_s=-5), None, "max_retry_duration_s", "out of range"),
        (ev.RetryPolicy(max_retry_duration_s=60), EVENT, "max_retry_duration_s", "never retried"),
    ],
)
def test_bounds_out_of_range_or_without_effect_are_refused(
    retry: ev.RetryPolicy, target: ev.Target | None, field: str, fragment: str
) -> None:
    d = definition("bad", policies=ev.Policies(retry=retry), target=target)
    with pytest.raises(ValidationError) as info:
        validate_definition(d)
    assert info.value.field == f"policies.retry.{field}"
    assert fragment in info.value.message


def test_bounds_in_range_are_accepted() -> None:
    hook = definition(
        "ok", policies=ev.Policies(retry=ev.RetryPolicy(max_event_age_s=60, max_retry_duration_s=1))
    )
    validate_definition(hook)
    validate_definition(replace(_aged(604_800)))
