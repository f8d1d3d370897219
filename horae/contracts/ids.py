"""Deterministic ids of the records Horae writes.

An id is derived from what the record is about, never drawn at random: a decision replayed after
a crash or a rebuild produces the same id, so consumers can deduplicate on it.
"""

from __future__ import annotations

import uuid


def event_id(*parts: object) -> str:
    """The UUIDv5 (URL namespace) of ``"horae:" + "|".join(map(str, parts))``: equal parts give
    equal ids, in every process and release."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "horae:" + "|".join(str(p) for p in parts)))
