"""The dispatcher delivers lane orders to a local receiver, signed, with the fire key, and records
every attempt and outcome on Kafka."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from standardwebhooks import Webhook

from horae.contracts import events as ev
from horae.contracts.topics import Topic
from tests.integration.dispatcher.support import (
    SECRET,
    DispatchEnv,
    Receiver,
    events,
    instants,
    order,
)
from tests.waiting import wait_until


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    r.start()
    try:
        yield r
    finally:
        r.stop()


def test_orders_on_every_lane_are_delivered_signed_and_recorded(
    env: DispatchEnv, receiver: Receiver
) -> None:
    lanes = [ev.Lane.ON_TIME, ev.Lane.CATCH_UP, ev.Lane.BACKFILL, ev.Lane.MANUAL]
    orders = [
        order(receiver.url(), t, trigger=f"g{i % 4}", lane=lanes[i % 4])
        for i, t in enumerate(instants(40))
    ]
    env.produce_orders(orders)
    env.start()
    wait_until(lambda: len(receiver.distinct()) >= 40)
    env.stop_all()
    keys = {o.fire.fire_key for o in orders}
    assert receiver.distinct() == keys
    hit = receiver.hits[0]
    Webhook(SECRET).verify(hit.body, hit.headers)  # Standard Webhooks signature verifies
    assert hit.headers["Idempotency-Key"] == hit.headers["webhook-id"] == hit.key
    attempts = events(env.bootstrap, env.topic(Topic.ATTEMPTS), ev.Attempt)
    outcomes = events(env.bootstrap, env.topic(Topic.OUTCOMES), ev.WorkOutcome)
    assert {a.fire_key for a in attempts} == keys
    assert all(
        a.transport_result is ev.TransportResult.OK and a.http_status == 200 for a in attempts
    )
    assert {o.fire_key for o in outcomes} == keys
    assert {o.state for o in outcomes} == {ev.OutcomeState.SUCCEEDED}
    succeeded = events(env.bootstrap, env.topic(Topic.SCHEDULE_EVENTS), ev.ScheduleEvent)
    assert {e.fire_key for e in succeeded if e.type == "schedule.succeeded"} == keys
