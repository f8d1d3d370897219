"""Definitions ingress: decode, validate and authenticate one record of the definitions topic.

Tenants may produce definitions straight to Kafka, as wire Avro or as plain JSON validated against
the same schema (kcat-friendly). Every definition must be signed with one of its tenant's ingress
keys (see :mod:`horae.contracts.signing` and ``docs/contracts.md``); the record key must be the
trigger key ``<tenant>/<trigger_id>`` of the body. :func:`ingest_definition` never raises on bad
input: it returns a :class:`~horae.contracts.events.Quarantined` with the cause (built by the one
factory, :func:`horae.contracts.quarantine.quarantine`), which the caller appends to the
quarantine topic and otherwise ignores (it changes nothing).

Quarantine causes: ``tombstone``, ``framing``, ``schema-id``, ``avro``, ``type``, ``json``,
``schema``, ``invalid``, ``key``, ``unsigned``, ``unknown-tenant``, ``cross-tenant``, ``signature``
(the planner adds ``forbidden``: :mod:`horae.contracts.grants`). Tenant target headers may not set
the transport's or Horae's own headers (:func:`forbidden_header`, cause ``invalid``).

Every text field of a definition or command keeps the rules of :mod:`horae.contracts.textrules`
(text that is UTF-8 and holds no control character, caps, the allowed methods, RFC 9110 header
names and values, JSON nesting): a refusal is cause ``invalid`` with the field named in the
detail. Commands are decoded by :func:`decode_command` under the same rules.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

import fastavro

from horae.contracts import events as ev
from horae.contracts import signing
from horae.contracts.codec import Codec, DecodeError, default_codec, to_event
from horae.contracts.domain_map import CHECKED_SPECS, check_zone, recurrence_to_domain, spec_of
from horae.contracts.grants import Grants
from horae.contracts.jsonform import coerce
from horae.contracts.memo import INGEST_MEMO
from horae.contracts.quarantine import quarantine
from horae.contracts.textrules import check_command, check_definition, json_problem
from horae.delivery.table import deliverer
from horae.domain.errors import ValidationError
from horae.domain.trigger import TriggerSpec
from horae.ports import Record

#: tenant -> key id -> secret. A key id must be unique across tenants (e.g. prefixed by tenant).
TenantKeys = Mapping[str, Mapping[str, bytes]]
NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}\Z")  # \Z: "$" would allow a final newline
#: Headers a tenant's target may not set (compared lower-case): transport framing, which the
#: SSRF pinning and the sender own, and every signature, idempotency or Horae header the
#: dispatcher sets (``Content-Type`` may be set; the definition's ``content_type`` wins).
FORBIDDEN_HEADERS = frozenset(
    {"host", "content-length", "transfer-encoding", "connection", "keep-alive", "te", "trailer"}
    | {"upgrade", "proxy-authorization", "proxy-connection", "idempotency-key", "x-signature"}
)
FORBIDDEN_HEADER_PREFIXES = ("webhook-", "horae-", "x-horae-")
#: bounds of ``Target.timeout_ms`` (the dispatcher's own deadline may cut an attempt shorter)
MIN_TIMEOUT_MS, MAX_TIMEOUT_MS = 100, 300_000


def forbidden_header(name: str) -> bool:
    """Whether a tenant header named ``name`` is refused at ingress and dropped at dispatch."""
    lower = name.lower()
    return lower in FORBIDDEN_HEADERS or lower.startswith(FORBIDDEN_HEADER_PREFIXES)


@dataclass(frozen=True)
class Source:
    """Where a record came from."""

    topic: str
    partition: int
    offset: int


def decode_definition(data: bytes, codec: Codec | None = None) -> ev.TriggerDefinition:
    """A definition from wire Avro (magic byte 0) or a JSON object; raises :class:`DecodeError`.

    JSON goes through the Avro schema (defaults filled, then an Avro write and read), so both
    forms of one definition produce equal values."""
    codec = codec or default_codec()
    if data[:1] == b"\x00":
        try:
            return codec.decode(data, ev.TriggerDefinition)
        except DecodeError as exc:
            raise _not_utf8(data, codec, ev.TriggerDefinition, exc) from exc
    if not data.lstrip()[:1] == b"{":
        raise DecodeError("framing", "neither wire Avro (magic byte 0) nor a JSON object")
    try:
        obj = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise DecodeError("json", str(exc)) from exc
    problem = json_problem(obj)
    if problem is not None:
        raise DecodeError("invalid", f"{problem[0]}: {problem[1]}")
    schema = codec.current.raw[ev.TriggerDefinition]
    parsed = codec.current.parsed[ev.TriggerDefinition]
    datum = coerce(schema, obj)
    buf = io.BytesIO()
    try:
        fastavro.schemaless_writer(buf, parsed, datum)
        buf.seek(0)
        normal = fastavro.schemaless_reader(buf, parsed, parsed)
    except Exception as exc:  # e.g. a value out of an Avro type's range
        raise DecodeError("schema", f"{type(exc).__name__}: {exc}") from exc
    assert isinstance(normal, dict)
    return to_event(ev.TriggerDefinition, normal)


def _not_utf8(
    data: bytes, codec: Codec, t: type[ev.TriggerDefinition] | type[ev.Command], exc: DecodeError
) -> DecodeError:
    """``exc``, or, when wire Avro of the current schema failed on text that is not UTF-8, the
    refusal naming the field: the record read again with each such byte kept as an escape, for
    the text rules to find (only on this failure path)."""
    if "UnicodeDecodeError" not in exc.detail or data[:5] != codec.header(t):
        return exc
    try:
        buf = io.BytesIO(data)
        buf.seek(5)
        datum = fastavro.schemaless_reader(
            buf, codec.current.parsed[t], None, handle_unicode_errors="surrogateescape"
        )
        assert isinstance(datum, dict)
        value = to_event(t, datum)
        if isinstance(value, ev.TriggerDefinition):
            validate_definition(value)
        else:
            check_command(value)
    except ValidationError as named:
        return DecodeError("invalid", str(named))
    except Exception:
        return exc
    return exc


def decode_command(data: bytes, codec: Codec | None = None) -> ev.Command:
    """A command from wire Avro whose text fields keep :mod:`horae.contracts.textrules`; raises
    :class:`DecodeError` (cause ``invalid``, the field named, for a rule broken)."""
    codec = codec or default_codec()
    try:
        command = codec.decode(data, ev.Command)
    except DecodeError as exc:
        raise _not_utf8(data, codec, ev.Command, exc) from exc
    try:
        check_command(command)
    except ValidationError as exc:
        raise DecodeError("invalid", str(exc)) from exc
    return command


def accepted_value(raw: bytes | None, codec: Codec | None = None) -> bytes | None:
    """The value of an accepted definition's copy (``definitions.accepted``) when the record it
    was read from already is one: wire Avro under the writer schema id the codec writes
    definitions with (so its body was read with that very schema); else None (encode it). Its
    bytes are kept as produced — an Avro encoding of the same definition (a producer's block or
    varint layout, which may differ from the codec's, decodes to the same value). Only while
    :data:`~horae.contracts.memo.INGEST_MEMO` is on; off: always None."""
    if not INGEST_MEMO.enabled or raw is None:
        return None
    codec = codec or default_codec()
    return raw if raw[:5] == codec.header(ev.TriggerDefinition) else None


UNSET_QUOTAS = ev.Quotas()
PER_TRIGGER_LIMIT = (
    "per-trigger dispatch limits are not applied: the tenant's grant governs (HORAE_TENANT_GRANTS);"
    " leave it at its default"
)


def domain_checked(r: ev.Recurrence, p: ev.Policies) -> TriggerSpec:
    """The domain spec of the recurrence (expression, zone, count) and policies, through the
    domain's own validation; raises :class:`ValidationError`. A pure function of two frozen
    values: while :data:`~horae.contracts.memo.INGEST_MEMO` is on, the spec of a pair checked
    recently is returned without checking again (most definitions share theirs; a refusal is
    not remembered: it raises again), and the planner's index takes it from there
    (:data:`~horae.contracts.domain_map.CHECKED_SPECS`)."""
    if not INGEST_MEMO.enabled:
        return _domain_check(r, p)
    spec = CHECKED_SPECS.get(r, p)
    if spec is None:
        spec = _domain_check(r, p)
        CHECKED_SPECS.put(r, p, spec)
    return spec


def _domain_check(r: ev.Recurrence, p: ev.Policies) -> TriggerSpec:
    recurrence_to_domain(r)
    check_zone(r.zone)
    if r.count is not None and r.count < 1:
        raise ValidationError("recurrence.count", r.count, "at least 1")
    return spec_of(r, p)


#: bounds of ``policies.retry.max_event_age_s`` and ``max_retry_duration_s`` (1 s .. 7 days)
MAX_AGE_BOUND_S = 7 * 86400


def check_bounded_age(d: ev.TriggerDefinition) -> None:
    """``policies.retry.max_event_age_s`` and ``max_retry_duration_s``: null or 1 s .. 7 days;
    a retry duration only where there are retries (a target the dispatcher sends to: an event
    target's fire is written with its decision, never retried)."""
    r = d.policies.retry
    for name, value in (
        ("max_event_age_s", r.max_event_age_s),
        ("max_retry_duration_s", r.max_retry_duration_s),
    ):
        if value is not None and not 1 <= value <= MAX_AGE_BOUND_S:
            raise ValidationError(
                f"policies.retry.{name}", value, f"out of range 1..{MAX_AGE_BOUND_S} seconds"
            )
    if r.max_retry_duration_s is not None and not deliverer(d.target.kind).in_flight:
        raise ValidationError(
            "policies.retry.max_retry_duration_s",
            r.max_retry_duration_s,
            f"a {d.target.kind.value} target is never retried (its event is written with the "
            "fire's decision): leave it null",
        )


def check_completion(d: ev.TriggerDefinition) -> None:
    """``policies.action_after_completion`` ``delete`` only on a trigger that completes: one with
    ``recurrence.count`` or ``recurrence.end``, or an ``at`` recurrence."""
    if d.policies.action_after_completion is not ev.ActionAfterCompletion.DELETE:
        return
    r = d.recurrence
    if r.count is None and r.end is None and r.kind is not ev.RecurrenceKind.AT:
        raise ValidationError(
            "policies.action_after_completion",
            d.policies.action_after_completion.value,
            "the trigger never completes: delete after completion needs recurrence.count, "
            "recurrence.end or an at recurrence",
        )


def validate_definition(d: ev.TriggerDefinition) -> None:
    """Structural and domain validation; raises :class:`ValidationError` naming the field."""
    for field, value in (("tenant", d.tenant), ("trigger_id", d.trigger_id)):
        if not NAME.fullmatch(value):
            raise ValidationError(field, value, "expected 1-63 chars of a-z 0-9 . _ - ")
    check_definition(d)
    if d.version < 1:
        raise ValidationError("version", d.version, "versions start at 1")
    check_bounded_age(d)
    check_completion(d)
    domain_checked(d.recurrence, d.policies)
    t = d.target
    deliverer(t.kind).validate(d.tenant, t)
    if not MIN_TIMEOUT_MS <= t.timeout_ms <= MAX_TIMEOUT_MS:
        raise ValidationError(
            "target.timeout_ms", t.timeout_ms, f"expected {MIN_TIMEOUT_MS}..{MAX_TIMEOUT_MS} ms"
        )
    if t.body not in ("envelope", "raw"):
        raise ValidationError("target.body", t.body, "expected envelope or raw")
    for name in t.headers:
        if forbidden_header(name):
            raise ValidationError("target.headers", name, "a header Horae or the transport sets")
    p = d.policies
    for field, number in (
        ("policies.max_catchup", p.max_catchup),
        ("policies.horizon_s", p.horizon_s),
        ("policies.jitter_s", p.jitter_s),
        ("policies.retry.base_s", p.retry.base_s),
    ):
        if number < 0:
            raise ValidationError(field, number, "must not be negative")
    if p.retry.max_attempts < 1:
        raise ValidationError("policies.retry.max_attempts", p.retry.max_attempts, "at least 1")
    q = d.quotas
    if q.backfill_max_fires < 0:
        raise ValidationError("quotas.backfill_max_fires", q.backfill_max_fires, "negative")
    for field, asked in (
        ("quotas.dispatch_per_s", q.dispatch_per_s),
        ("quotas.catchup_share", q.catchup_share),
        ("quotas.max_concurrency", q.max_concurrency),
    ):
        if asked != getattr(UNSET_QUOTAS, field.removeprefix("quotas.")):
            raise ValidationError(field, asked, PER_TRIGGER_LIMIT)


def verify_definition(d: ev.TriggerDefinition, tenant_keys: TenantKeys) -> tuple[str, str] | None:
    """``None`` if ``d`` is signed by a key of its own tenant, else ``(cause, detail)``."""
    if d.signature is None:
        return "unsigned", "definitions produced to Kafka must be signed"
    keys = tenant_keys.get(d.tenant)
    if keys is None:
        return "unknown-tenant", f"tenant {d.tenant!r} has no ingress key"
    if d.signature.key_id not in keys:
        owner = next((t for t, ks in tenant_keys.items() if d.signature.key_id in ks), None)
        if owner is not None:
            return "cross-tenant", f"signed with a key of tenant {owner!r} for {d.tenant!r}"
    problem = signing.check(d, keys)
    return None if problem is None else ("signature", problem)


def ingest_definition(
    raw_value: bytes | None,
    raw_key: bytes | None,
    source: Source,
    tenant_keys: TenantKeys,
    *,
    now: datetime | None = None,
    codec: Codec | None = None,
    grants: Grants | None = None,
) -> ev.TriggerDefinition | ev.Quarantined:
    """The accepted definition, or the quarantine record saying why it was refused. With
    ``grants``, a webhook target must name secret refs of its own tenant (else ``invalid``);
    roles and ceilings are the planner's to check (they depend on the version held)."""
    at = now or datetime.now(UTC)

    def refuse(cause: str, detail: str, d: ev.TriggerDefinition | None) -> ev.Quarantined:
        record = Record(source.topic, source.partition, source.offset, raw_key, raw_value)
        return quarantine(record, cause, detail, at, d)

    if raw_value is None:
        return refuse("tombstone", "definitions are deleted with state=deleted", None)
    try:
        d = decode_definition(raw_value, codec)
    except DecodeError as exc:
        return refuse(exc.cause, exc.detail, None)
    try:
        validate_definition(d)
    except ValidationError as exc:
        return refuse("invalid", str(exc), d)
    expected = ev.trigger_key(d.tenant, d.trigger_id).encode()
    if raw_key != expected:
        return refuse("key", f"record key {raw_key!r} is not {expected!r}", d)
    refused = verify_definition(d, tenant_keys)
    if refused is not None:
        return refuse(*refused, d)
    problem = None if grants is None else grants.check_secret_refs(d)
    if problem is not None:
        return refuse("invalid", problem, d)
    return d
