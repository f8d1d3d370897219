"""Webhook secrets and target headers through the real broker: a definition naming another
tenant's secret ref, none, or a header Horae or the transport sets is quarantined ``invalid`` by
the planner (the header or ref named), nothing accepted or fired; a dispatcher signs a fire only
with its own tenant's secrets (another tenant holding a ref of the same name changes nothing)
and drops forbidden headers an order carries."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from horae.contracts import events as ev
from horae.contracts import signing
from horae.contracts.codec import decode
from horae.contracts.grants import Grants
from horae.contracts.topics import Topic
from horae.devstack.stack import Endpoints
from tests.integration.dispatcher import support
from tests.integration.dispatcher.support import SECRET, SECRET_REF, DispatchEnv, Receiver
from tests.integration.planner.harness import (
    PlannerEnv,
    consumed,
    decided_since,
    definition,
    ledger,
    read_all,
)
from tests.waiting import wait_until

KEY_ID, KEY = "acme-1", b"acme-secret"
OTHER_SECRET = "whsec_" + base64.b64encode(b"other-webhook-secret-456").decode()
GRANTS = Grants(
    roles={"acme": {KEY_ID: frozenset({ev.Role.AUTHOR})}},
    secret_refs={"acme": frozenset({"acme-hook"}), "other": frozenset({"other-hook"})},
)
URL = "https://hooks.example/x"

#: name -> (target, a fragment of the detail)
REFUSED = {
    "other-tenants-ref": (("other-hook",), {}, "'other-hook' is not a webhook secret of tenant"),
    "no-secret-ref": ((), {}, "a webhook target needs a signing secret ref"),
    "header-host": (("acme-hook",), {"Host": "evil.example"}, "Host"),
    "header-content-length": (("acme-hook",), {"Content-Length": "0"}, "Content-Length"),
    "header-transfer-encoding": (("acme-hook",), {"Transfer-Encoding": "chunked"}, "Transfer"),
    "header-webhook-signature": (("acme-hook",), {"webhook-signature": "v1,x"}, "webhook-sig"),
    "header-idempotency-key": (("acme-hook",), {"Idempotency-Key": "k"}, "Idempotency-Key"),
}


def put(env: PlannerEnv, name: str, refs: tuple[str, ...], headers: dict[str, str]) -> None:
    target = ev.Target(ev.TargetKind.WEBHOOK, url=URL, secret_refs=refs, headers=headers)
    env.put(signing.sign(definition(name, target=target), KEY_ID, KEY))


@pytest.fixture(scope="module")
def planned(stack: Endpoints, module_prefix: str) -> Iterator[dict[str, Any]]:
    env = PlannerEnv(stack.kafka_bootstrap, module_prefix)
    env.setup()
    try:
        put(env, "allowed", ("acme-hook",), {"X-Tenant-Header": "kept"})
        for name, (refs, headers, _) in REFUSED.items():
            put(env, name, refs, headers)
        env.start_thread("a", tenant_keys={"acme": {KEY_ID: KEY}}, grants=GRANTS)
        wait_until(lambda: consumed(env, Topic.DEFINITIONS), 90, 0.2, "definitions decided")
        wait_until(lambda: decided_since(env, 0, ["allowed"]), 60, 0.2, "the allowed one fires")
        env.stop_threads()

        def values(topic: Topic, t: type[Any]) -> list[Any]:
            return [decode(v, t) for _, v in read_all(env.bootstrap, env.topic(topic)) if v]

        yield {
            "quarantined": values(Topic.QUARANTINE, ev.Quarantined),
            "accepted": values(Topic.ACCEPTED, ev.TriggerDefinition),
            "fires": ledger(env),
        }
    finally:
        env.close()


@pytest.mark.parametrize("name", list(REFUSED))
def test_refused_at_ingress(planned: dict[str, Any], name: str) -> None:
    [refused] = [q for q in planned["quarantined"] if q.trigger_id == name]
    assert refused.cause == "invalid" and REFUSED[name][2] in refused.detail, refused.detail
    assert not [d for d in planned["accepted"] if d.trigger_id == name]
    assert not [f for f in planned["fires"] if f.trigger_id == name]


def test_own_ref_and_plain_header_accepted(planned: dict[str, Any]) -> None:
    assert not [q for q in planned["quarantined"] if q.trigger_id == "allowed"]
    [accepted] = [d for d in planned["accepted"] if d.trigger_id == "allowed"]
    assert accepted.target.headers == {"X-Tenant-Header": "kept"}


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    r.start()
    yield r
    r.stop()


def test_dispatcher_signs_only_with_the_fires_tenant_secret(
    kafka_bootstrap: str, topic_prefix: str, receiver: Receiver
) -> None:
    """Tenant ``other`` holds a ref named like acme's and the ref acme's order wrongly names:
    acme's fire verifies with acme's secret only, and the order naming ``other-hook`` is never
    sent. Forbidden headers an order carries (past ingress) are dropped, the others kept."""
    env = DispatchEnv(kafka_bootstrap, topic_prefix)
    env.setup()
    try:
        secrets = {"acme": {SECRET_REF: SECRET}, "other": {SECRET_REF: OTHER_SECRET,
                   "other-hook": OTHER_SECRET}}  # fmt: skip
        env.start(webhook_secrets=secrets)
        [t0, t1] = support.instants(2)
        own = support.order(receiver.url(), t0)
        forged = {"Host": "evil.example", "webhook-signature": "v1,forged", "X-Kept": "1"}
        own = replace(own, target=replace(own.target, headers=forged))
        theirs = support.order(receiver.url(), t1, trigger="t2")
        theirs = replace(theirs, target=replace(theirs.target, secret_refs=("other-hook",)))
        env.produce_orders([own, theirs])
        wait_until(lambda: receiver.hits, 60, 0.1, "acme's fire delivered")
        attempts = lambda: [  # noqa: E731
            a
            for a in support.events(kafka_bootstrap, env.topic(Topic.ATTEMPTS), ev.Attempt)
            if a.fire_key == theirs.fire.fire_key
        ]
        refused = wait_until(attempts, 60, 0.2, "the other-hook order recorded")[0]
    finally:
        env.close()
    [hit] = receiver.hits
    assert hit.key == own.fire.fire_key
    Webhook(SECRET).verify(hit.body, hit.headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(OTHER_SECRET).verify(hit.body, hit.headers)
    assert hit.headers["Host"] == f"127.0.0.1:{receiver.port}"
    assert hit.headers["X-Kept"] == "1"
    assert refused.error is not None and "no signing secret" in refused.error
    assert refused.not_sent == ev.NotSent.NO_SECRET
