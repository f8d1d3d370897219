"""``validate_trigger`` checks the schedule its caller compiled when given one (the planner's, from
its zone source), and the remembered minimum spacing is the one computed."""

from __future__ import annotations

import pytest

from horae.domain import CronSpec, TriggerSpec, ValidationError, validate_trigger
from horae.domain.recurrence import AtSpec
from horae.domain.timefmt import parse_instant
from horae.domain.trigger import min_spacing_s

T0 = parse_instant("2026-03-01T00:00:00Z")


def test_the_schedule_given_is_the_one_checked() -> None:
    spec = TriggerSpec(CronSpec("0 0 * * *"))
    validate_trigger(spec, T0)
    past = TriggerSpec(AtSpec((T0 - 60,))).schedule()  # nothing left after T0
    with pytest.raises(ValidationError, match="no instant in the next 5 years"):
        validate_trigger(spec, T0, schedule=past)


@pytest.mark.parametrize("expr", ["*/5 * * * *", "0 9,17 * * 1-5", "* * * * * *", "@daily"])
def test_the_remembered_spacing_is_the_computed_one(expr: str) -> None:
    spec = CronSpec(expr)
    computed = min_spacing_s.__wrapped__(spec)
    assert min_spacing_s(spec) == computed and min_spacing_s(CronSpec(expr)) == computed
