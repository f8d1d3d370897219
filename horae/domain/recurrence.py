"""Recurrence kinds (``cron``, ``every``, ``at``) and the expression syntax shared by API and CLI.

Text syntax (:func:`parse_expression`):

- cron: ``0 9 * * MON-FRI``, ``*/15 * * * *``, ``30 0 9 * * *`` (6 fields, seconds first),
  ``@daily`` and the other macros (see :mod:`horae.domain.cron`);
- every: ``@every 90s``, ``@every 5m``, ``@every 1h30m`` (units ``s m h d w``), optionally anchored
  ``@every 1h from 2026-03-08T07:00:00Z``. Instants are ``anchor + k * interval`` of *elapsed* time,
  unaffected by zones and DST. The default anchor is the Unix epoch, so ``@every 1h`` falls on
  every UTC hour;
- at: ``@at 2026-03-08T07:00:00Z`` or a comma-separated list of RFC 3339 instants (offset required).

Structured form (``to_dict``/``recurrence_from_dict``):
``{"kind": "cron", "expr": "0 9 * * 1-5"}``, ``{"kind": "every", "interval_s": 90,
"anchor": "1970-01-01T00:00:00Z"}``, ``{"kind": "at", "instants": ["2026-03-08T07:00:00Z"]}``.

Specs validate their structure on construction. Limits that are configuration (minimum interval)
or need ``now`` (at least one instant in the next 5 years) are checked by
:func:`horae.domain.trigger.validate_trigger`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, ClassVar

from horae.domain.cron import CronExpr, parse_cron
from horae.domain.errors import ValidationError
from horae.domain.serialization import check_keys, get_int, get_str
from horae.domain.timefmt import MAX_EPOCH, MIN_EPOCH, format_utc, parse_instant

MAX_AT_INSTANTS = 1000
MAX_INTERVAL_S = 366 * 86400 * 10
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_DURATION = re.compile(r"^(?:\d+[smhdw])+$")


@dataclass(frozen=True, slots=True)
class CronSpec:
    """A cron expression, evaluated in the trigger's zone."""

    expr: str
    kind: ClassVar[str] = "cron"

    def __post_init__(self) -> None:
        try:
            parse_cron(self.expr)
        except ValidationError as exc:
            raise exc.prefixed("expr") if exc.field != "expr" else exc from None

    @property
    def parsed(self) -> CronExpr:
        return parse_cron(self.expr)

    def text(self) -> str:
        return self.expr

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "cron", "expr": self.expr}


@dataclass(frozen=True, slots=True)
class EverySpec:
    """Every ``interval_s`` seconds of elapsed time from ``anchor`` (epoch seconds)."""

    interval_s: int
    anchor: int = 0
    kind: ClassVar[str] = "every"

    def __post_init__(self) -> None:
        if isinstance(self.interval_s, bool) or not isinstance(self.interval_s, int):
            raise ValidationError("interval_s", self.interval_s, "expected an integer")
        if not 1 <= self.interval_s <= MAX_INTERVAL_S:
            raise ValidationError(
                "interval_s", self.interval_s, f"out of range 1..{MAX_INTERVAL_S}"
            )
        if isinstance(self.anchor, bool) or not isinstance(self.anchor, int):
            raise ValidationError("anchor", self.anchor, "expected epoch seconds")
        if not MIN_EPOCH <= self.anchor <= MAX_EPOCH:
            raise ValidationError("anchor", self.anchor, "anchor out of range")

    def text(self) -> str:
        body = f"@every {format_duration(self.interval_s)}"
        return body if self.anchor == 0 else f"{body} from {format_utc(self.anchor)}"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "every", "interval_s": self.interval_s, "anchor": format_utc(self.anchor)}


@dataclass(frozen=True, slots=True)
class AtSpec:
    """One or more instants (epoch seconds), kept sorted and unique."""

    instants: tuple[int, ...]
    kind: ClassVar[str] = "at"

    def __post_init__(self) -> None:
        if not isinstance(self.instants, tuple) or not self.instants:
            raise ValidationError("instants", self.instants, "at least one instant is required")
        if len(self.instants) > MAX_AT_INSTANTS:
            raise ValidationError(
                "instants", len(self.instants), f"at most {MAX_AT_INSTANTS} instants"
            )
        for value in self.instants:
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValidationError("instants", value, "expected epoch seconds")
            if not MIN_EPOCH <= value <= MAX_EPOCH:
                raise ValidationError("instants", value, "instant out of range")
        normal = tuple(sorted(set(self.instants)))
        if normal != self.instants:
            object.__setattr__(self, "instants", normal)

    def text(self) -> str:
        return "@at " + ",".join(format_utc(v) for v in self.instants)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "at", "instants": [format_utc(v) for v in self.instants]}


