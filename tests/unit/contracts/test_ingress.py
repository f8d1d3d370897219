from __future__ import annotations

import base64
import json
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from horae.contracts import events as ev
from horae.contracts import signing
from horae.contracts.codec import DecodeError, encode
from horae.contracts.grants import Grants
from horae.contracts.ingress import Source, decode_definition, ingest_definition
from tests.unit.contracts.samples import definition, fire

KEYS = {"acme": {"acme-1": b"acme-secret"}, "evil": {"evil-1": b"evil-secret"}}
SRC = Source("horae.definitions", 3, 42)
NOW = datetime(2025, 4, 1, tzinfo=UTC)


def sample() -> ev.TriggerDefinition:
    """The sample definition with quotas a definition may set (the codec samples' own
    ``max_concurrency`` is refused at ingest)."""
    return replace(definition(), quotas=ev.Quotas(backfill_max_fires=500))


def signed(d: ev.TriggerDefinition | None = None) -> ev.TriggerDefinition:
    return signing.sign(d or sample(), "acme-1", b"acme-secret")


def as_json(d: ev.TriggerDefinition) -> dict[str, Any]:
    """The plain JSON a tenant would write by hand for ``d``."""
    return {
        "tenant": d.tenant,
        "trigger_id": d.trigger_id,
        "version": d.version,
        "state": "live",
        "recurrence": {
            "kind": "cron",
            "expr": "0 9 * * 1-5",
            "zone": "Africa/Addis_Ababa",
            "dst_gap": "skip",
            "dst_repeat": "both",
            "start": "2025-03-30T10:00:00+03:00",
        },
        "target": {
            "kind": "webhook",
            "url": "https://hooks.acme.example/nightly",
            "headers": {"x-team": "billing"},
            "secret_refs": ["whsec-2", "whsec-1"],
        },
        "authored_at": "2025-03-30T07:00:00Z",
        "author": "alice@acme",
        "payload": '{"job": "nightly"}',
        "policies": {
            "misfire": "fire_all",
            "max_catchup": 3,
            "overlap": "buffer_one",
            "jitter_s": 30,
            "retry": {"max_attempts": 7, "base_s": 0.5, "max_s": 60},
        },
        "quotas": {"backfill_max_fires": 500},
        "description": "nightly billing run",
        "labels": {"env": "prod"},
        "signature": None
        if d.signature is None
        else {"key_id": d.signature.key_id, "value": d.signature.value},
    }


def ingest(value: bytes | None, key: bytes | None = b"acme/nightly") -> Any:
    return ingest_definition(value, key, SRC, KEYS, now=NOW)


def test_avro_and_json_decode_identically() -> None:
    d = signed()
    assert decode_definition(encode(d)) == d
    assert decode_definition(json.dumps(as_json(d)).encode()) == d
    assert ingest(encode(d)) == d
    assert ingest(json.dumps(as_json(d)).encode()) == d


def test_json_bytes_as_base64_and_micros() -> None:
    doc = as_json(signed())
    doc["payload"] = {"base64": base64.b64encode(b'{"job": "nightly"}').decode()}
    doc["authored_at"] = 1743318000 * 1_000_000
    assert decode_definition(json.dumps(doc).encode()) == signed()


@pytest.mark.parametrize(
    ("mutate", "cause", "needle"),
    [
        (lambda d: d.pop("author"), "schema", "author: required"),
        (lambda d: d.update(colour="red"), "schema", "colour: unknown field"),
        (lambda d: d["policies"].update(overlap="sometimes"), "schema", "policies.overlap"),
        (lambda d: d.update(authored_at="2025-03-30T07:00:00"), "schema", "offset"),
        (lambda d: d.update(version="3"), "schema", "version"),
        (lambda d: d["recurrence"].update(expr="61 * * * *"), "invalid", "recurrence.expr"),
        (lambda d: d["recurrence"].update(zone="Mars/Olympus"), "invalid", "zone"),
        (lambda d: d["quotas"].update(backfill_max_fires=-1), "invalid", "negative"),
        # the dispatch limits are the tenant's grant: a per-trigger value is refused, never ignored
        (lambda d: d["quotas"].update(dispatch_per_s=1.0), "invalid", "quotas.dispatch_per_s"),
        (lambda d: d["quotas"].update(catchup_share=0.1), "invalid", "quotas.catchup_share"),
        (lambda d: d["quotas"].update(max_concurrency=2), "invalid", "quotas.max_concurrency"),
    ],
)
def test_bad_json_is_quarantined_with_cause(mutate: Any, cause: str, needle: str) -> None:
    doc = as_json(signed())
    mutate(doc)
    raw = json.dumps(doc).encode()
    q = ingest(raw)
    assert isinstance(q, ev.Quarantined)
    assert (q.cause, q.original, q.source_offset) == (cause, raw, 42)
    assert needle in q.detail


@pytest.mark.parametrize(
    ("raw", "cause"),
    [(None, "tombstone"), (b"", "framing"), (b"{not json", "json"), (b"\x00\x00", "framing")],
)
def test_garbage_is_quarantined(raw: bytes | None, cause: str) -> None:
    q = ingest(raw)
    assert isinstance(q, ev.Quarantined) and q.cause == cause


def test_wrong_record_type_is_quarantined() -> None:
    q = ingest(encode(fire()))
    assert isinstance(q, ev.Quarantined) and q.cause == "type"


