"""Fire keys: the identity of one decision, derived from the trigger and the instant.

``FireKey(tenant, trigger, scheduled, sequence=0, origin=scheduled)``; ``scheduled`` is the instant
in epoch seconds (UTC). :meth:`FireKey.canonical` is the stable text form::

    v1/<tenant>/<trigger>/<scheduled RFC 3339 UTC>/<sequence>/<origin>
    v1/acme/nightly-report/2026-03-08T07:00:00Z/0/scheduled

with tenant and trigger percent-encoded (RFC 3986 unreserved characters kept) so that ``/`` in an
id cannot forge another key; :meth:`FireKey.parse` inverts it. :meth:`FireKey.short_hash` is the
first 20 hex digits of SHA-256 of the canonical form. Both are identical across processes, hosts and
restarts (no ``hash()``, no randomness). Origin is part of the key: a manual run at the same instant
as a scheduled fire has its own key.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from typing import Any
from urllib.parse import quote, unquote

from horae.domain.dst import enum_value
from horae.domain.errors import ValidationError
from horae.domain.serialization import check_keys, get_int, get_str
from horae.domain.timefmt import MAX_EPOCH, MIN_EPOCH, format_utc, parse_instant

VERSION = "v1"
MAX_ID_LENGTH = 256
MAX_SEQUENCE = 2**31 - 1
_UNRESERVED = re.compile(r"[A-Za-z0-9._~-]+")  # what quote(..., safe="") leaves as it is


def _escaped(text: str) -> str:
    if text.isascii() and text.isalnum():  # the common id, without the regex
        return text
    return text if _UNRESERVED.fullmatch(text) else quote(text, safe="")


@lru_cache(maxsize=4096)
def _instant_text(scheduled: int) -> str:
    return format_utc(scheduled)  # cached: a peak second is one instant for many triggers


def canonical_text(tenant: str, trigger: str, scheduled: int, sequence: int, origin: str) -> str:
    """:meth:`FireKey.canonical` of parts already valid (the planner's hot path: no object)."""
    when = _instant_text(scheduled)
    return f"{VERSION}/{_escaped(tenant)}/{_escaped(trigger)}/{when}/{sequence}/{origin}"


def short_hash_of(canonical: str) -> str:
    """:meth:`FireKey.short_hash` of a canonical form already at hand."""
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:20]


class Origin(StrEnum):
    SCHEDULED = "scheduled"
    MANUAL = "manual"
    BACKFILL = "backfill"


@dataclass(frozen=True, slots=True)
class FireKey:
    tenant: str
    trigger: str
    scheduled: int
    sequence: int = 0
    origin: Origin = Origin.SCHEDULED

    def __post_init__(self) -> None:
        for name in ("tenant", "trigger"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value or len(value) > MAX_ID_LENGTH:
                raise ValidationError(name, value, f"must be 1..{MAX_ID_LENGTH} characters")
        scheduled = self.scheduled
        if isinstance(scheduled, bool) or not isinstance(scheduled, int):
            raise ValidationError("scheduled", scheduled, "expected epoch seconds")
        if not MIN_EPOCH <= scheduled <= MAX_EPOCH:
            raise ValidationError("scheduled", scheduled, "instant out of range")
        sequence = self.sequence
        if isinstance(sequence, bool) or not isinstance(sequence, int):
            raise ValidationError("sequence", sequence, "expected an integer")
        if not 0 <= sequence <= MAX_SEQUENCE:
            raise ValidationError("sequence", sequence, f"out of range 0..{MAX_SEQUENCE}")
        object.__setattr__(self, "origin", enum_value(Origin, self.origin, "origin"))

    def canonical(self) -> str:
        return canonical_text(
            self.tenant, self.trigger, self.scheduled, self.sequence, self.origin.value
        )

    def short_hash(self) -> str:
        return short_hash_of(self.canonical())

    def __str__(self) -> str:
        return self.canonical()

    @classmethod
    def parse(cls, text: str) -> FireKey:
        parts = text.split("/") if isinstance(text, str) else []
        if len(parts) != 6 or parts[0] != VERSION or not parts[4].isdigit():
            raise ValidationError("fire_key", text, "not a canonical v1 fire key")
        try:
            tenant = unquote(parts[1], errors="strict")
            trigger = unquote(parts[2], errors="strict")
        except UnicodeDecodeError:
            raise ValidationError("fire_key", text, "invalid percent-encoding") from None
        return cls(
            tenant=tenant,
            trigger=trigger,
            scheduled=parse_instant(parts[3], "fire_key.scheduled", whole_seconds=True),
            sequence=int(parts[4]),
            origin=enum_value(Origin, parts[5], "fire_key.origin"),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "tenant": self.tenant,
            "trigger": self.trigger,
            "scheduled": format_utc(self.scheduled),
            "sequence": self.sequence,
            "origin": self.origin.value,
        }

    @classmethod
    def from_dict(cls, data: Any) -> FireKey:
        body = check_keys(data, {"tenant", "trigger", "scheduled", "sequence", "origin"}, "")
        scheduled = get_str(body, "scheduled", None, "")
        return cls(
            tenant=get_str(body, "tenant", None, ""),
            trigger=get_str(body, "trigger", None, ""),
            scheduled=parse_instant(scheduled, "scheduled", whole_seconds=True),
            sequence=get_int(body, "sequence", 0, "", 0, MAX_SEQUENCE),
            origin=enum_value(Origin, body.get("origin", "scheduled"), "origin"),
        )
