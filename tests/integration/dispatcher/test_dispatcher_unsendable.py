"""An order no HTTP sender can send stalls no one (real broker, both HTTP clients): orders whose
``target.method`` is not an HTTP method, or whose tenant header holds a line break, produced
straight onto a lane partition between other tenants' orders, each conclude at once as a failed
fire — an attempt record (``not_sent`` ``unsendable``, the cause naming the part), a ``failed``
outcome, ``schedule.failed`` and a DLQ entry — while every other tenant's order on that partition
is delivered; nothing is sent for them, nothing is retried."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from horae.contracts import events as ev
from horae.contracts.codec import encode
from horae.contracts.topics import Topic, events_topic, fire_partition, lane_topic
from horae.domain.keys import FireKey, Origin
from horae.kafka.admin import Plan, admin_client, apply
from horae.streams.dispatcher.conclude import H_DLQ_CAUSE
from horae.streams.dispatcher.records import UNSENDABLE
from tests.integration.dispatcher.support import (
    PARTITIONS,
    SECRET,
    SECRET_REF,
    TENANT,
    DispatchEnv,
    Receiver,
    events,
    instants,
    order,
    read_all,
)
from tests.waiting import wait_until

TENANTS = (TENANT, "beta", "gamma", "evil")
PARTITION = 0


@pytest.fixture
def env(kafka_bootstrap: str, topic_prefix: str) -> Iterator[DispatchEnv]:
    e = DispatchEnv(kafka_bootstrap, topic_prefix)
    e.setup()
    apply(admin_client(kafka_bootstrap), Plan(topic_prefix, PARTITIONS, 1, TENANTS))
    try:
        yield e
    finally:
        e.close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    r.start()
    try:
        yield r
    finally:
        r.stop()


def trigger_on(tenant: str, partition: int) -> str:
    """A trigger id of ``tenant`` whose fires live on ``partition``."""
    return next(
        f"t{n}" for n in range(1000) if fire_partition(tenant, f"t{n}", PARTITIONS) == partition
    )


def order_of(
    tenant: str, url: str, instant: int, target: dict[str, object] | None = None
) -> ev.DispatchOrder:
    """An on-time order of ``tenant``'s trigger on :data:`PARTITION`, its target changed by
    ``target``."""
    trigger = trigger_on(tenant, PARTITION)
    base = order(url, instant, trigger=trigger)
    key = FireKey(tenant, trigger, instant, 0, Origin.SCHEDULED)
    fire = replace(base.fire, tenant=tenant, fire_key=key.canonical(), key_hash=key.short_hash())
    return replace(base, fire=fire, target=replace(base.target, **(target or {})))


@pytest.mark.parametrize("client", ["lean", "aiohttp"])
def test_an_unsendable_order_fails_its_fire_and_the_partition_moves_on(
    env: DispatchEnv, receiver: Receiver, client: str
) -> None:
    url = receiver.url()
    at = instants(5)
    good = [order_of(t, url, next(at)) for t in (TENANT, "beta")]
    bad_method = order_of("evil", url, next(at), {"method": "GE T"})
    bad_header = order_of("evil", url, next(at), {"headers": {"X-Evil": "a\r\nInjected: 1"}})
    last = order_of("gamma", url, next(at))
    lane = env.topic(lane_topic(ev.Lane.ON_TIME))
    assert env.producer is not None
    for o in [good[0], bad_method, good[1], bad_header, last]:
        env.producer.produce(lane, key=o.fire.fire_key.encode(), value=encode(o), partition=0)
    assert env.producer.flush(30) == 0

    secrets = {t: {SECRET_REF: SECRET} for t in TENANTS}
    env.start(webhook_secrets=secrets, http_client=client)
    bad = {bad_method.fire.fire_key: "target.method", bad_header.fire.fire_key: "target.headers"}
    every = {o.fire.fire_key for o in [*good, last]} | set(bad)

    def outcomes() -> dict[str, ev.WorkOutcome]:
        found = events(env.bootstrap, env.topic(Topic.OUTCOMES), ev.WorkOutcome)
        return {o.fire_key: o for o in found}

    wait_until(lambda: set(outcomes()) == every, 60, message=lambda: f"{outcomes()}")
    env.stop_all()

    assert receiver.distinct() == {o.fire.fire_key for o in [*good, last]}
    done = outcomes()
    for key, part in bad.items():
        assert done[key].state is ev.OutcomeState.FAILED
        assert done[key].error is not None and f"unsendable: {part}" in done[key].error
    assert {done[o.fire.fire_key].state for o in [*good, last]} == {ev.OutcomeState.SUCCEEDED}

    attempts = [
        a for a in events(env.bootstrap, env.topic(Topic.ATTEMPTS), ev.Attempt) if a.fire_key in bad
    ]
    assert sorted(a.fire_key for a in attempts) == sorted(bad)  # one attempt each, no retry
    for a in attempts:
        assert a.not_sent == UNSENDABLE and a.n == 1 and a.http_status is None
        assert a.error is not None and f"unsendable: {bad[a.fire_key]}" in a.error
    assert "'GE T' is not an HTTP method" in next(
        a.error or "" for a in attempts if a.fire_key == bad_method.fire.fire_key
    )

    dlq = read_all(env.bootstrap, env.topic(Topic.DLQ))
    assert sorted(k.decode() for k, _, _ in dlq if k is not None) == sorted(bad)
    for _, _, headers in dlq:
        cause = dict(headers or [])[H_DLQ_CAUSE]
        assert isinstance(cause, bytes) and cause.startswith(b"failed: final: unsendable: ")

    failed = events(env.bootstrap, events_topic("evil", env.prefix), ev.ScheduleEvent)
    assert {e.fire_key for e in failed if e.type == "schedule.failed"} == set(bad)
