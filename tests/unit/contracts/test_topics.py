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


# --- per-tenant events topics -------------------------------------------------------------


TENANT_IDS = st.from_regex(r"[a-z0-9][a-z0-9._-]{0,62}", fullmatch=True)


@given(TENANT_IDS, TENANT_IDS)
def test_tenant_tokens_are_one_to_one_and_hold_no_separator(tenant: str, other: str) -> None:
    token = tp.tenant_token(tenant)
    assert "." not in token and "_" not in token and len(token) == len(tenant)
    if other != tenant:
        assert tp.tenant_token(other) != token


def test_events_topic_names() -> None:
    assert tp.events_topic("acme", "horae.") == "horae.events.acme"
    assert tp.events_topic("acme.eu") == "events.acmeDeu"
    assert tp.events_topic("a_b") == "events.aUb"
    assert tp.events_topic("a.b") != tp.events_topic("a_b") != tp.events_topic("a-b")


@pytest.mark.parametrize(
    ("tenant", "topic", "problem"),
    [
        ("acme", "events.acme", None),
        ("acme", "events.acme.heartbeats", None),
        ("acme.eu", "events.acmeDeu.x-1", None),
        ("acme", "events.globex", "must be 'events.acme'"),
        ("acme", "events.acmex", "must be 'events.acme'"),  # a prefix of another tenant's name
        ("acme", "events", "must be 'events.acme'"),
        ("acme", "horae.events.acme", "must be 'events.acme'"),  # written without the prefix
        ("acme", "demo.heartbeats", "must be 'events.acme'"),
        ("acme.eu", "events.acme.eu", "must be 'events.acmeDeu'"),  # tenant acme's sub-topic
        ("acme", "events.acme.", "suffix"),
        ("acme", "events.acme.a.b", "suffix"),
        ("acme", "events.acme.a_b", "suffix"),
        ("acme", "events.acme.UP", "suffix"),
    ],
)
def test_event_target_topics_must_lie_in_the_tenant_namespace(
    tenant: str, topic: str, problem: str | None
) -> None:
    found = tp.event_topic_problem(tenant, topic)
    assert found is None if problem is None else problem in (found or "")


def test_events_pattern_matches_every_tenant_topic_and_nothing_else() -> None:
    import re

    pattern = re.compile(tp.events_pattern("h.x"))
    assert pattern.match("h.xevents.acme") and pattern.match("h.xevents.acme.sub")
    assert not pattern.match("h.xevents.") and not pattern.match("hZxevents.acme")
    assert not pattern.match("h.xfires") and not pattern.match("other.events.acme")
    assert tp.is_events_topic("h.xevents.acme", "h.x") and not tp.is_events_topic("h.xaudit", "h.x")


def test_plan_holds_each_tenants_events_topic_and_no_shared_one() -> None:
    from horae.kafka.admin import Plan

    names = [name for name, _ in Plan("p.", 3, 1, ("acme", "b.c")).topics()]
    assert "p.events.acme" in names and "p.events.bDc" in names
    assert "p.events" not in names and "p.schedule-events" not in names
    assert len(names) == len(tp.CATALOGUE) - 1 + 2
    # a tenant named twice (the settings' keys and the caller's) is one topic: the broker
    # refuses a request that names a topic twice
    assert (
        Plan("p.", 3, 1, ("acme", "b.c", "acme")).topics()
        == Plan("p.", 3, 1, ("acme", "b.c")).topics()
    )


def test_router_sends_schedule_events_to_their_tenant_and_event_targets_to_their_topic() -> None:
    from datetime import UTC, datetime

    from horae.contracts.routing import Router

    router = Router("p.")
    now = datetime(2030, 1, 1, tzinfo=UTC)
    event = ev.ScheduleEvent(
        event_id="e", type="schedule.paused", tenant="a.b", trigger_id="t", emitted_at=now,
        trigger_version=1,
    )  # fmt: skip
    assert router.emit(event, 2).topic == "p.events.aDb"
    assert router.emit(event, 2).partition == 2  # the trigger's partition number, as before

    def target(topic: str) -> ev.TriggerDefinition:
        return ev.TriggerDefinition(
            tenant="acme", trigger_id="t", version=1, state=ev.DefinitionState.LIVE,
            recurrence=ev.Recurrence(kind=ev.RecurrenceKind.CRON, expr="* * * * *"),
            target=ev.Target(kind=ev.TargetKind.EVENT, topic=topic), authored_at=now, author="x",
        )  # fmt: skip

    assert router.target_topic(target("events.acme.beats")) == "p.events.acme.beats"
    assert router.topics_of(target("events.acme.beats")) == ["p.events.acme", "p.events.acme.beats"]
    assert router.topics_of(target("events.acme")) == ["p.events.acme"]
    # a definition accepted before the namespace rule never reaches outside its tenant's topic
    assert router.target_topic(target("events.globex")) == "p.events.acme"
