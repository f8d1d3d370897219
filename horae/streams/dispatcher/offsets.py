"""Which lane offset may be committed (pure).

A lane offset is committed only when every order at or below it is *finished*: terminal, or its
retry order produced in the same transaction. Orders finish out of order (a delayed order waits in
memory while later ones go), so each partition keeps a window of consumed, unfinished offsets; the
commit point is the lowest of them, or one past the highest consumed when none is open. After a
crash, everything from the commit point on is consumed again: finished orders there are sent again
(at-least-once, same fire key), none is lost.
"""

from __future__ import annotations

import heapq


class PartitionWindow:
    """Consumed offsets of one partition that are not finished yet."""

    __slots__ = ("_heap", "_next", "_open", "committed")

    def __init__(self) -> None:
        self._open: set[int] = set()
        self._heap: list[int] = []
        self._next: int | None = None
        self.committed: int | None = None  # the last commit point written

    def consumed(self, offset: int) -> None:
        """``offset`` was handed to the dispatcher (offsets arrive in increasing order)."""
        if offset in self._open:
            return
        self._open.add(offset)
        heapq.heappush(self._heap, offset)
        if self._next is None or offset + 1 > self._next:
            self._next = offset + 1

    def finished(self, offset: int) -> None:
        """``offset`` is terminal or its retry is produced in the transaction about to commit."""
        self._open.discard(offset)

    def commit_point(self) -> int | None:
        """The next offset to commit: the lowest open one, else one past the highest consumed;
        None before anything was consumed."""
        heap = self._heap
        while heap and heap[0] not in self._open:
            heapq.heappop(heap)
        return heap[0] if heap else self._next

    def due_commit(self) -> int | None:
        """The commit point if it moved since the last commit, else None."""
        point = self.commit_point()
        return point if point is not None and point != self.committed else None

    @property
    def open(self) -> int:
        return len(self._open)
