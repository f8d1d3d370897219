"""Retries on the real broker: backoff truncated at the trigger's next instant, Retry-After
honoured, final 4xx not retried, budget exhausted into the DLQ, and redrive from the DLQ under the
original key (``horae dlq redrive``), linked to the DLQ record."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from aiohttp import web

from horae.contracts import events as ev
from horae.contracts.codec import decode
from horae.contracts.topics import Topic
from horae.streams.dispatcher.records import H_REDRIVE
from tests.integration.dispatcher.support import (
    DispatchEnv,
    Receiver,
    events,
    order,
    read_all,
)
from tests.waiting import wait_until


def answer(path: str, n: int) -> web.Response | None:
    if path == "/down":
        return web.Response(status=503)
    if path == "/gone":
        return web.Response(status=404)
    if path == "/timeout408" and n == 1:
        return web.Response(status=408)
    if path == "/slow-down" and n == 1:
        return web.Response(status=429, headers={"Retry-After": "1"})
    if path == "/dlq" and n <= 3:
        return web.Response(status=500)
    return None


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver(behaviour=answer)
    r.start()
    try:
        yield r
    finally:
        r.stop()


def _by_key(items: list[ev.Attempt]) -> dict[str, list[ev.Attempt]]:
    out: dict[str, list[ev.Attempt]] = {}
    for a in sorted(items, key=lambda a: a.n):
        out.setdefault(a.fire_key, []).append(a)
    return out


def _outcomes(env: DispatchEnv) -> dict[str, ev.WorkOutcome]:
    return {o.fire_key: o for o in events(env.bootstrap, env.topic(Topic.OUTCOMES), ev.WorkOutcome)}


def test_retry_truncation_retry_after_and_final_4xx(env: DispatchEnv, receiver: Receiver) -> None:
    env.start()
    warm = order(receiver.url("/ok"), int(time.time()) - 10, trigger="warm")
    env.produce_orders([warm])  # the dispatcher consumes before the deadline clock starts
    wait_until(lambda: warm.fire.fire_key in _outcomes(env), 60, 0.2)
    now = int(time.time())
    deadline = datetime.now(UTC) + timedelta(seconds=2.5)
    many = ev.RetryPolicy(max_attempts=20, base_s=0.2, max_s=0.4, jitter_ratio=0.0)
    truncated = order(
        receiver.url("/down"), now - 10, trigger="down", retry=many, deadline=deadline
    )
    gone = order(receiver.url("/gone"), now - 10, trigger="gone")
    r408 = order(receiver.url("/timeout408"), now - 10, trigger="t408")
    slow = order(receiver.url("/slow-down"), now - 10, trigger="slow")
    env.produce_orders([truncated, gone, r408, slow])
    keys = [o.fire.fire_key for o in (truncated, gone, r408, slow)]
    wait_until(lambda: set(keys) <= set(_outcomes(env)), 60, 0.5)
    env.stop_all()
    outcomes = _outcomes(env)
    attempts = _by_key(events(env.bootstrap, env.topic(Topic.ATTEMPTS), ev.Attempt))

    # truncated at the next instant (deadline): fewer than the budget, exhausted, DLQ'd
    down = attempts[truncated.fire.fire_key]
    assert 2 <= len(down) < many.max_attempts
    assert [a.n for a in down] == list(range(1, len(down) + 1))
    assert all(a.next_attempt_at is not None and a.next_attempt_at < deadline for a in down[:-1])
    assert down[-1].next_attempt_at is None
    assert outcomes[truncated.fire.fire_key].state is ev.OutcomeState.EXHAUSTED
    assert "next instant" in (outcomes[truncated.fire.fire_key].error or "")
    dlq = events(env.bootstrap, env.topic(Topic.DLQ), ev.DispatchOrder)
    assert [d.fire.fire_key for d in dlq] == [truncated.fire.fire_key]
    assert dlq[0].attempt == len(down)

    # 404: final, one attempt, failed, not in the DLQ
    assert len(attempts[gone.fire.fire_key]) == 1
    assert outcomes[gone.fire.fire_key].state is ev.OutcomeState.FAILED

    # 408 is retried and then succeeds
    assert [a.http_status for a in attempts[r408.fire.fire_key]] == [408, 200]
    assert outcomes[r408.fire.fire_key].state is ev.OutcomeState.SUCCEEDED

    # Retry-After: 1 is a floor for the next attempt (base delay is 0.05 s)
    first, second = attempts[slow.fire.fire_key]
    assert first.http_status == 429 and first.retry_after_s == 1.0
    assert second.started_at - first.ended_at >= timedelta(seconds=1)


def test_exhausted_fire_goes_to_dlq_and_redrive_delivers_it_under_the_same_key(
    env: DispatchEnv, receiver: Receiver
) -> None:
    o = order(receiver.url("/dlq"), int(time.time()) - 10, trigger="dlq")  # budget 3, 3 x 500
    env.produce_orders([o])
    env.start()
    key = o.fire.fire_key
    wait_until(lambda: key in _outcomes(env), 60, 0.5)
    assert _outcomes(env)[key].state is ev.OutcomeState.EXHAUSTED
    dlq = read_all(env.bootstrap, env.topic(Topic.DLQ))
    assert len(dlq) == 1 and dlq[0][0] == key.encode()

    cli = subprocess.run(
        [sys.executable, "-m", "horae.cli.main", "dlq", "redrive", "--fire-key", key],
        env=dict(os.environ, HORAE_KAFKA_BOOTSTRAP=env.bootstrap, HORAE_TOPIC_PREFIX=env.prefix),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    listed = json.loads(cli.stdout.splitlines()[0])
    assert listed["fire_key"] == key and listed["attempts"] == 3
    assert "redriven: 1" in cli.stdout

    wait_until(lambda: _outcomes(env)[key].state is ev.OutcomeState.SUCCEEDED, 60, 0.5)
    env.stop_all()
    assert set(receiver.keys()) == {key} and len(receiver.keys()) == 4
    assert _outcomes(env)[key].attempts == 4
    attempts = read_all(env.bootstrap, env.topic(Topic.ATTEMPTS))
    redriven = [h for _, _, h in attempts if dict(h).get(H_REDRIVE)]
    assert len(redriven) == 1  # the 4th attempt links to the DLQ record
    assert dict(redriven[0])[H_REDRIVE].decode() == listed["dlq"]
    assert all(k == key.encode() for k, _, _ in attempts)
    audit = [
        decode(v, ev.AuditEntry) for _, v, _ in read_all(env.bootstrap, env.topic(Topic.AUDIT))
    ]
    redrives = [a for a in audit if a.action == "dlq.redrive"]  # the privileged act, audited
    assert [(a.tenant, a.allowed, a.detail["fire_key"], a.detail["dlq"]) for a in redrives] == [
        (o.fire.tenant, True, key, listed["dlq"])
    ]
