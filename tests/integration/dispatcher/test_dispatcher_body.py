"""Webhook bodies through the real broker and dispatcher: a receiver built on the reference
library (``standardwebhooks``) accepts every enveloped call, with or without a payload; ``raw``
sends the tenant's bytes with their own content type (none when empty)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace

import pytest
from standardwebhooks import Webhook

from tests.integration.dispatcher.support import SECRET, DispatchEnv, Receiver, instants, order
from tests.waiting import wait_until


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    r.start()
    try:
        yield r
    finally:
        r.stop()


def test_the_reference_library_accepts_every_enveloped_call_raw_keeps_the_tenant_bytes(
    env: DispatchEnv, receiver: Receiver
) -> None:
    ts = list(instants(12))
    empty = [replace(order(receiver.url(), t, trigger="empty"), payload=b"") for t in ts[:4]]
    filled = [order(receiver.url(), t, trigger="json") for t in ts[4:8]]
    raw = []
    for i, t in enumerate(ts[8:]):
        o = order(receiver.url(), t, trigger="raw")
        payload, ctype = (b"", "application/json") if i % 2 else (b"a,b\n", "text/csv")
        target = replace(o.target, body="raw")
        raw.append(replace(o, target=target, payload=payload, content_type=ctype))
    env.produce_orders([*empty, *filled, *raw])
    env.start()
    wait_until(lambda: len(receiver.distinct()) >= 12)
    env.stop_all()
    by_key = {h.key: h for h in receiver.hits}
    for o in [*empty, *filled]:
        hit = by_key[o.fire.fire_key]
        message = Webhook(SECRET).verify(hit.body, hit.headers)  # verifies, then parses JSON
        assert hit.headers["Content-Type"] == "application/json"
        assert message["type"] == "schedule.triggered"
        data = message["data"]
        assert (data["tenant"], data["trigger_id"], data["fire_key"]) == (
            o.fire.tenant,
            o.fire.trigger_id,
            o.fire.fire_key,
        )
        assert data["scheduled_at"].startswith(o.fire.scheduled_at.strftime("%Y-%m-%dT%H:%M:%S"))
        assert data["attempt"] == 1 and data["tzdata_version"] == o.fire.tzdata_version
        assert data["payload"] == (json.loads(o.payload) if o.payload else None)
    for o in raw:
        hit = by_key[o.fire.fire_key]
        assert hit.body == o.payload
        got = hit.headers.get("Content-Type")
        if o.payload:
            assert got == o.content_type
        else:
            assert got is None or "json" not in got, got