RecurrenceSpec = CronSpec | EverySpec | AtSpec


def format_duration(seconds: int) -> str:
    """``5400`` -> ``"1h30m"`` (largest units first; ``0`` -> ``"0s"``)."""
    parts = []
    for unit in ("w", "d", "h", "m", "s"):
        size = _UNITS[unit]
        if seconds >= size:
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
    return "".join(parts) or "0s"


def parse_duration(text: str, field: str = "interval") -> int:
    """``"90s"``, ``"5m"``, ``"1h30m"`` -> seconds."""
    cleaned = text.strip().lower() if isinstance(text, str) else ""
    if not _DURATION.match(cleaned):
        raise ValidationError(field, text, "expected a duration such as 90s, 5m, 1h30m, 1d")
    return sum(int(n) * _UNITS[u] for n, u in re.findall(r"(\d+)([smhdw])", cleaned))


def parse_expression(text: str) -> RecurrenceSpec:
    """Parse the text syntax of the module docstring into a recurrence spec."""
    if not isinstance(text, str):
        raise ValidationError("expr", text, "expression must be a string")
    stripped = " ".join(text.split())
    head, _, rest = stripped.partition(" ")
    lowered = head.lower()
    if lowered == "@every":
        interval_text, _, anchor_part = rest.partition(" ")
        if not interval_text:
            raise ValidationError("expr", text, "@every needs an interval, e.g. @every 5m")
        interval = parse_duration(interval_text, "expr.interval")
        anchor = 0
        if anchor_part:
            keyword, _, anchor_text = anchor_part.partition(" ")
            if keyword.lower() != "from" or not anchor_text:
                raise ValidationError(
                    "expr", text, "expected '@every <interval> [from <RFC 3339 instant>]'"
                )
            anchor = parse_instant(anchor_text, "expr.anchor", whole_seconds=True)
        try:
            return EverySpec(interval, anchor)
        except ValidationError as exc:
            raise exc.prefixed("expr") from None
    if lowered == "@at":
        items = [item.strip() for item in rest.split(",")]
        if not rest or not all(items):
            raise ValidationError("expr", text, "@at needs RFC 3339 instants separated by commas")
        if len(items) > MAX_AT_INSTANTS:
            raise ValidationError("expr", len(items), f"at most {MAX_AT_INSTANTS} instants")
        values = tuple(parse_instant(item, "expr.at", whole_seconds=True) for item in items)
        return AtSpec(tuple(sorted(set(values))))
    return CronSpec(stripped)


def recurrence_from_dict(data: Any, field: str = "recurrence") -> RecurrenceSpec:
    """Rebuild (and validate) a recurrence from its ``to_dict`` form."""
    kind = data.get("kind") if isinstance(data, dict) else None
    try:
        if kind == "cron":
            body = check_keys(data, {"kind", "expr"}, "")
            return CronSpec(get_str(body, "expr", None, ""))
        if kind == "every":
            body = check_keys(data, {"kind", "interval_s", "anchor"}, "")
            anchor = body.get("anchor", 0)
            if isinstance(anchor, str):
                anchor = parse_instant(anchor, "anchor", whole_seconds=True)
            return EverySpec(get_int(body, "interval_s", 0, "", 1, MAX_INTERVAL_S), anchor)
        if kind == "at":
            body = check_keys(data, {"kind", "instants"}, "")
            raw = body.get("instants")
            if not isinstance(raw, list | tuple):
                raise ValidationError("instants", raw, "expected a list of RFC 3339 instants")
            values = tuple(
                parse_instant(v, "instants", whole_seconds=True) if isinstance(v, str) else v
                for v in raw
            )
            return AtSpec(values)
    except ValidationError as exc:
        raise exc.prefixed(field) from None
    raise ValidationError(f"{field}.kind", kind, "expected one of cron|every|at")
