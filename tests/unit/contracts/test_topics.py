from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from horae.contracts import events as ev
from horae.contracts import topics as tp


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("21", -973932308),
        ("foobar", -790332482),
        ("a-little-bit-long-string", -985981536),
        ("a-little-bit-longer-string", -1486304829),
        ("lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
        ("abc", 479470107),
    ],
)
def test_murmur2_matches_kafka_utils_vectors(key: str, expected: int) -> None:
    assert tp.murmur2(key.encode()) == expected


@given(st.binary(max_size=64), st.integers(min_value=1, max_value=500))
def test_partition_in_range(key: bytes, n: int) -> None:
    assert 0 <= tp.partition_for(key, n) < n


def test_catalogue_is_complete_and_consistent() -> None:
    names = {s.suffix for s in tp.CATALOGUE}
    assert names == set(tp.Topic)
    for lane in ev.Lane:
        assert tp.lane_topic(lane) in names
    compacted = {s.suffix for s in tp.CATALOGUE if s.config["cleanup.policy"] == "compact"}
    assert compacted == {
        tp.Topic.DEFINITIONS,
        tp.Topic.ACCEPTED,
        tp.Topic.FIRES,
        tp.Topic.PLANNER_STATE,
    }
    assert tp.spec(tp.Topic.FIRES).partitions == tp.spec(tp.Topic.PLANNER_STATE).partitions
    assert int(tp.spec(tp.Topic.AUDIT).config["retention.ms"]) >= 365 * tp.DAY_MS


def test_names_use_prefix() -> None:
    assert tp.topic_name(tp.Topic.FIRES, "x.") == "x.fires"
    assert tp.spec(tp.Topic.LANE_ON_TIME).name("horae.") == "horae.lane.on_time"


def test_min_isr_follows_replication_factor() -> None:
    spec = tp.spec(tp.Topic.FIRES)
    assert tp.desired_config(spec, 1)["min.insync.replicas"] == "1"
    assert tp.desired_config(spec, 3)["min.insync.replicas"] == "2"


def test_fire_partition_uses_trigger_key() -> None:
    assert tp.fire_partition("acme", "nightly", 12) == tp.partition_for("acme/nightly", 12)
    assert tp.PRODUCER_DEFAULTS["partitioner"] == "murmur2_random"
