"""Deterministic record ids: :func:`horae.contracts.ids.event_id` is the UUIDv5 it says."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from horae.contracts.ids import event_id

PARTS = st.lists(st.one_of(st.text(), st.integers(), st.none()), max_size=6)


@given(PARTS)
def test_event_id_is_the_uuid5_of_the_joined_parts(parts: list[object]) -> None:
    name = "horae:" + "|".join(str(p) for p in parts)
    assert event_id(*parts) == str(uuid.uuid5(uuid.NAMESPACE_URL, name))


def test_a_known_id() -> None:
    assert event_id("succeeded", "t/g/1", 1) == str(
        uuid.uuid5(uuid.NAMESPACE_URL, "horae:succeeded|t/g/1|1")
    )
    assert uuid.UUID(event_id("x")).version == 5
