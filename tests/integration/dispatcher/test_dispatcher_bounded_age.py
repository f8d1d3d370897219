"""Bounded age on the real broker, through the real dispatcher: ``policies.retry``'s
``max_event_age_s`` (a fire too old when it would be sent is concluded expired, never sent; no
retry past it) and ``max_retry_duration_s`` (no retry starts that long after the first attempt),
for scheduled, manual and backfill fires alike (a scheduled fire's age counts from its due time,
a manual or backfill fire's from its decision)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from aiohttp import web

from horae.contracts import events as ev
from horae.contracts.topics import Topic
from horae.domain.keys import Origin
from tests.integration.dispatcher.support import DispatchEnv, Receiver, events, order
from tests.waiting import wait_until


def answer(path: str, n: int) -> web.Response | None:
    return web.Response(status=503) if path == "/down" else None


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver(behaviour=answer)
    r.start()
    try:
        yield r
    finally:
        r.stop()


def _outcomes(env: DispatchEnv) -> dict[str, ev.WorkOutcome]:
    return {o.fire_key: o for o in events(env.bootstrap, env.topic(Topic.OUTCOMES), ev.WorkOutcome)}


def _decided(o: ev.DispatchOrder, at: datetime) -> ev.DispatchOrder:
    return replace(o, fire=replace(o.fire, decided_at=at))


def test_too_old_fires_are_expired_unsent_and_fresh_ones_delivered(
    env: DispatchEnv, receiver: Receiver
) -> None:
    now = int(time.time())
    aged = ev.RetryPolicy(max_attempts=3, base_s=0.05, max_s=0.2, max_event_age_s=60)
    just_now = datetime.now(UTC)
    orders = {
        # scheduled: age from the due time
        "late": order(receiver.url("/ok"), now - 120, trigger="late", retry=aged),
        "fresh": order(receiver.url("/ok"), now - 5, trigger="fresh", retry=aged),
        # manual: age from its decision, whatever instant it stands for
        "manual-old": _decided(
            order(receiver.url("/ok"), now - 7200, trigger="mo", retry=aged, origin=Origin.MANUAL),
            just_now - timedelta(seconds=90),
        ),
        "manual-new": _decided(
            order(receiver.url("/ok"), now - 7200, trigger="mn", retry=aged, origin=Origin.MANUAL),
            just_now,
        ),
        # backfill: last week's instant, decided just now, goes
        "backfill": _decided(
            order(
                receiver.url("/ok"),
                now - 7 * 86400,
                trigger="bf",
                lane=ev.Lane.BACKFILL,
                retry=aged,
                origin=Origin.BACKFILL,
            ),
            just_now,
        ),
        "backfill-old": _decided(
            order(
                receiver.url("/ok"),
                now - 7 * 86400,
                trigger="bo",
                lane=ev.Lane.BACKFILL,
                retry=aged,
                origin=Origin.BACKFILL,
            ),
            just_now - timedelta(seconds=61),
        ),
    }
    env.produce_orders(list(orders.values()))
    env.start()
    keys = {name: o.fire.fire_key for name, o in orders.items()}
    wait_until(lambda: set(keys.values()) <= set(_outcomes(env)), 60, 0.3)
    env.stop_all()
    outcomes = _outcomes(env)
    sent = set(receiver.keys())
    for name in ("late", "manual-old", "backfill-old"):
        got = outcomes[keys[name]]
        assert got.state is ev.OutcomeState.EXHAUSTED and got.attempts == 0, name
        assert (got.error or "").startswith("expired: max event age"), got.error
        assert "max_event_age_s 60" in (got.error or "")
        assert keys[name] not in sent, name
    for name in ("fresh", "manual-new", "backfill"):
        assert outcomes[keys[name]].state is ev.OutcomeState.SUCCEEDED, name
        assert keys[name] in sent
    expired = [
        e
        for e in events(env.bootstrap, env.topic(Topic.SCHEDULE_EVENTS), ev.ScheduleEvent)
        if e.type == ev.ScheduleEventType.EXPIRED.value
    ]
    assert sorted(e.fire_key for e in expired) == sorted(
        keys[n] for n in ("late", "manual-old", "backfill-old")
    )
    assert all((e.cause or "").startswith("expired: max event age") for e in expired)
    attempts = events(env.bootstrap, env.topic(Topic.ATTEMPTS), ev.Attempt)
    assert not {a.fire_key for a in attempts} & {keys["late"], keys["manual-old"]}
    dlq = events(env.bootstrap, env.topic(Topic.DLQ), ev.DispatchOrder)
    assert dlq == []  # expiry is the tenant's policy, not a failure to redrive


def test_retries_stop_at_the_max_retry_duration_and_the_max_event_age(
    env: DispatchEnv, receiver: Receiver
) -> None:
    env.start()
    now = int(time.time())
    many = ev.RetryPolicy(max_attempts=50, base_s=0.2, max_s=0.3, jitter_ratio=0.0)
    by_duration = order(
        receiver.url("/down"), now - 30, trigger="dur", retry=replace(many, max_retry_duration_s=2)
    )
    due = datetime.now(UTC) + timedelta(seconds=1)
    by_age = replace(
        order(receiver.url("/down"), now, trigger="age", retry=replace(many, max_event_age_s=3)),
        not_before=due,
    )
    by_age = replace(by_age, fire=replace(by_age.fire, due_at=due))
    env.produce_orders([by_duration, by_age])
    keys = (by_duration.fire.fire_key, by_age.fire.fire_key)
    wait_until(lambda: set(keys) <= set(_outcomes(env)), 60, 0.3)
    env.stop_all()
    outcomes = _outcomes(env)
    attempts: dict[str, list[ev.Attempt]] = {}
    made = events(env.bootstrap, env.topic(Topic.ATTEMPTS), ev.Attempt)
    for a in sorted(made, key=lambda a: a.n):
        attempts.setdefault(a.fire_key, []).append(a)

    tried = attempts[by_duration.fire.fire_key]
    assert 3 <= len(tried) < many.max_attempts
    first = tried[0].started_at
    assert all(a.started_at - first <= timedelta(seconds=2) for a in tried)
    assert tried[-1].next_attempt_at is None
    got = outcomes[by_duration.fire.fire_key]
    assert got.state is ev.OutcomeState.EXHAUSTED and got.attempts == len(tried)
    assert (got.error or "").startswith("exhausted: max retry duration"), got.error

    aged = attempts[by_age.fire.fire_key]
    assert 3 <= len(aged) < many.max_attempts
    assert all(a.started_at - due <= timedelta(seconds=3) for a in aged)
    got = outcomes[by_age.fire.fire_key]
    assert (got.error or "").startswith("exhausted: max event age"), got.error
