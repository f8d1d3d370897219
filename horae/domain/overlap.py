"""Overlap: what to do with a new fire while earlier fires of the same trigger are in flight.

:func:`decide_overlap` ``(policy, in_flight) -> OverlapDecision`` is a pure function of the policy
and the trigger's in-flight fires (running or buffered). The planner applies it to every
scheduled fire of a webhook trigger whose policy is not ``allow``
(:mod:`horae.streams.planner.decide`, which also says when a fire counts as running):

- nothing running -> ``start``;
- ``allow`` -> ``start`` alongside;
- ``skip`` -> ``skip`` (cause ``skipped: overlap``);
- ``buffer_one`` -> ``buffer`` (start when the running fire ends) unless one is already buffered,
  then ``skip`` (cause ``skipped: overlap (buffer full)``);
- ``replace`` -> ``start`` and cancel every in-flight fire (cause on them: ``cancelled: replaced``).

A buffered fire, once released, fires with cause :data:`CAUSE_BUFFERED`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

CAUSE_OVERLAP = "skipped: overlap"
CAUSE_BUFFER_FULL = "skipped: overlap (buffer full)"
CAUSE_BUFFERED = "buffered: overlap"
CAUSE_REPLACED = "cancelled: replaced"


class OverlapPolicy(StrEnum):
    ALLOW = "allow"
    SKIP = "skip"
    BUFFER_ONE = "buffer_one"
    REPLACE = "replace"


class OverlapAction(StrEnum):
    START = "start"
    SKIP = "skip"
    BUFFER = "buffer"


@dataclass(frozen=True, slots=True)
class InFlight:
    """A fire of the trigger that is not finished: running, or buffered waiting to start."""

    key: str
    scheduled: int
    buffered: bool = False


@dataclass(frozen=True, slots=True)
class OverlapDecision:
    action: OverlapAction
    cause: str | None = None  # why the new fire does not start now
    cancel: tuple[str, ...] = ()  # keys of in-flight fires to cancel (cause CAUSE_REPLACED)


def decide_overlap(policy: OverlapPolicy, in_flight: Sequence[InFlight]) -> OverlapDecision:
    """Decide the new fire given the trigger's in-flight fires (see the module docstring)."""
    running = [f for f in in_flight if not f.buffered]
    buffered = [f for f in in_flight if f.buffered]
    if policy is OverlapPolicy.REPLACE:
        cancel = tuple(f.key for f in sorted(in_flight, key=lambda f: (f.scheduled, f.key)))
        return OverlapDecision(OverlapAction.START, None, cancel)
    if not running or policy is OverlapPolicy.ALLOW:
        return OverlapDecision(OverlapAction.START)
    if policy is OverlapPolicy.SKIP:
        return OverlapDecision(OverlapAction.SKIP, CAUSE_OVERLAP)
    if buffered:
        return OverlapDecision(OverlapAction.SKIP, CAUSE_BUFFER_FULL)
    return OverlapDecision(OverlapAction.BUFFER, CAUSE_BUFFERED)
