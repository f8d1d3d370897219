"""Round trip of every spec and policy through its serialised form, and validation of bad input."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from horae.domain import (
    AtSpec,
    BackoffPolicy,
    CronSpec,
    DstPolicy,
    EverySpec,
    FireKey,
    GapPolicy,
    JitterPolicy,
    MisfireKind,
    MisfirePolicy,
    Origin,
    OverlapPolicy,
    RepeatPolicy,
    TriggerSpec,
    ValidationError,
    parse_expression,
    recurrence_from_dict,
)

from .oracle import ZONES


def cases(n: int) -> settings:
    return settings(max_examples=n, deadline=None, suppress_health_check=[HealthCheck.too_slow])


INSTANTS = st.integers(0, 4_102_444_800)  # 1970 .. 2100
crons = st.sampled_from(
    ["0 9 * * MON-FRI", "*/15 * * * *", "30 2 * * *", "@daily", "0 0 1,15 * 1", "5 4 3 2 *"]
).map(CronSpec)
everys = st.builds(EverySpec, st.integers(1, 10 * 86400), INSTANTS)
ats = st.lists(INSTANTS, min_size=1, max_size=20).map(lambda v: AtSpec(tuple(v)))
recurrences = st.one_of(crons, everys, ats)
dsts = st.builds(DstPolicy, st.sampled_from(list(GapPolicy)), st.sampled_from(list(RepeatPolicy)))
misfires = st.builds(
    MisfirePolicy,
    st.sampled_from(list(MisfireKind)),
    st.integers(1, 10_000),
    st.integers(0, 86400),
)
jitters = st.builds(JitterPolicy, st.integers(0, 86_400_000))
retries = st.builds(
    BackoffPolicy,
    max_attempts=st.integers(1, 100),
    initial_ms=st.integers(1, 60_000),
    multiplier=st.floats(1.0, 10.0, allow_nan=False),
    max_backoff_ms=st.integers(60_000, 7 * 86_400_000),
    jitter_ratio=st.floats(0.0, 1.0, allow_nan=False),
    honor_retry_after=st.booleans(),
)
triggers = st.builds(
    TriggerSpec,
    recurrence=recurrences,
    zone=st.sampled_from(ZONES),
    dst=dsts,
    misfire=misfires,
    horizon_s=st.integers(0, 366 * 86400),
    overlap=st.sampled_from(list(OverlapPolicy)),
    jitter=jitters,
    retry=retries,
)
ids = st.text(min_size=1, max_size=40).filter(lambda s: "\x00" not in s)
fire_keys = st.builds(
    FireKey, ids, ids, INSTANTS, st.integers(0, 2**31 - 1), st.sampled_from(list(Origin))
)


def _through_json(data: dict[str, Any]) -> Any:
    return json.loads(json.dumps(data))


@cases(1200)
@given(spec=triggers)
def test_trigger_spec_round_trips(spec: TriggerSpec) -> None:
    data = _through_json(spec.to_dict())
    assert TriggerSpec.from_dict(data) == spec
    assert TriggerSpec.from_dict(data).to_dict() == spec.to_dict()


@cases(400)
@given(recurrence=recurrences)
def test_recurrences_round_trip_through_dict_and_text(
    recurrence: CronSpec | EverySpec | AtSpec,
) -> None:
    assert recurrence_from_dict(_through_json(recurrence.to_dict())) == recurrence
    reparsed = parse_expression(recurrence.text())
    assert type(reparsed) is type(recurrence)
    if not isinstance(recurrence, CronSpec):
        assert reparsed == recurrence


@cases(300)
@given(policy=st.one_of(dsts, misfires, jitters, retries))
def test_each_policy_round_trips(
    policy: DstPolicy | MisfirePolicy | JitterPolicy | BackoffPolicy,
) -> None:
    assert type(policy).from_dict(_through_json(policy.to_dict())) == policy


@cases(500)
@given(key=fire_keys)
def test_fire_key_round_trips_dict_and_canonical(key: FireKey) -> None:
    assert FireKey.from_dict(_through_json(key.to_dict())) == key
    assert FireKey.parse(key.canonical()) == key


def test_defaults_from_minimal_dict() -> None:
    spec = TriggerSpec.from_dict({"recurrence": {"kind": "cron", "expr": "0 9 * * *"}})
    assert spec == TriggerSpec(CronSpec("0 9 * * *"))
    assert spec.zone == "UTC"
    assert spec.dst == DstPolicy(GapPolicy.SHIFT, RepeatPolicy.FIRST)
    assert spec.misfire.kind is MisfireKind.FIRE_ONCE
    assert spec.overlap is OverlapPolicy.ALLOW


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({}, "recurrence"),
        ({"recurrence": {"kind": "weekly"}}, "recurrence.kind"),
        ({"recurrence": {"kind": "cron", "expr": "61 * * * *"}}, "recurrence.expr.minute"),
        ({"recurrence": {"kind": "every", "interval_s": 0}}, "recurrence.interval_s"),
        ({"recurrence": {"kind": "every", "interval_s": "5m"}}, "recurrence.interval_s"),
        ({"recurrence": {"kind": "at", "instants": []}}, "recurrence.instants"),
        ({"recurrence": {"kind": "at", "instants": ["2026-03-08T07:00"]}}, "recurrence.instants"),
        ({"recurrence": {"kind": "cron", "expr": "@daily", "x": 1}}, "recurrence.x"),
        ({"recurrence": {"kind": "cron", "expr": "@daily"}, "zone": "Mars/Base"}, "zone"),
        ({"recurrence": {"kind": "cron", "expr": "@daily"}, "dst": {"gap": "jump"}}, "dst.gap"),
        ({"recurrence": {"kind": "cron", "expr": "@daily"}, "misfire": {"policy": "all"}},
         "misfire.policy"),
        ({"recurrence": {"kind": "cron", "expr": "@daily"}, "misfire": {"max_fires": 0}},
         "misfire.max_fires"),
        ({"recurrence": {"kind": "cron", "expr": "@daily"}, "horizon_s": -1}, "horizon_s"),
        ({"recurrence": {"kind": "cron", "expr": "@daily"}, "overlap": "queue"}, "overlap"),
        ({"recurrence": {"kind": "cron", "expr": "@daily"}, "jitter": {"max_ms": -5}},
         "jitter.max_ms"),
        ({"recurrence": {"kind": "cron", "expr": "@daily"}, "retry": {"max_attempts": 0}},
         "retry.max_attempts"),
        ({"recurrence": {"kind": "cron", "expr": "@daily"}, "retry": {"multiplier": 0.5}},
         "retry.multiplier"),
        ({"recurrence": {"kind": "cron", "expr": "@daily"}, "colour": "red"}, "colour"),
    ],
)  # fmt: skip
def test_invalid_dicts_name_the_field(data: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        TriggerSpec.from_dict(data)
    assert info.value.field == field, str(info.value)
