"""evaluate_misfire's shortcut for the common tick (at most one on-time instant) gives exactly the
result of the general path (forced here by a paused interval that lies outside the window)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from horae.domain.misfire import MisfireKind, MisfirePolicy, evaluate_misfire
from horae.domain.recurrence import CronSpec, EverySpec
from horae.domain.schedule import compile_schedule

START = 1_767_225_600  # 2026-01-01T00:00:00Z
EXPRS = ["* * * * *", "*/5 * * * *", "0 * * * *", "30 2 * * *", "*/10 * * * * *"]


@settings(max_examples=400, deadline=None)
@given(
    kind=st.sampled_from(["cron", "every"]),
    expr=st.sampled_from(EXPRS),
    every=st.integers(1, 7200),
    zone=st.sampled_from(["UTC", "Europe/Dublin", "Australia/Lord_Howe"]),
    last=st.integers(START, START + 400 * 86400),
    span=st.integers(1, 4 * 3600),
    policy=st.sampled_from(list(MisfireKind)),
    grace=st.integers(0, 600),
    horizon=st.integers(0, 7200),
)
def test_fast_path_equals_general_path(
    kind: str,
    expr: str,
    every: int,
    zone: str,
    last: int,
    span: int,
    policy: MisfireKind,
    grace: int,
    horizon: int,
) -> None:
    spec = CronSpec(expr) if kind == "cron" else EverySpec(every, START)
    schedule = compile_schedule(spec, zone)
    p = MisfirePolicy(policy, 3, grace)
    fast = evaluate_misfire(schedule, last, last + span, p, horizon)
    general = evaluate_misfire(schedule, last, last + span, p, horizon, paused=((0, 1),))
    assert fast == general
