"""``start``/``end`` bound a trigger's schedule: nothing before start, nothing after end."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from horae.domain import CronSpec, EverySpec, TriggerSpec, ValidationError, validate_trigger
from horae.domain.queries import next_instants
from horae.domain.timefmt import parse_instant

T0 = parse_instant("2026-03-01T00:00:00Z")


@settings(max_examples=300, deadline=None)
@given(
    interval=st.integers(60, 7200),
    start=st.one_of(st.none(), st.integers(T0, T0 + 86400)),
    length=st.one_of(st.none(), st.integers(0, 86400)),
    after=st.integers(T0 - 86400, T0 + 2 * 86400),
)
def test_bounded_instants_are_the_unbounded_ones_within_start_and_end(
    interval: int, start: int | None, length: int | None, after: int
) -> None:
    end = None if length is None else (start or T0) + length
    bounded = TriggerSpec(EverySpec(interval, T0), start=start, end=end)
    plain = TriggerSpec(EverySpec(interval, T0)).schedule()
    got = next_instants(bounded.schedule(), after, 20)
    low = max(after, (start or after) - 1)
    want = [t for t in next_instants(plain, low, 20 + 86400 // 60) if end is None or t <= end][:20]
    assert got == want
    assert TriggerSpec.from_dict(bounded.to_dict()) == bounded


def test_end_before_start_or_in_the_past_is_refused() -> None:
    with pytest.raises(ValidationError, match="before start"):
        TriggerSpec(CronSpec("* * * * *"), start=T0, end=T0 - 1)
    with pytest.raises(ValidationError, match="in the past"):
        validate_trigger(TriggerSpec(CronSpec("* * * * *"), end=T0 - 60), T0)
    validate_trigger(TriggerSpec(CronSpec("* * * * *"), end=T0 + 60), T0)