def test_unsigned_forged_and_cross_tenant() -> None:
    unsigned = ingest(encode(sample()))
    assert unsigned.cause == "unsigned"
    tampered = replace(signed(), author="mallory")
    assert ingest(encode(tampered)).cause == "signature"
    # evil signs a definition that claims to be acme's
    cross = signing.sign(sample(), "evil-1", b"evil-secret")
    q = ingest(encode(cross))
    assert (q.cause, q.tenant) == ("cross-tenant", "acme")
    # evil signs its own definition but keys it under acme's trigger
    own = signing.sign(replace(sample(), tenant="evil"), "evil-1", b"evil-secret")
    assert ingest(encode(own)).cause == "key"
    assert ingest(encode(own), b"evil/nightly") == own
    stranger = signing.sign(replace(sample(), tenant="nobody"), "x", b"x")
    assert ingest(encode(stranger), b"nobody/nightly").cause == "unknown-tenant"


def test_signature_survives_default_omission_and_json() -> None:
    d = signed()
    doc = as_json(d)
    doc["policies"]["horizon_s"] = 86400  # explicit default: same canonical form
    assert ingest(json.dumps(doc).encode()) == d


def test_decode_error_has_cause() -> None:
    with pytest.raises(DecodeError) as info:
        decode_definition(b"[1, 2]")
    assert info.value.cause == "framing"


def test_definition_maps_to_domain_trigger_spec() -> None:
    from horae.contracts.domain_map import recurrence_from_domain, trigger_spec

    spec = trigger_spec(sample())
    assert spec.zone == "Africa/Addis_Ababa"
    assert spec.misfire.max_fires == 3 and spec.jitter.max_ms == 30_000
    assert spec.retry.initial_ms == 500 and spec.retry.max_backoff_ms == 60_000
    assert spec.dst.gap.value == "skip" and spec.overlap.value == "buffer_one"
    r = sample().recurrence
    assert recurrence_from_domain(spec.recurrence, r.zone, start=r.start) == replace(
        r, dst_gap=ev.DstGap.SHIFT, dst_repeat=ev.DstRepeat.FIRST
    )


def test_domain_policy_limits_are_enforced_at_ingress() -> None:
    doc = as_json(signed())
    doc["policies"]["retry"]["max_attempts"] = 0
    q = ingest(json.dumps(doc).encode())
    assert q.cause == "invalid"


@pytest.mark.parametrize(
    "header",
    [
        *("Host", "content-length", "Transfer-Encoding", "Idempotency-Key", "X-Signature"),
        *("webhook-signature", "Webhook-Id", "Horae-Callback-Token", "x-horae-anything"),
    ],
)
def test_a_header_the_transport_or_horae_sets_is_refused_by_name(header: str) -> None:
    d = sample()
    d = replace(d, target=replace(d.target, headers={"x-team": "billing", header: "x"}))
    result = ingest(encode(signed(d)))
    assert isinstance(result, ev.Quarantined) and result.cause == "invalid"
    assert header in result.detail and "target.headers" in result.detail


@pytest.mark.parametrize(("body", "accepted"), [("envelope", True), ("raw", True), ("json", False)])
def test_the_body_mode_is_envelope_or_raw(body: str, accepted: bool) -> None:
    d = sample()
    result = ingest(encode(signed(replace(d, target=replace(d.target, body=body)))))
    assert isinstance(result, ev.TriggerDefinition) is accepted
    if not accepted:
        assert isinstance(result, ev.Quarantined) and "target.body" in result.detail


def test_a_header_value_with_a_line_break_is_refused() -> None:
    d = sample()
    d = replace(d, target=replace(d.target, headers={"x-team": "a\r\nHost: evil"}))
    result = ingest(encode(signed(d)))
    assert isinstance(result, ev.Quarantined) and result.cause == "invalid"


def test_secret_refs_are_checked_against_the_tenants_own_refs() -> None:
    """The sample target names whsec-2 and whsec-1 (rotation): both must be acme's."""
    value = encode(signed())

    def with_refs(refs: dict[str, frozenset[str]]) -> Any:
        grants = Grants(secret_refs=refs)
        return ingest_definition(value, b"acme/nightly", SRC, KEYS, now=NOW, grants=grants)

    assert isinstance(with_refs({"acme": frozenset({"whsec-1", "whsec-2"})}), ev.TriggerDefinition)
    other = with_refs({"acme": frozenset({"whsec-2"}), "evil": frozenset({"whsec-1"})})
    assert isinstance(other, ev.Quarantined) and other.cause == "invalid"
    assert "'whsec-1' is not a webhook secret of tenant 'acme'" in other.detail
    none = with_refs({})
    assert isinstance(none, ev.Quarantined) and "whsec-2" in none.detail


def test_a_webhook_without_secret_refs_is_refused_when_refs_are_known() -> None:
    d = sample()
    d = replace(d, target=replace(d.target, secret_refs=()))
    grants = Grants(secret_refs={"acme": frozenset({"whsec-1"})})
    result = ingest_definition(
        encode(signed(d)), b"acme/nightly", SRC, KEYS, now=NOW, grants=grants
    )
    assert isinstance(result, ev.Quarantined) and result.cause == "invalid"
    assert "needs a signing secret ref" in result.detail


@pytest.mark.parametrize(("timeout_ms", "accepted"), [(99, False), (100, True), (300_000, True),
                                                      (300_001, False), (0, False)])  # fmt: skip
def test_the_target_timeout_is_bounded(timeout_ms: int, accepted: bool) -> None:
    d = sample()
    result = ingest(encode(signed(replace(d, target=replace(d.target, timeout_ms=timeout_ms)))))
    assert isinstance(result, ev.TriggerDefinition) is accepted
    if not accepted:
        assert isinstance(result, ev.Quarantined) and "target.timeout_ms" in result.detail
