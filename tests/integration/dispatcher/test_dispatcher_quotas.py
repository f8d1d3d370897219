"""A tenant's dispatch limits come from its platform grant and hold across the consumer group:
two ``horae dispatcher`` processes, each given the tenant's whole grant (alone, each would send at
the full rate), together stay within it, because each applies the share of lane partitions it
owns (``owned / total``, recomputed on every rebalance)."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator

import pytest

from horae.contracts import events as ev
from horae.contracts.topics import fire_partition
from horae.domain.keys import Origin
from tests.integration.dispatcher.support import (
    PARTITIONS,
    TENANT,
    DispatchEnv,
    Receiver,
    instants,
    order,
)
from tests.net import free_ports
from tests.waiting import wait_until

RATE = 20.0  # the tenant's granted dispatches/s
CONCURRENCY = 4  # the tenant's granted sends in flight
TOLERANCE = 0.10  # measured rate may exceed the grant by this much (timer and clock noise)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    r.start()
    try:
        yield r
    finally:
        r.stop()


def metric(port: int, name: str) -> float | None:
    """The value of the unlabelled sample ``name`` a dispatcher serves, None if not served yet."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as answer:
            text = answer.read().decode()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def triggers_per_partition(n: int) -> list[str]:
    """``n`` trigger ids on each lane partition (the tenant's work spread evenly, as the planner
    spreads many triggers)."""
    chosen: dict[int, list[str]] = {p: [] for p in range(PARTITIONS)}
    i = 0
    while any(len(ids) < n for ids in chosen.values()):
        trigger = f"q{i}"
        ids = chosen[fire_partition(TENANT, trigger, PARTITIONS)]
        if len(ids) < n:
            ids.append(trigger)
        i += 1
    return [t for ids in chosen.values() for t in ids]


def test_two_dispatchers_share_the_tenant_grant(env: DispatchEnv, receiver: Receiver) -> None:
    grant = {TENANT: {"dispatch_per_s": RATE, "max_concurrency": CONCURRENCY}}
    ports = free_ports(2)
    for slot, port in zip(("qa", "qb"), ports, strict=True):
        env.spawn(
            slot,
            {"HORAE_TENANT_GRANTS": json.dumps(grant), "HORAE_DISPATCHER_METRICS_PORT": str(port)},
        )

    def shares() -> list[float] | None:
        got = [metric(p, "horae_dispatch_partition_share") for p in ports]
        values = [g for g in got if g is not None]
        both = len(values) == 2 and all(0 < v < 1 for v in values)
        return values if both and abs(sum(values) - 1) < 1e-9 else None

    assert sorted(wait_until(shares, 90, message="both dispatchers own lane partitions")) == [
        pytest.approx(1 / 3),
        pytest.approx(2 / 3),
    ]

    # 1. the rate: backfill work is held to the grant (hard); 300 orders, 100 per partition
    triggers = triggers_per_partition(10)
    backfill = [
        order(receiver.url(), t, trigger=trigger, lane=ev.Lane.BACKFILL, origin=Origin.BACKFILL)
        for trigger in triggers
        for t in instants(10)
    ]
    env.produce_orders(backfill)
    wait_until(lambda: len(receiver.distinct()) >= len(backfill), 120)
    times = sorted(h.at for h in receiver.hits)
    skip = int(RATE) * 2  # the buckets' first burst (one second of each process's share)
    rate = (len(times) - 1 - skip) / (times[-1] - times[skip])
    # undivided, each process would send at RATE: about twice the grant together
    assert rate <= RATE * (1 + TOLERANCE), f"{rate:.1f}/s over the grant of {RATE}/s"
    assert rate >= RATE * 0.75, f"{rate:.1f}/s: the group does not use its grant"
    ok = 'horae_dispatch_attempts_total{result="ok",target_class="2xx"}'
    sent = [metric(p, ok) for p in ports]
    assert all(s and s > 0 for s in sent), sent  # both processes sent

    # 2. concurrency: slow on-time work (not rate-held: over-quota on-time takes spare capacity)
    # is held to the granted sends in flight; undivided, each process would allow all of them
    receiver.delay_s, receiver.peak = 0.5, 0
    on_time = [
        order(receiver.url(), t, trigger=trigger)
        for trigger in triggers[::3]
        for t in instants(4, start=int(times[0]) - 7200)
    ]
    env.produce_orders(on_time)
    wait_until(lambda: len(receiver.distinct()) >= len(backfill) + len(on_time), 120)
    assert 2 <= receiver.peak <= CONCURRENCY, receiver.peak
