"""W3C Trace Context ``traceparent`` values (``00-<32 hex trace id>-<16 hex
parent id>-<2 hex flags>``, lower-case, neither id all zeros). Pure functions: randomness is an
argument where it matters.

The trace context travels beside the contracts, never inside them: as the Kafka record header
:data:`HEADER` and the HTTP request header of the same name. A malformed value is *ignored*
(:func:`parse` returns ``None``), never an error: a bad header from a tenant must not refuse a
request nor stall a partition shared by tenants.

* :func:`parse` validates a value and returns a :class:`TraceParent`, or ``None``;
* :func:`child` keeps the trace id and flags and takes a new span id (one per attempt);
* :func:`new_root` starts a trace when none came in;
* :func:`from_headers` reads the header from a Kafka record's header list (``None`` safe).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

#: the header's name, on Kafka records and HTTP requests alike
HEADER = "traceparent"
#: the only version this module writes; a higher version is read by its first four fields
VERSION = "00"
#: the ``sampled`` flag
SAMPLED = 0x01

_FORMAT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?")
_ZERO_TRACE = "0" * 32
_ZERO_SPAN = "0" * 16


@dataclass(frozen=True, slots=True)
class TraceParent:
    """One valid trace context: ``trace_id`` (32 hex), ``span_id`` (16 hex, the parent id of
    whatever is sent with it), ``flags`` (0..255)."""

    trace_id: str
    span_id: str
    flags: int = SAMPLED

    def __str__(self) -> str:
        return f"{VERSION}-{self.trace_id}-{self.span_id}-{self.flags:02x}"

    @property
    def sampled(self) -> bool:
        return bool(self.flags & SAMPLED)


def parse(value: str | bytes | None) -> TraceParent | None:
    """The trace context in ``value``, or ``None`` when it is absent or malformed (wrong shape,
    upper-case hex, an all-zero id, version ``ff``, or extra fields on version ``00``). A later
    version is read by its first four fields, as the W3C recommendation asks."""
    if value is None:
        return None
    if isinstance(value, bytes):
        try:
            value = value.decode("ascii")
        except UnicodeDecodeError:
            return None
    if len(value) > 512:
        return None
    match = _FORMAT.fullmatch(value.strip())
    if match is None:
        return None
    version, trace_id, span_id, flags, rest = match.groups()
    if version == "ff" or (version == VERSION and rest is not None):
        return None
    if trace_id == _ZERO_TRACE or span_id == _ZERO_SPAN:
        return None
    return TraceParent(trace_id, span_id, int(flags, 16))


def _random_hex(size: int, randbytes: Callable[[int], bytes]) -> str:
    while True:
        value = randbytes(size).hex()
        if value.strip("0"):
            return value


def child(parent: TraceParent, randbytes: Callable[[int], bytes] = os.urandom) -> TraceParent:
    """The same trace (id and flags) with a new, random, non-zero span id."""
    return TraceParent(parent.trace_id, _random_hex(8, randbytes), parent.flags)


def new_root(randbytes: Callable[[int], bytes] = os.urandom) -> TraceParent:
    """A new trace, sampled."""
    return TraceParent(_random_hex(16, randbytes), _random_hex(8, randbytes), SAMPLED)


def from_headers(headers: Sequence[tuple[str, str | bytes | None]] | None) -> TraceParent | None:
    """The valid trace context among a Kafka record's headers (the first ``traceparent``
    header), or ``None``."""
    if not headers:
        return None
    for key, value in headers:
        if key == HEADER:
            return parse(value)
    return None
