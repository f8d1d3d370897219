"""Jitter: a deterministic delay spreading fires of many triggers due at the same instant.

:func:`jitter_offset` ``(trigger_key, instant, jitter_ms, next_instant) -> int`` milliseconds in
``[0, jitter_ms]``, derived from SHA-256 of ``(trigger_key, instant)``: the same in every process
and after every restart, so a replayed decision dispatches at the same moment. The offset never
reaches the next instant (it is at most ``(next_instant - instant) * 1000 - 1`` ms).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from horae.domain.errors import ValidationError
from horae.domain.serialization import check_keys, get_int

MAX_JITTER_MS = 86_400_000


def stable_unit(*parts: object) -> int:
    """A stable 64-bit unsigned integer from the text of ``parts`` (SHA-256 based)."""
    text = "\x1f".join(str(part) for part in parts)
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


def jitter_offset(trigger_key: str, instant: int, jitter_ms: int, next_instant: int | None) -> int:
    """Deterministic jitter in milliseconds for ``trigger_key`` firing at ``instant``."""
    if isinstance(jitter_ms, bool) or not 0 <= jitter_ms <= MAX_JITTER_MS:
        raise ValidationError("jitter.max_ms", jitter_ms, f"out of range 0..{MAX_JITTER_MS}")
    bound = jitter_ms
    if next_instant is not None:
        bound = min(bound, (next_instant - instant) * 1000 - 1)
    if bound <= 0:
        return 0
    return stable_unit(trigger_key, instant) % (bound + 1)


@dataclass(frozen=True, slots=True)
class JitterPolicy:
    """Maximum jitter in milliseconds (0 = fire exactly on the instant)."""

    max_ms: int = 0

    def __post_init__(self) -> None:
        value = self.max_ms
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_JITTER_MS:
            raise ValidationError("jitter.max_ms", value, f"out of range 0..{MAX_JITTER_MS}")

    def offset(self, trigger_key: str, instant: int, next_instant: int | None) -> int:
        return jitter_offset(trigger_key, instant, self.max_ms, next_instant)

    def to_dict(self) -> dict[str, Any]:
        return {"max_ms": self.max_ms}

    @classmethod
    def from_dict(cls, data: Any) -> JitterPolicy:
        body = check_keys(data, {"max_ms"}, "jitter")
        return cls(get_int(body, "max_ms", 0, "jitter", 0, MAX_JITTER_MS))
