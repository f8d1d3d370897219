"""The commit point: the lowest unfinished offset, else one past the highest consumed."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from horae.streams.dispatcher.offsets import PartitionWindow


def test_commit_point_waits_for_the_lowest_unfinished_offset() -> None:
    w = PartitionWindow()
    assert w.commit_point() is None
    for o in (10, 11, 12):
        w.consumed(o)
    w.finished(11)
    w.finished(12)
    assert w.commit_point() == 10
    w.finished(10)
    assert w.commit_point() == 13
    w.committed = 13
    assert w.due_commit() is None
    w.consumed(14)
    assert w.due_commit() == 14


@given(st.permutations(list(range(30))), st.integers(0, 30))
def test_never_commits_past_an_unfinished_offset(order: list[int], k: int) -> None:
    w = PartitionWindow()
    for o in range(30):
        w.consumed(o)
    done = set(order[:k])
    for o in order[:k]:
        w.finished(o)
    point = w.commit_point()
    assert point is not None
    assert all(o in done for o in range(point))  # everything below the point is finished
    assert point == 30 or point not in done
