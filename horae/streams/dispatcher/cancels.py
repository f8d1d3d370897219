"""The fires a tenant cancelled, as one dispatcher remembers them (one object owns the memory).

A tenant's cancel reaches the dispatcher as cancel markers (:mod:`horae.domain.cancel`) on every
lane partition of its fire; the dispatcher that owns the partitions drops what it holds of the
fire at once, and must also refuse what comes after the marker: a retry order an attempt in
flight is concluded with (that attempt finishes; its conclusion checks here and stops the fire
instead of retrying), or an order consumed from another lane topic later than the marker (the
lane topics are read side by side, not in one order). So each cancelled fire key is remembered,
with its cause, for :data:`KEEP_S` after its marker was read — far longer than an order takes
from its producer to this consumer.

The memory is this process's own, not a read model: a dispatcher that takes a partition over
(a restart, a rebalance) after the marker's offset was committed does not know of the cancel.
What it holds then was concluded ``cancelled`` before that commit, and an attempt in flight
keeps its own lane offset (and the marker after it on that lane) uncommitted until it is
concluded. What remains open: a retry order written behind the marker by an attempt concluded
just before the marker was read, not yet read when the partition moved — that fire keeps its
remaining attempts (docs/design.md, "Lanes and delivery", Cancel).
"""

from __future__ import annotations

#: how long a cancelled fire key is remembered after its marker was read (seconds)
KEEP_S = 24 * 3600.0


class Cancels:
    """Fire key -> the cause of its cancel, each kept ``keep_s`` from when it was added. Keys are
    held in the order they were added, which, with one ``keep_s`` for all, is the order they
    expire in: :meth:`add` drops the expired ones from the front."""

    def __init__(self, keep_s: float = KEEP_S) -> None:
        self.keep_s = keep_s
        self._causes: dict[str, tuple[str, float]] = {}  # key -> (cause, remembered until)

    def __len__(self) -> int:
        return len(self._causes)

    def add(self, fire_key: str, cause: str, now: float) -> None:
        """Remember ``fire_key`` as cancelled with ``cause`` from ``now`` (again: from now)."""
        self._causes.pop(fire_key, None)
        self._causes[fire_key] = (cause, now + self.keep_s)
        for key, (_cause, until) in list(self._causes.items()):
            if until > now:
                break
            del self._causes[key]

    def cause(self, fire_key: str, now: float) -> str | None:
        """The cause of ``fire_key``'s cancel while it is remembered at ``now``, else None."""
        held = self._causes.get(fire_key)
        if held is None or held[1] <= now:
            return None
        return held[0]
