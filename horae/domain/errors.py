"""Validation errors of the time core.

Every rejection of tenant input is a :class:`ValidationError` naming the offending ``field`` (a
dotted path such as ``"recurrence.expr.minute"`` or ``"retry.max_attempts"``), the ``value`` that
was refused and a human ``message``. ``str(error)`` gives one precise line suitable for an API
response, a quarantine record or the CLI's stderr.
"""

from __future__ import annotations

from typing import Any


class ValidationError(ValueError):
    """A definition, expression or query argument was refused."""

    def __init__(self, field: str, value: Any, message: str) -> None:
        self.field = field
        self.value = value
        self.message = message
        super().__init__(f"{field}: {message} (got {value!r})")

    def prefixed(self, prefix: str) -> ValidationError:
        """The same error with ``prefix`` prepended to its field path."""
        field = f"{prefix}.{self.field}" if self.field else prefix
        return ValidationError(field, self.value, self.message)

    def to_dict(self) -> dict[str, Any]:
        value = self.value if isinstance(self.value, str | int | float | bool) else repr(self.value)
        return {"field": self.field, "value": value, "message": self.message}
