"""What an HTTP sender refuses to put on the wire: a request that is not HTTP (pure).

Contract: :func:`check_sendable` raises :class:`Unsendable`, naming the part and why, for

- a method that is not an RFC 9110 token (``GE T``, ``POST\\r\\nX: y``, the empty string);
- a header whose name is not a token, or whose value holds CR, LF, NUL or another control
  character but horizontal tab (RFC 9110 section 5.5: a field value is visible characters,
  spaces and tabs; obs-text, bytes >= 0x80, is kept).

Both senders (:mod:`horae.outbound.http_sender`, :mod:`horae.outbound.lean_http`) call it before
anything else, so such an attempt resolves no name, opens no connection and sends no byte; they
raise it instead of returning an :class:`~horae.outbound.results.AttemptResult` because it is not
a transport failure: the same order fails the same way on every attempt. The dispatcher concludes
it at once as a failed fire (:mod:`horae.streams.dispatcher.deliver`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_BAD_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


class Unsendable(ValueError):
    """A request no HTTP sender may send (see the module docstring): ``part`` names what is
    wrong (``method``, ``headers[NAME]``), ``reason`` says why."""

    def __init__(self, part: str, reason: str) -> None:
        super().__init__(f"{part}: {reason}")
        self.part = part
        self.reason = reason


def check_sendable(method: str, headers: Mapping[str, str]) -> None:
    """Raise :class:`Unsendable` unless ``method`` and ``headers`` can be sent as HTTP/1.1."""
    if not _TOKEN.fullmatch(method):
        raise Unsendable("method", f"{method[:64]!r} is not an HTTP method (an RFC 9110 token)")
    for name, value in headers.items():
        if not _TOKEN.fullmatch(name):
            raise Unsendable(f"headers[{name[:64]!r}]", "the name is not an RFC 9110 token")
        bad = _BAD_VALUE.search(value)
        if bad is not None:
            raise Unsendable(
                f"headers[{name[:64]!r}]",
                f"the value holds the control character {bad.group()!r} at {bad.start()} "
                "(RFC 9110 field values are visible characters, spaces and tabs)",
            )
