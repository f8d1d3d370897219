"""A manual run's requested time is checked (in memory, on a virtual clock): it must lie within
``[now - HORAE_COMMAND_MAX_TTL_S, now + 60 s]`` of the planner's clock, else the run is
quarantined ``requested-at`` and audited, and fires nothing; and no manual run ever reuses an
earlier one's fire key, however the runs' instants and expiries interleave (a property against
an oracle of the rule)."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from horae.contracts import events as ev
from horae.contracts.topics import Topic
from horae.streams.planner.commands import MANUAL_AHEAD_S, REQUESTED_AT
from tests.unit.planner.builders import command, definition
from tests.unit.planner.rig import Rig, make_rig

MAX_TTL_S = 3600  # the rig's planner: PlannerConfig's default command_max_ttl_s


def manual(rig: Rig, offset_s: int, ttl_s: int = 600, **fields: object) -> ev.Command:
    """A manual run of ``daily`` requested ``offset_s`` from the rig's clock, its command
    expiring ``ttl_s`` after now."""
    now = rig.clock.now()
    expires = datetime.fromtimestamp(now + ttl_s, UTC)
    c = command("daily", ev.CommandKind.MANUAL_RUN, now + offset_s, expires_at=expires, **fields)
    return c


def manual_fires(rig: Rig) -> list[ev.FireRecord]:
    return [f for f in rig.fires() if f.origin is ev.Origin.MANUAL]


def audit(rig: Rig) -> list[tuple[str, bool, str]]:
    return [
        (a.action, a.allowed, a.detail.get("cause", ""))
        for a in rig.read(Topic.AUDIT, ev.AuditEntry)
    ]


def live_rig() -> Rig:
    rig = make_rig()
    rig.put(definition("daily", "0 0 * * *"))
    rig.step()
    return rig


def test_a_manual_run_requested_hours_ahead_or_long_ago_is_refused_with_its_cause(
    rig: Rig,
) -> None:
    rig.put(definition("daily", "0 0 * * *"))
    rig.step()
    rig.send(manual(rig, 3 * 3600))
    rig.send(manual(rig, -MAX_TTL_S - 1))
    rig.send(manual(rig, MANUAL_AHEAD_S))  # the edges are accepted
    rig.send(manual(rig, -MAX_TTL_S))
    rig.step()
    assert rig.quarantined() == [REQUESTED_AT, REQUESTED_AT]
    (ahead, ago) = rig.read(Topic.QUARANTINE, ev.Quarantined)
    assert "is more than 60 s after" in ahead.detail and "not scheduled ahead" in ahead.detail
    assert f"is more than {MAX_TTL_S} s before" in ago.detail
    refused = [(action, cause) for action, allowed, cause in audit(rig) if not allowed]
    assert refused == [("manual_run.request", REQUESTED_AT)] * 2
    now = int(rig.clock.now())
    instants = sorted(int(f.scheduled_at.timestamp()) for f in manual_fires(rig))
    assert instants == [now - MAX_TTL_S, now + MANUAL_AHEAD_S]


def test_a_run_at_an_earlier_runs_instant_after_its_command_expired_gets_a_new_key(
    rig: Rig,
) -> None:
    rig.put(definition("daily", "0 0 * * *"))
    rig.step()
    rig.send(manual(rig, 0, ttl_s=10))
    rig.step()
    rig.step(20.0)  # the first run's command has expired
    rig.send(manual(rig, -20))  # the same instant, still within the window
    rig.step()
    fires = manual_fires(rig)
    assert len(fires) == 2 and fires[0].scheduled_at == fires[1].scheduled_at
    assert [f.sequence for f in fires] == [0, 1]
    assert len({f.fire_key for f in fires}) == 2


RUNS = st.lists(
    st.tuples(
        st.integers(0, 2000),  # seconds the clock moves first
        st.integers(-MAX_TTL_S - 300, MANUAL_AHEAD_S + 300),  # requested, from now
        st.integers(1, MAX_TTL_S),  # the command's lifetime
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=60, deadline=None)
@given(runs=RUNS)
def test_manual_runs_fire_inside_their_window_and_never_share_a_fire_key(
    runs: list[tuple[int, int, int]],
) -> None:
    rig = live_rig()
    expected: list[int] = []  # the oracle: the instants of the runs the rule accepts
    for advance, offset, ttl in runs:
        rig.step(float(advance))
        now = rig.clock.now()
        if now - MAX_TTL_S <= now + offset <= now + MANUAL_AHEAD_S:
            expected.append(int(now) + offset)
        rig.send(manual(rig, offset, ttl))
        rig.step()
    fires = manual_fires(rig)
    assert sorted(int(f.scheduled_at.timestamp()) for f in fires) == sorted(expected)
    assert len({f.fire_key for f in fires}) == len(fires), "no fire key reused"
    assert rig.quarantined() == [REQUESTED_AT] * (len(runs) - len(expected))
