"""Input records whose handling raised: a case, not an outage.

A definition, command or outcome record whose handling raises (an exception out of the decider,
not a Kafka error) must neither stop its partition nor loop on it. The planner worker
(:mod:`~horae.streams.planner.worker`) keeps the rule with one :class:`PoisonRecords`:

- the record's partition index may hold half of what the record did, so nothing more is applied
  to that index in the iteration: the records of that partition after it are left unapplied,
  its due instants are not decided, the rest is committed (with input offsets that stop at the
  first record left unapplied of each topic partition), then the index is rebuilt from Kafka —
  the committed state, as after an aborted transaction — and the consumer rewound to the
  committed offsets;
- the record's topic partition is *held* at the record: until its retry time, that record and
  every later one of the same topic partition are left unapplied (read, not committed: the
  committed offset stays at the record), while every other topic partition, and the held
  partition's due instants, go on;
- attempt *n* (1-based) that fails is retried ``backoff_s * 2 ** (n - 1)`` seconds later (the
  consumer is rewound then, so the record and the ones after it are read again);
- the ``attempts``-th failure gives up: the record goes to ``quarantine`` with cause
  :data:`CAUSE` and the exception (type, message, where it was raised) as its detail, in the
  transaction that commits the offset after it, and the partition moves on.

The same hold serves a command whose trigger the partition does not know yet
(:class:`~horae.streams.planner.decide.DefinitionPending`: its definition, on the other topic,
may not have been read yet): nothing was changed, so nothing is spoilt or rebuilt; it is tried
again after :data:`PENDING_BACKOFF_S`, doubling, and its :data:`PENDING_ATTEMPTS`-th try is
final (``unknown-trigger``, as before).

The counts live in memory (a rebalance forgets the partitions it takes away; the next owner
starts at zero: still bounded). A held record survives aborted transactions and rebuilds.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass

from horae.ports import TopicPartitionKey

#: the quarantine cause of a record whose handling raised on every attempt
CAUSE = "handler-error"
ATTEMPTS = 3
BACKOFF_S = 1.0
#: a command waiting for its trigger's definition: tried after 0.1, 0.2, 0.4 s, then for good
PENDING_ATTEMPTS = 4
PENDING_BACKOFF_S = 0.1


def failure_detail(exc: BaseException, attempts: int) -> str:
    """What a quarantined record's detail says: how often it was tried, the exception, and the
    innermost frame it was raised in."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" at {frames[-1].filename}:{frames[-1].lineno} in {frames[-1].name}" if frames else ""
    return f"handling raised {attempts} times: {type(exc).__name__}: {exc}{where}"


@dataclass(slots=True)
class Held:
    """A topic partition held at ``offset``: the record there failed ``failures`` times and is
    tried again at ``retry_at`` (monotonic seconds)."""

    offset: int
    failures: int
    retry_at: float
    rewound: bool = False  # the consumer was rewound for the retry


class PoisonRecords:
    """The held topic partitions of one planner worker (see the module docstring)."""

    def __init__(self, attempts: int = ATTEMPTS, backoff_s: float = BACKOFF_S) -> None:
        self.attempts = max(1, attempts)
        self.backoff_s = backoff_s
        self.held: dict[TopicPartitionKey, Held] = {}

    def blocks(self, tp: TopicPartitionKey, offset: int, at: float) -> bool:
        """Whether the record at ``offset`` of ``tp`` must be left unapplied at ``at``: a later
        record of a held topic partition, or the held record before its retry time."""
        held = self.held.get(tp)
        if held is None or offset < held.offset:
            return False
        return offset > held.offset or at < held.retry_at

    def failed(
        self,
        tp: TopicPartitionKey,
        offset: int,
        at: float,
        attempts: int | None = None,
        backoff_s: float | None = None,
    ) -> int | None:
        """The record at ``offset`` of ``tp`` raised at ``at``: its failure count when it is
        held for another try, None when it is given up (quarantine it; ``tp`` is released).
        ``attempts`` and ``backoff_s``: this record's own (default: the holder's)."""
        held = self.held.get(tp)
        failures = 1 if held is None or held.offset != offset else held.failures + 1
        if failures >= (attempts or self.attempts):
            self.held.pop(tp, None)
            return None
        delay = (self.backoff_s if backoff_s is None else backoff_s) * 2 ** (failures - 1)
        self.held[tp] = Held(offset, failures, at + delay)
        return failures

    def last_try(self, tp: TopicPartitionKey, offset: int, attempts: int) -> bool:
        """Whether the record at ``offset`` of ``tp`` is on its last of ``attempts`` tries."""
        held = self.held.get(tp)
        return held is not None and held.offset == offset and held.failures + 1 >= attempts

    def succeeded(self, tp: TopicPartitionKey, offset: int) -> None:
        """The held record of ``tp`` was applied after all: ``tp`` is released."""
        held = self.held.get(tp)
        if held is not None and held.offset == offset:
            del self.held[tp]

    def commit_offset(self, tp: TopicPartitionKey, position: int) -> int:
        """The offset to commit for ``tp`` whose consumer position is ``position``."""
        held = self.held.get(tp)
        return position if held is None else min(position, held.offset)

    def rewind_due(self, at: float) -> bool:
        """Whether a held record's retry time has come and the consumer must be rewound to read
        it again (once per retry)."""
        due = [h for h in self.held.values() if not h.rewound and at >= h.retry_at]
        for held in due:
            held.rewound = True
        return bool(due)

    def next_retry(self) -> float | None:
        """The earliest retry time still to come (monotonic), if any."""
        waiting = [h.retry_at for h in self.held.values() if not h.rewound]
        return min(waiting) if waiting else None

    def forget(self, partitions: set[int]) -> None:
        """Partitions given up: their held records are not ours any more."""
        for tp in [tp for tp in self.held if tp[1] in partitions]:
            del self.held[tp]
