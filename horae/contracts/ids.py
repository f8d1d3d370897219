"""Deterministic ids of the records Horae writes.

An id is derived from what the record is about, never drawn at random: a decision replayed after
a crash or a rebuild produces the same id, so consumers can deduplicate on it.
"""

from __future__ import annotations

import hashlib
import uuid

_NAMESPACE = uuid.NAMESPACE_URL.bytes


def event_id(*parts: object) -> str:
    """The UUIDv5 (URL namespace) of ``"horae:" + "|".join(map(str, parts))``: equal parts give
    equal ids, in every process and release. The same string as ``str(uuid.uuid5(...))``, built
    from the SHA-1 digest without a ``UUID`` object (a third of the cost; tested equal)."""
    name = "horae:" + "|".join(map(str, parts))
    raw = bytearray(hashlib.sha1(_NAMESPACE + name.encode()).digest()[:16])
    raw[6] = (raw[6] & 0x0F) | 0x50  # version 5
    raw[8] = (raw[8] & 0x3F) | 0x80  # RFC 4122 variant
    x = raw.hex()
    return f"{x[:8]}-{x[8:12]}-{x[12:16]}-{x[16:20]}-{x[20:]}"
