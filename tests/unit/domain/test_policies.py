"""Overlap, jitter, retry and fire keys: pure decisions, deterministic across processes."""

from __future__ import annotations

import subprocess
import sys

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from horae.domain import (
    BackoffPolicy,
    FireKey,
    InFlight,
    JitterPolicy,
    Origin,
    OverlapAction,
    OverlapPolicy,
    decide_overlap,
    jitter_offset,
    next_retry,
    parse_instant,
    retry_schedule,
)
from horae.domain.retry import CAUSE_BUDGET, CAUSE_NEXT_INSTANT


def cases(n: int) -> settings:
    return settings(max_examples=n, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --- overlap -------------------------------------------------------------------------------

RUNNING = InFlight("k1", 100)
BUFFERED = InFlight("k2", 160, buffered=True)


def test_overlap_table() -> None:
    for policy in OverlapPolicy:
        assert decide_overlap(policy, []).action is OverlapAction.START
    assert decide_overlap(OverlapPolicy.ALLOW, [RUNNING]).action is OverlapAction.START
    skip = decide_overlap(OverlapPolicy.SKIP, [RUNNING])
    assert (skip.action, skip.cause) == (OverlapAction.SKIP, "skipped: overlap")
    buffer = decide_overlap(OverlapPolicy.BUFFER_ONE, [RUNNING])
    assert buffer.action is OverlapAction.BUFFER
    full = decide_overlap(OverlapPolicy.BUFFER_ONE, [RUNNING, BUFFERED])
    assert (full.action, full.cause) == (OverlapAction.SKIP, "skipped: overlap (buffer full)")
    replace = decide_overlap(OverlapPolicy.REPLACE, [BUFFERED, RUNNING])
    assert replace.action is OverlapAction.START and replace.cancel == ("k1", "k2")


@cases(300)
@given(
    policy=st.sampled_from(list(OverlapPolicy)),
    flights=st.lists(
        st.builds(InFlight, st.text(min_size=1, max_size=5), st.integers(0, 10**6), st.booleans()),
        max_size=4,
    ),
)
def test_overlap_is_a_pure_function_of_the_in_flight_set(
    policy: OverlapPolicy, flights: list[InFlight]
) -> None:
    decision = decide_overlap(policy, flights)
    assert decide_overlap(policy, list(reversed(flights))) == decision
    running = any(not f.buffered for f in flights)
    if not running and policy is not OverlapPolicy.REPLACE:
        assert decision.action is OverlapAction.START
    if decision.action is not OverlapAction.START:
        assert decision.cause


# --- jitter --------------------------------------------------------------------------------


@cases(800)
@given(
    key=st.text(max_size=30),
    instant=st.integers(0, 4_000_000_000),
    jitter_ms=st.integers(0, 86_400_000),
    gap=st.one_of(st.none(), st.integers(1, 10**6)),
)
def test_jitter_is_bounded_deterministic_and_before_the_next_instant(
    key: str, instant: int, jitter_ms: int, gap: int | None
) -> None:
    next_instant = None if gap is None else instant + gap
    offset = jitter_offset(key, instant, jitter_ms, next_instant)
    assert 0 <= offset <= jitter_ms
    if next_instant is not None:
        assert instant * 1000 + offset < next_instant * 1000
    assert offset == jitter_offset(key, instant, jitter_ms, next_instant)
    assert JitterPolicy(jitter_ms).offset(key, instant, next_instant) == offset


def test_jitter_spreads_and_is_stable_across_processes() -> None:
    offsets = {jitter_offset(f"t{i}", 1_772_953_200, 60_000, None) for i in range(1000)}
    assert len(offsets) > 900  # spread over the minute
    code = (
        "from horae.domain import jitter_offset;"
        "print(jitter_offset('acme/nightly', 1772953200, 60000, None))"
    )
    other = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert int(other) == jitter_offset("acme/nightly", 1_772_953_200, 60_000, None)


# --- retry ---------------------------------------------------------------------------------


@cases(800)
@given(
    policy=st.builds(
        BackoffPolicy,
        max_attempts=st.integers(1, 12),
        initial_ms=st.integers(1, 10_000),
        multiplier=st.floats(1.0, 4.0),
        max_backoff_ms=st.integers(10_000, 600_000),
        jitter_ratio=st.floats(0.0, 1.0),
    ),
    key=st.text(max_size=20),
    start=st.integers(0, 10**13),
    until=st.one_of(st.none(), st.integers(1, 10**7)),
)
def test_retry_schedule_within_budget_increasing_and_truncated(
    policy: BackoffPolicy, key: str, start: int, until: int | None
) -> None:
    next_instant = None if until is None else start + until
    plan = retry_schedule(policy, key, start, next_instant)
    assert len(plan) <= policy.max_attempts - 1
    assert plan == sorted(plan) and all(b > a for a, b in zip([start, *plan], plan, strict=False))
    if next_instant is not None:
        assert all(at < next_instant for at in plan)
    for attempt, at in enumerate(plan, start=1):
        previous = start if attempt == 1 else plan[attempt - 2]
        delay = at - previous
        ceiling = min(policy.initial_ms * policy.multiplier ** (attempt - 1), policy.max_backoff_ms)
        assert delay <= ceiling + 1
        assert delay >= max(1, int(ceiling * (1 - policy.jitter_ratio))) - 1
    assert plan == retry_schedule(policy, key, start, next_instant)


def test_retry_after_budget_and_next_instant() -> None:
    policy = BackoffPolicy(max_attempts=3, initial_ms=1000, multiplier=2.0, jitter_ratio=0.0)
    first = next_retry(policy, "k", 1, 0)
    assert (first.at_ms, first.cause) == (1000, None)
    honoured = next_retry(policy, "k", 1, 0, retry_after_ms=30_000)
    assert honoured.at_ms == 30_000
    ignored = next_retry(
        BackoffPolicy(jitter_ratio=0.0, honor_retry_after=False), "k", 1, 0, retry_after_ms=30_000
    )
    assert ignored.at_ms == 1000
    assert next_retry(policy, "k", 3, 0).cause == CAUSE_BUDGET
    late = next_retry(policy, "k", 1, 0, retry_after_ms=90_000, next_instant_ms=60_000)
    assert (late.at_ms, late.cause) == (None, CAUSE_NEXT_INSTANT)


# --- fire keys -----------------------------------------------------------------------------


def test_fire_key_canonical_form_and_hash_are_stable() -> None:
    key = FireKey("acme", "nightly-report", parse_instant("2026-03-08T07:00:00Z"))
    assert key.canonical() == "v1/acme/nightly-report/2026-03-08T07:00:00Z/0/scheduled"
    # Golden value: changing it breaks deduplication for every running target.
    assert key.short_hash() == "ddc7b7f89f3fea583785"
    assert FireKey.parse(key.canonical()) == key
    code = (
        "from horae.domain import FireKey;"
        "print(FireKey('acme', 'nightly-report', 1772953200).short_hash())"
    )
    other = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert other == key.short_hash()


def test_fire_key_escapes_separators_and_distinguishes_origins() -> None:
    tricky = FireKey("a/b", "c", 0)
    plain = FireKey("a", "b/c", 0)
    assert tricky.canonical() != plain.canonical()
    assert "a%2Fb" in tricky.canonical()
    manual = FireKey("a", "b", 0, 0, Origin.MANUAL)
    assert manual.canonical() != FireKey("a", "b", 0).canonical()
    assert manual.short_hash() != FireKey("a", "b", 0).short_hash()


@cases(400)
@given(
    tenant=st.text(min_size=1, max_size=20),
    trigger=st.text(min_size=1, max_size=20),
    instant=st.integers(0, 4_102_444_800),
    sequence=st.integers(0, 1000),
)
def test_distinct_keys_have_distinct_canonical_forms(
    tenant: str, trigger: str, instant: int, sequence: int
) -> None:
    key = FireKey(tenant, trigger, instant, sequence)
    variants = [
        FireKey(tenant + "x", trigger, instant, sequence),
        FireKey(tenant, trigger + "x", instant, sequence),
        FireKey(tenant, trigger, instant + 1, sequence),
        FireKey(tenant, trigger, instant, sequence + 1),
        FireKey(tenant, trigger, instant, sequence, Origin.BACKFILL),
    ]
    assert len({key.canonical(), *(v.canonical() for v in variants)}) == 6
    assert len({key.short_hash(), *(v.short_hash() for v in variants)}) == 6


@cases(400)
@given(
    text=st.text(min_size=1, max_size=20) | st.from_regex(r"[A-Za-z0-9._~-]{1,20}", fullmatch=True)
)
def test_fire_key_escaping_equals_full_percent_encoding(text: str) -> None:
    from urllib.parse import quote

    from horae.domain.keys import _escaped

    assert _escaped(text) == quote(text, safe="")
