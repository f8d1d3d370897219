"""Instants as integers, and their text forms.

The time core represents an instant as an ``int``: whole seconds since 1970-01-01T00:00:00Z
(POSIX time, no leap seconds). Integers are cheap to compare, hash, bisect and store; schedules
have one-second resolution. These helpers convert at the edges:

- :func:`to_epoch` / :func:`from_epoch`: aware :class:`datetime` <-> ``int`` (floor of fractions);
- :func:`format_utc`: RFC 3339 UTC, ``2026-03-08T07:00:00Z``;
- :func:`format_local`: wall time with offset in a zone, ``2026-03-08T03:00:00-04:00``;
- :func:`parse_instant`: RFC 3339 text (``Z`` or ``±hh:mm`` required) to ``int``.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, tzinfo

from horae.domain.errors import ValidationError

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MIN_EPOCH = int((datetime(1, 1, 2, tzinfo=UTC) - EPOCH).total_seconds())
MAX_EPOCH = int((datetime(9999, 12, 30, tzinfo=UTC) - EPOCH).total_seconds())

_RFC3339 = re.compile(
    r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?([Zz]|[+-]\d{2}:\d{2})?$"
)


def to_epoch(moment: datetime, field: str = "instant") -> int:
    """Whole seconds since the epoch (floored) of an *aware* datetime."""
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValidationError(field, moment.isoformat(), "datetime must carry a time zone")
    delta = moment - EPOCH
    return delta.days * 86400 + delta.seconds


def from_epoch(seconds: int) -> datetime:
    """The aware UTC datetime of ``seconds``."""
    return EPOCH + timedelta(seconds=seconds)


def format_utc(seconds: int) -> str:
    """RFC 3339 UTC with a ``Z``: ``2026-03-08T07:00:00Z``."""
    return from_epoch(seconds).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_local(seconds: int, zone: tzinfo) -> str:
    """Local wall time and UTC offset in ``zone``: ``2026-03-08T03:00:00-04:00``."""
    return from_epoch(seconds).astimezone(zone).isoformat(timespec="seconds")


def parse_instant(text: str, field: str = "instant", *, whole_seconds: bool = False) -> int:
    """An RFC 3339 timestamp with ``Z`` or an offset, as epoch seconds (fractions floored).

    With ``whole_seconds`` a fractional part is refused instead of floored.
    """
    if not isinstance(text, str) or not _RFC3339.match(text.strip()):
        raise ValidationError(
            field, text, "expected an RFC 3339 timestamp such as 2026-03-08T07:00:00Z"
        )
    text = text.strip()
    match = _RFC3339.match(text)
    assert match is not None
    if match.group(3) is None:
        raise ValidationError(field, text, "timestamp needs a UTC offset (Z or ±hh:mm)")
    if whole_seconds and match.group(2):
        raise ValidationError(field, text, "fractional seconds are not supported")
    try:
        moment = datetime.fromisoformat(text.replace("z", "Z").replace("t", "T"))
    except ValueError as exc:
        raise ValidationError(field, text, f"invalid timestamp: {exc}") from None
    seconds = to_epoch(moment, field)
    if not MIN_EPOCH <= seconds <= MAX_EPOCH:
        raise ValidationError(field, text, "timestamp out of range")
    return seconds
