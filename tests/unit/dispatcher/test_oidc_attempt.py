"""``target.oidc`` takes effect or is refused: each attempt of a webhook target with it carries
``Authorization: Bearer <JWT>`` minted for that attempt (audience, expiry, jti); a dispatcher
without a key sends nothing and says why (``no_oidc_key``); ingress refuses it on an event
target, next to an ``Authorization`` header of the tenant's, and an empty audience, each naming
the field."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime

import jwt
import pytest

from horae.contracts import events as ev
from horae.contracts import signing
from horae.contracts.codec import decode, encode
from horae.contracts.ingress import validate_definition
from horae.contracts.topics import Topic
from horae.domain.errors import ValidationError
from horae.outbound.oidc import MemoryOidcKeys, OidcSigner, jwks
from horae.streams.dispatcher.conclude import conclude
from horae.streams.dispatcher.deliver import attempt_once
from horae.streams.dispatcher.records import OrderHeaders
from horae.testing import RecordingSender, VirtualClock
from tests.unit.contracts.test_ingress import ingest, sample
from tests.unit.dispatcher.test_send_path import CONFIG, ROUTER, T0, first_order

ISSUER = "https://horae.example"


def oidc_order(audience: str | None = None, attempt: int = 1) -> ev.DispatchOrder:
    o = first_order()
    target = replace(o.target, oidc=ev.OidcToken(audience=audience), timeout_ms=5_000)
    return replace(o, target=target, attempt=attempt)


def signer() -> tuple[OidcSigner, MemoryOidcKeys]:
    keys = MemoryOidcKeys()
    keys.rotate(T0 - 3600, 0, 30)
    return OidcSigner(ISSUER, keys, 30), keys


def test_each_attempt_carries_its_own_token() -> None:
    s, keys = signer()
    config = replace(CONFIG, oidc=s)
    sender, clock = RecordingSender(), VirtualClock(T0)
    for n in (1, 2):
        asyncio.run(attempt_once(oidc_order(attempt=n), config, sender, clock))
    tokens = [r.headers["Authorization"].removeprefix("Bearer ") for r in sender.sent]
    key = jwt.PyJWKSet.from_dict(jwks(keys.key_set(), T0, 30)).keys[0].key
    got = [
        jwt.decode(t, key, algorithms=["ES256"], audience="https://hooks.example",
                   options={"verify_exp": False, "verify_iat": False})
        for t in tokens
    ]  # fmt: skip
    fire_key = first_order().fire.fire_key
    assert [g["jti"] for g in got] == [f"{fire_key}#1", f"{fire_key}#2"]
    assert all(g["exp"] == int(T0) + 5 + 30 and g["sub"] == "acme/nightly" for g in got)
    assert all(r.headers["Idempotency-Key"] == fire_key for r in sender.sent)  # HMAC kept too
    assert all("webhook-signature" in r.headers for r in sender.sent)


def test_an_explicit_audience_and_the_dispatchers_lower_deadline() -> None:
    s, _ = signer()
    config = replace(CONFIG, oidc=s, sender=replace(CONFIG.sender, deadline_s=2.0))
    sender = RecordingSender()
    asyncio.run(attempt_once(oidc_order("api://billing"), config, sender, VirtualClock(T0)))
    token = sender.sent[0].headers["Authorization"].removeprefix("Bearer ")
    claims = jwt.decode(token, options={"verify_signature": False})
    assert claims["aud"] == "api://billing" and claims["exp"] == int(T0) + 2 + 30


def test_without_a_key_nothing_is_sent_and_the_fire_fails_saying_why() -> None:
    sender = RecordingSender()
    order = oidc_order()
    sent = asyncio.run(attempt_once(order, CONFIG, sender, VirtualClock(T0)))
    assert sender.sent == [] and sent.not_sent == ev.NotSent.NO_OIDC_KEY
    assert sent.error is not None and "target.oidc" in sent.error
    c = conclude(order, OrderHeaders(), sent, ROUTER, 0)
    outcomes = [
        decode(e.value or b"", ev.WorkOutcome)
        for e in c.emits
        if e.topic == ROUTER.names[Topic.OUTCOMES]
    ]
    assert [(o.state, o.attempts) for o in outcomes] == [(ev.OutcomeState.FAILED, 1)]
    attempts = [
        decode(e.value or b"", ev.Attempt)
        for e in c.emits
        if e.topic == ROUTER.names[Topic.ATTEMPTS]
    ]
    assert [a.not_sent for a in attempts] == [ev.NotSent.NO_OIDC_KEY]
    # a key that only signs later does not sign now either
    keys = MemoryOidcKeys()
    keys.rotate(T0, 600, 30)
    later = replace(CONFIG, oidc=OidcSigner(ISSUER, keys, 30))
    sent = asyncio.run(attempt_once(order, later, sender, VirtualClock(T0)))
    assert sender.sent == [] and sent.not_sent == ev.NotSent.NO_OIDC_KEY


def test_a_target_without_oidc_gets_no_token() -> None:
    s, _ = signer()
    sender = RecordingSender()
    asyncio.run(attempt_once(first_order(), replace(CONFIG, oidc=s), sender, VirtualClock(T0)))
    assert "Authorization" not in sender.sent[0].headers


def test_ingress_refuses_oidc_where_it_cannot_take_effect() -> None:
    d = sample()
    webhook = replace(d, target=replace(d.target, oidc=ev.OidcToken()))
    validate_definition(webhook)
    validate_definition(replace(d, target=replace(d.target, oidc=ev.OidcToken("api://x"))))
    event = replace(
        d, target=ev.Target(kind=ev.TargetKind.EVENT, topic="events.acme", oidc=ev.OidcToken())
    )
    with pytest.raises(ValidationError) as refused:
        validate_definition(event)
    assert refused.value.field == "target.oidc" and "event target" in str(refused.value)
    both = replace(webhook, target=replace(webhook.target, headers={"authorization": "Bearer x"}))
    with pytest.raises(ValidationError) as refused:
        validate_definition(both)
    assert refused.value.field == "target.headers" and "target.oidc" in str(refused.value)
    empty = replace(d, target=replace(d.target, oidc=ev.OidcToken("")))
    with pytest.raises(ValidationError) as refused:
        validate_definition(empty)
    assert refused.value.field == "target.oidc.audience"
    result = ingest(encode(_signed(event)))
    assert isinstance(result, ev.Quarantined) and result.cause == "invalid"
    assert result.detail.startswith("target.oidc: ")


def _signed(d: ev.TriggerDefinition) -> ev.TriggerDefinition:
    return signing.sign(d, "acme-1", b"acme-secret")


def test_the_field_survives_the_wire() -> None:
    d = sample()
    d = replace(d, target=replace(d.target, oidc=ev.OidcToken("api://x")))
    assert decode(encode(d), ev.TriggerDefinition).target.oidc == ev.OidcToken("api://x")
    o = oidc_order()
    assert decode(encode(o), ev.DispatchOrder).target.oidc == ev.OidcToken(None)
    assert datetime.fromtimestamp(T0, UTC)  # the orders' clock is the send path's
