"""Signatures on tenant-produced events (definitions, commands): HMAC-SHA256 with one of the
tenant's ingress keys over the canonical JSON form (:func:`horae.contracts.jsonform.canonical`)
of the event without its ``signature`` field, prefixed by a domain-separation tag.

The canonical form omits every field equal to its schema default, so a signature stays valid when
the schema later gains defaulted fields, and the same definition produced as Avro or as JSON has
the same signature.
"""

from __future__ import annotations

import hashlib
import hmac
import uuid
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TypeVar

from horae.contracts._reflect import to_avro
from horae.contracts.canonical_json import canonical_writer
from horae.contracts.codec import default_codec
from horae.contracts.events import (
    TENANT_WIDE,
    Command,
    CommandKind,
    Role,
    Signature,
    TriggerDefinition,
)
from horae.contracts.jsonform import canonical
from horae.contracts.memo import INGEST_MEMO

TAG = b"horae-signature-v1\n"
OMIT = ("signature",)
S = TypeVar("S", TriggerDefinition, Command)


def signing_bytes(event: TriggerDefinition | Command) -> bytes:
    """The exact bytes a signature covers. While :data:`~horae.contracts.memo.INGEST_MEMO` is
    on, written by the compiled writer of the event's schema
    (:mod:`horae.contracts.canonical_json`: the same bytes), else by the generic walk."""
    schema = default_codec().current.raw[type(event)]
    if INGEST_MEMO.enabled:
        return TAG + canonical_writer(type(event), schema, OMIT)(event)
    return TAG + canonical(schema, to_avro(event), omit=OMIT)


def signature_value(event: TriggerDefinition | Command, key: bytes) -> str:
    return hmac.digest(key, signing_bytes(event), hashlib.sha256).hex()  # one-shot, in C


def sign(event: S, key_id: str, key: bytes) -> S:
    """``event`` with a signature by ``key`` (named ``key_id``)."""
    return replace(event, signature=Signature(key_id=key_id, value=signature_value(event, key)))


def tenant_command(
    tenant: str,
    kind: CommandKind,
    reason: str | None,
    now: datetime,
    *,
    key_id: str,
    key: bytes,
    ttl_s: int,
) -> Command:
    """A tenant-wide command (suspend, resume) signed with the platform key ``key`` (named
    ``key_id``), requested at ``now`` (whole seconds) and valid for ``ttl_s`` seconds."""
    command = Command(
        command_id=f"tenant-{kind.value}-{uuid.uuid4().hex}",
        tenant=tenant,
        trigger_id=TENANT_WIDE,
        kind=kind,
        requested_by=key_id,
        role=Role.PLATFORM,
        requested_at=now.replace(microsecond=0),
        reason=reason,
        expires_at=now + timedelta(seconds=ttl_s),
    )
    return sign(command, key_id, key)


def check(event: TriggerDefinition | Command, keys: Mapping[str, bytes]) -> str | None:
    """``None`` if ``event`` is signed by one of ``keys`` (key id -> secret); else why not."""
    sig = event.signature
    if sig is None:
        return "unsigned"
    if sig.alg != "hmac-sha256":
        return f"unsupported signature algorithm {sig.alg!r}"
    key = keys.get(sig.key_id)
    if key is None:
        return f"key {sig.key_id!r} is not a key of tenant {event.tenant!r}"
    if not hmac.compare_digest(sig.value, signature_value(event, key)):
        return f"signature by {sig.key_id!r} does not match the content"
    return None
