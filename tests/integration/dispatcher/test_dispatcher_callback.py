"""Outcome callbacks: the target reports the work's outcome with its attempt's token; a valid
report becomes a WorkOutcome on the outcomes topic; forged, expired and replayed ones are
refused."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

from horae.contracts import events as ev
from horae.contracts.topics import Topic
from horae.outbound import issue_token
from tests.integration.dispatcher.support import (
    CALLBACK_SECRET,
    TENANT,
    DispatchEnv,
    Receiver,
    events,
    order,
)
from tests.waiting import wait_until


def post(port: int, token: str | None, body: object) -> tuple[int, dict[str, str]]:
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Horae-Callback-Token"] = token
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/outcomes",
        data=json.dumps(body).encode(),
        headers=headers,
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, json.loads(exc.read())


def test_callbacks_accepted_once_refused_when_forged_expired_or_replayed(
    env: DispatchEnv,
) -> None:
    receiver = Receiver()
    receiver.start()
    try:
        o = order(receiver.url(), int(time.time()) - 5, trigger="cb")
        env.produce_orders([o])
        d = env.start(callback_port=0)
        assert d.callback_bound
        port = d.callback_bound
        wait_until(lambda: len(receiver.hits) == 1)
        token = receiver.hits[0].attempt_token
        assert token

        assert post(port, None, {"state": "succeeded"}) == (401, {"refused": "no_token"})
        forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
        assert post(port, forged, {"state": "succeeded"})[0] == 401
        expired = issue_token(
            tenant=TENANT,
            trigger="cb",
            fire_key=o.fire.fire_key,
            attempt=1,
            now=time.time() - 7200,
            ttl_s=60,
            secret=CALLBACK_SECRET,
        )
        assert post(port, expired, {"state": "failed"}) == (401, {"refused": "expired"})
        other_secret = issue_token(
            tenant=TENANT,
            trigger="cb",
            fire_key=o.fire.fire_key,
            attempt=1,
            now=time.time(),
            ttl_s=60,
            secret=b"not-the-secret",
        )
        assert post(port, other_secret, {"state": "failed"}) == (
            401,
            {"refused": "bad_signature"},
        )
        assert post(port, token, {"state": "maybe"})[0] == 400

        status, body = post(port, token, {"state": "failed", "error": "disk full"})
        assert (status, body) == (202, {"accepted": o.fire.fire_key})
        assert post(port, token, {"state": "succeeded"}) == (409, {"refused": "replayed"})

        outcomes_topic = env.topic(Topic.OUTCOMES)

        def reported() -> list[ev.WorkOutcome]:
            found = events(env.bootstrap, outcomes_topic, ev.WorkOutcome)
            return [w for w in found if w.state is ev.OutcomeState.FAILED]

        wait_until(lambda: len(reported()) == 1)
    finally:
        env.stop_all()
        receiver.stop()
    (work,) = reported()
    assert work.fire_key == o.fire.fire_key and work.error == "disk full" and work.attempts == 1
    states = [w.state for w in events(env.bootstrap, outcomes_topic, ev.WorkOutcome)]
    assert sorted(states) == sorted([ev.OutcomeState.SUCCEEDED, ev.OutcomeState.FAILED])
