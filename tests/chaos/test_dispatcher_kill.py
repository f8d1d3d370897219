"""At-least-once through crashes: a dispatcher delivering 1,000 fires (some answered 503 first,
so retries are in flight too) is SIGKILLed mid-delivery — twice from outside, and at random
points around its transaction commits (failpoints) — and restarted under the same slot. The
receiver must see every fire key at least once, exactly 1,000 after deduplicating by key, the
same key on every attempt, and every fire must end with a committed ``succeeded`` outcome."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Callable, Iterator

import pytest
from aiohttp import web

from horae.contracts import events as ev
from horae.contracts.topics import Topic
from tests.integration.dispatcher.support import (
    DispatchEnv,
    Receiver,
    events,
    instants,
    order,
)
from tests.waiting import wait_until

FIRES = 1000


@pytest.fixture
def env(kafka_bootstrap: str, topic_prefix: str) -> Iterator[DispatchEnv]:
    e = DispatchEnv(kafka_bootstrap, topic_prefix)
    e.setup()
    try:
        yield e
    finally:
        e.close()


def flaky(path: str, n: int) -> web.Response | None:
    """Every fire on /flaky is refused once with 503 (a retry follows)."""
    return web.Response(status=503) if path == "/flaky" and n == 1 else None


def _kill(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    proc.wait(30)


def _exited_or(proc: subprocess.Popen[bytes], done: Callable[[], bool]) -> Callable[[], bool]:
    return lambda: proc.poll() is not None or done()


@pytest.mark.timeout(280)
def test_sigkill_during_delivery_of_1000_fires_loses_none(env: DispatchEnv) -> None:
    receiver = Receiver(behaviour=flaky, delay_s=0.02)
    receiver.start()
    try:
        orders = [
            order(receiver.url("/flaky" if i % 5 == 0 else "/hook"), t, trigger=f"g{i % 7}")
            for i, t in enumerate(instants(FIRES))
        ]
        env.produce_orders(orders)
        small = {"HORAE_DISPATCHER_MAX_INFLIGHT": "8"}
        crashy = {**small, "HORAE_FAILPOINTS": "before_commit=0.02,after_commit=0.02"}
        kills = 0

        def reached(n: int) -> Callable[[], bool]:
            return lambda: len(receiver.distinct()) >= n

        for threshold in (150, 450):
            proc = env.spawn("k1", small)
            wait_until(reached(threshold), 120, 0.005)
            _kill(proc)
            kills += 1
        proc = env.spawn("k1", crashy)
        enough = reached(min(FIRES, len(receiver.distinct()) + 300))
        while not enough():
            if proc.poll() is not None:  # a failpoint killed it: restart the same slot
                assert proc.returncode == -signal.SIGKILL, proc.returncode
                kills += 1
                proc = env.spawn("k1", crashy)
            wait_until(_exited_or(proc, enough), 120, 0.05, "neither progress nor a crash")
        _kill(proc)
        calm = env.spawn("k1", small)
        outcomes_topic = env.topic(Topic.OUTCOMES)

        def all_succeeded() -> bool:
            done = events(env.bootstrap, outcomes_topic, ev.WorkOutcome)
            return len({o.fire_key for o in done if o.state is ev.OutcomeState.SUCCEEDED}) == FIRES

        wait_until(lambda: len(receiver.distinct()) >= FIRES, 120)
        wait_until(all_succeeded, 120, 1.0)
        calm.send_signal(signal.SIGTERM)
        assert calm.wait(90) == 0
    finally:
        receiver.stop()
    keys = {o.fire.fire_key for o in orders}
    seen = receiver.keys()
    assert kills >= 2
    assert set(seen) == keys  # every key at least once, nothing else
    assert len(set(seen)) == FIRES
    assert all(h.headers["webhook-id"] == h.key for h in receiver.hits)
    assert all_succeeded()
    print(f"kills={kills} posts={len(seen)} duplicates={len(seen) - FIRES}")
