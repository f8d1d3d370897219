"""Helpers for the ``to_dict`` / ``from_dict`` forms of specs and policies.

Every spec and policy of the time core serialises to a plain JSON-compatible ``dict`` (strings,
ints, bools, lists, nested dicts) with ``to_dict()`` and is rebuilt, *validated*, by the class
method ``from_dict()``: ``X.from_dict(x.to_dict()) == x`` for every value ``x``. Missing keys take
their defaults; unknown keys and wrongly typed values raise
:class:`~horae.domain.errors.ValidationError` naming the dotted field path.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from horae.domain.errors import ValidationError


def check_keys(data: Any, allowed: set[str], field: str) -> Mapping[str, Any]:
    """``data`` as a mapping with only ``allowed`` keys."""
    if not isinstance(data, Mapping):
        raise ValidationError(field, data, "expected an object")
    unknown = sorted(str(key) for key in data if key not in allowed)
    if unknown:
        path = f"{field}.{unknown[0]}" if field else unknown[0]
        raise ValidationError(path, data[unknown[0]], "unknown field")
    return data


def get_int(
    data: Mapping[str, Any], key: str, default: int, field: str, low: int, high: int
) -> int:
    """Integer ``data[key]`` (``default`` if absent) within ``[low, high]``."""
    value = data.get(key, default)
    path = f"{field}.{key}" if field else key
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(path, value, "expected an integer")
    if not low <= value <= high:
        raise ValidationError(path, value, f"out of range {low}..{high}")
    return value


def get_float(
    data: Mapping[str, Any], key: str, default: float, field: str, low: float, high: float
) -> float:
    """Number ``data[key]`` (``default`` if absent) within ``[low, high]``."""
    value = data.get(key, default)
    path = f"{field}.{key}" if field else key
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        raise ValidationError(path, value, "expected a number")
    if not low <= value <= high:
        raise ValidationError(path, value, f"out of range {low}..{high}")
    return float(value)


def get_bool(data: Mapping[str, Any], key: str, default: bool, field: str) -> bool:
    value = data.get(key, default)
    if not isinstance(value, bool):
        raise ValidationError(f"{field}.{key}" if field else key, value, "expected true or false")
    return value


def get_str(data: Mapping[str, Any], key: str, default: str | None, field: str) -> str:
    value = data.get(key, default)
    path = f"{field}.{key}" if field else key
    if value is None:
        raise ValidationError(path, None, "required")
    if not isinstance(value, str):
        raise ValidationError(path, value, "expected a string")
    return value
