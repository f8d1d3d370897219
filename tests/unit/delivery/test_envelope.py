"""The webhook body: the Standard Webhooks envelope by default (accepted by the reference
library whatever the payload), the raw payload with its own content type on request."""

from __future__ import annotations

import base64
import json
import time
from dataclasses import replace
from datetime import UTC, datetime

import pytest
from standardwebhooks import Webhook

from horae.contracts import events as ev
from horae.delivery.envelope import webhook_body
from horae.domain.keys import FireKey, Origin
from horae.outbound import attempt_headers
from horae.outbound.signing import SigningKeys

SECRET = "whsec_" + base64.b64encode(b"k" * 32).decode()
AT = datetime(2026, 3, 8, 7, 0, tzinfo=UTC)


def _order(
    payload: bytes, content_type: str = "application/json", body: str = "envelope"
) -> ev.DispatchOrder:
    key = FireKey("acme", "nightly", int(AT.timestamp()), 0, Origin.SCHEDULED)
    fire = ev.FireRecord(
        fire_key=key.canonical(), key_hash=key.short_hash(), tenant="acme", trigger_id="nightly",
        origin=Origin.SCHEDULED, scheduled_at=AT, sequence=0, jitter_ms=1500,
        due_at=datetime(2026, 3, 8, 7, 0, 1, 500000, tzinfo=UTC), decided_at=AT,
        state=ev.FireState.FIRED, trigger_version=1, tzdata_version="2025b",
        target_kind=ev.TargetKind.WEBHOOK, lane=ev.Lane.ON_TIME,
    )  # fmt: skip
    target = ev.Target(kind=ev.TargetKind.WEBHOOK, url="https://h.example/x", body=body)
    return ev.DispatchOrder(
        fire=fire, target=target, lane=ev.Lane.ON_TIME, attempt=2, not_before=AT,
        payload=payload, content_type=content_type,
    )  # fmt: skip


def _received(order: ev.DispatchOrder) -> tuple[object, dict[str, str]]:
    """What a receiver on the reference library gets (it verifies, then parses JSON)."""
    body, content_type = webhook_body(order)
    keys = SigningKeys.from_secrets(SECRET)
    now = time.time()  # the library checks the stamp against its own clock
    headers = attempt_headers(
        body=body, fire_key=order.fire.fire_key, keys=keys, now=now, content_type=content_type
    )
    return Webhook(SECRET).verify(body, headers), headers


@pytest.mark.parametrize(
    ("payload", "content_type", "expected"),
    [
        (b"", "application/json", {"payload": None}),
        (b'{"job": "nightly"}', "application/json", {"payload": {"job": "nightly"}}),
        (b"[1, 2]", "application/vnd.acme+json; charset=utf-8", {"payload": [1, 2]}),
        (b"not json", "application/json", {"payload": None, "payload_base64": "bm90IGpzb24="}),
        (b"\x00\xff", "application/octet-stream", {"payload": None, "payload_base64": "AP8="}),
    ],
)
def test_the_envelope_is_accepted_by_the_reference_library_whatever_the_payload(
    payload: bytes, content_type: str, expected: dict[str, object]
) -> None:
    message, headers = _received(_order(payload, content_type))
    assert headers["Content-Type"] == "application/json"
    assert message == {
        "type": "schedule.triggered",
        "timestamp": "2026-03-08T07:00:01.500000Z",
        "data": {
            "tenant": "acme",
            "trigger_id": "nightly",
            "scheduled_at": "2026-03-08T07:00:00Z",
            "due_at": "2026-03-08T07:00:01.500000Z",
            "fire_key": "v1/acme/nightly/2026-03-08T07:00:00Z/0/scheduled",
            "origin": "scheduled",
            "attempt": 2,
            "tzdata_version": "2025b",
            "content_type": content_type,
            **expected,
        },
    }


def test_the_envelope_differs_between_attempts_only_by_the_attempt() -> None:
    order = _order(b'{"a": 1}')
    first = json.loads(webhook_body(replace(order, attempt=1))[0])
    second = json.loads(webhook_body(order)[0])
    assert first["data"].pop("attempt") == 1 and second["data"].pop("attempt") == 2
    assert first == second


def test_raw_sends_the_tenant_bytes_with_their_content_type_and_no_label_when_empty() -> None:
    assert webhook_body(_order(b"a,b\n", "text/csv", "raw")) == (b"a,b\n", "text/csv")
    assert webhook_body(_order(b"", "application/json", "raw")) == (b"", None)
    keys = SigningKeys.from_secrets(SECRET)
    headers = attempt_headers(body=b"", fire_key="k", keys=keys, now=0, content_type=None)
    assert "Content-Type" not in headers


@pytest.mark.parametrize("jittered", [False, True])
def test_the_bytes_are_the_compact_sorted_json_of_the_envelope(jittered: bool) -> None:
    """One RFC 3339 string serves ``scheduled_at``, ``due_at`` and ``timestamp`` when the instants
    are equal; the bytes stay exactly ``json.dumps(..., separators, sort_keys=True)``."""
    order = _order(b'{"b": 1, "a": [true, null]}')
    if not jittered:
        order = replace(order, fire=replace(order.fire, due_at=AT))
    body, _ = webhook_body(order)
    fire = order.fire
    expected = {
        "type": "schedule.triggered",
        "timestamp": fire.due_at.isoformat().replace("+00:00", "Z"),
        "data": {
            "tenant": "acme",
            "trigger_id": "nightly",
            "scheduled_at": "2026-03-08T07:00:00Z",
            "due_at": fire.due_at.isoformat().replace("+00:00", "Z"),
            "fire_key": fire.fire_key,
            "origin": "scheduled",
            "attempt": 2,
            "tzdata_version": "2025b",
            "content_type": "application/json",
            "payload": {"b": 1, "a": [True, None]},
        },
    }
    assert body == json.dumps(expected, separators=(",", ":"), sort_keys=True).encode()
