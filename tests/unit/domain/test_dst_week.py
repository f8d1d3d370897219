"""Replay a whole DST week on a virtual clock, for every DST policy choice, as the planner would.

The "planner" here is a loop around the domain's own functions: sleep (virtually) until the next
instant, wake a little late, and decide with :func:`evaluate_misfire`. The fires it decides must be
exactly the oracle's instants, each once, on time; a simulated outage across the transition must
be accounted for instant by instant.
"""

from __future__ import annotations

import pytest

from horae.domain import (
    CAUSE_SKIPPED,
    CronSpec,
    DstPolicy,
    GapPolicy,
    MisfireKind,
    MisfirePolicy,
    RepeatPolicy,
    compile_schedule,
    dst_adjustments,
    evaluate_misfire,
    jitter_offset,
)
from horae.domain.schedule import CronSchedule

from .oracle import oracle_instants, transitions

ZONES = ["America/New_York", "Europe/Dublin", "Australia/Lord_Howe", "Antarctica/Troll",
         "America/Havana", "America/Santiago"]  # fmt: skip
EXPRS = ["30 2 * * *", "0 1 * * *", "*/30 * * * *", "15 0-3 * * *", "45 23,0 * * *"]
POLICIES = [DstPolicy(g, r) for g in GapPolicy for r in RepeatPolicy]
WEEK = 7 * 86400


def _weeks(zone: str) -> list[int]:
    """The start of a week around the first spring and the first autumn transition of 2026."""
    marks = [t for t in transitions(zone) if 1970 + t // (365.2425 * 86400) == 2026]
    return [t - WEEK // 2 for t in marks[:2]]


def _replay(schedule: CronSchedule, start: int, end: int) -> list[tuple[int, int]]:
    """Virtual planner: returns (scheduled, woke_at) for every decided fire in (start, end]."""
    fires: list[tuple[int, int]] = []
    last = now = start
    while True:
        due = schedule.next_after(last)
        if due is None or due > end:
            break
        now = due + jitter_offset("replay", due, 20_000, None) // 1000  # wakes 0-20 s late
        outcome = evaluate_misfire(schedule, last, now, MisfirePolicy(), 86400)
        assert not outcome.not_fired and not outcome.omitted
        fires.extend((f.scheduled, now) for f in outcome.fires)
        last = outcome.decided_through
    return fires


@pytest.mark.parametrize("zone", ZONES)
@pytest.mark.parametrize("dst", POLICIES, ids=lambda p: f"{p.gap}-{p.repeat}")
def test_dst_week_replay_fires_exactly_the_oracle_instants(zone: str, dst: DstPolicy) -> None:
    for expr in EXPRS:
        schedule = compile_schedule(CronSpec(expr), zone, dst)
        assert isinstance(schedule, CronSchedule)
        for start in _weeks(zone):
            fires = _replay(schedule, start, start + WEEK)
            scheduled = [s for s, _ in fires]
            expected = oracle_instants(
                expr, zone, start + 60, start + WEEK + 60,
                shift=dst.gap is GapPolicy.SHIFT, both=dst.repeat is RepeatPolicy.BOTH,
            )  # fmt: skip
            assert scheduled == expected, (expr, zone, dst)
            assert all(0 <= woke - s <= 20 for s, woke in fires)


@pytest.mark.parametrize("zone", ZONES)
@pytest.mark.parametrize("kind", list(MisfireKind))
def test_outage_across_the_transition_is_accounted_instant_by_instant(
    zone: str, kind: MisfireKind
) -> None:
    schedule = compile_schedule(CronSpec("*/30 * * * *"), zone)
    for start in _weeks(zone):
        transition = start + WEEK // 2
        down_from, back_at = transition - 3 * 3600, transition + 3 * 3600 + 600  # 10 min late
        policy = MisfirePolicy(kind, max_fires=4)
        outcome = evaluate_misfire(schedule, down_from, back_at, policy, horizon_s=86400)
        missed = oracle_instants("*/30 * * * *", zone, down_from + 60, back_at)
        decided = sorted([f.scheduled for f in outcome.fires] +
                         [r.scheduled for r in outcome.not_fired])  # fmt: skip
        assert decided == missed
        late = [f.scheduled for f in outcome.fires]
        expected_fires = {MisfireKind.FIRE_ONCE: missed[-1:], MisfireKind.FIRE_ALL: missed[-4:],
                          MisfireKind.SKIP: []}[kind]  # fmt: skip
        assert late == expected_fires
        assert {r.cause for r in outcome.not_fired} <= {CAUSE_SKIPPED}


def test_dst_adjustments_explain_moved_and_dropped_wall_times() -> None:
    zone = "America/New_York"
    spring = next(t for t in transitions(zone) if t > 1_770_000_000)  # 2026-03-08
    shift = compile_schedule(CronSpec("30 2 * * *"), zone)
    (moved,) = dst_adjustments(shift, spring - 86400, spring + 86400)
    assert (moved.wall, moved.cause, moved.instant) == ("2026-03-08T02:30:00", "dst: gap shifted",
                                                        spring)  # fmt: skip
    skip = compile_schedule(CronSpec("30 2 * * *"), zone, DstPolicy(gap=GapPolicy.SKIP))
    (dropped,) = dst_adjustments(skip, spring - 86400, spring + 86400)
    assert (dropped.cause, dropped.instant) == ("dst: gap skipped", None)
    autumn = next(t for t in transitions(zone) if t > spring)
    first = compile_schedule(CronSpec("30 1 * * *"), zone)
    (second_pass,) = dst_adjustments(first, autumn - 86400, autumn + 86400)
    assert second_pass.cause == "dst: repeated wall time, second pass not fired"
    both = compile_schedule(CronSpec("30 1 * * *"), zone, DstPolicy(repeat=RepeatPolicy.BOTH))
    assert dst_adjustments(both, autumn - 86400, autumn + 86400) == []
