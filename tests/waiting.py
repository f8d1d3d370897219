"""Waiting in tests: poll a condition until it holds, never sleep a fixed time."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(
    check: Callable[[], T],
    timeout_s: float = 60.0,
    interval_s: float = 0.1,
    message: str | Callable[[], str] = "",
) -> T:
    """Call ``check`` every ``interval_s`` seconds until it returns a truthy value, and return that
    value. After ``timeout_s`` without one, raise :class:`AssertionError` with ``message`` (a
    callable is asked only then, so it can describe the state at that moment) and the last value."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() >= deadline:
            text = message() if callable(message) else message
            raise AssertionError(
                f"not within {timeout_s:g} s: {text or getattr(check, '__name__', 'condition')}"
                f" (last value: {value!r})"
            )
        time.sleep(interval_s)
