"""Per-tenant event topics against the real broker: a tenant's schedule events land only in its
own topic, an event target naming another tenant's topic is refused at ingress, a tenant's client
reads nothing of another tenant, and the planner creates a tenant's topic on its first accepted
definition (outside its transaction) without a failing one blocking the rest."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace

import pytest

from horae.client import HoraeClient
from horae.contracts import events as ev
from horae.contracts import signing
from horae.contracts.codec import decode
from horae.contracts.topics import Topic, events_topic, topic_name
from horae.kafka.admin import TenantTopics, admin_client
from tests.integration.planner.harness import (
    KEY_ID,
    PARTITIONS,
    SECRET,
    TENANT,
    PlannerEnv,
    definition,
    ledger,
    read_all,
)
from tests.waiting import wait_until

OTHER, OTHER_KEY_ID, OTHER_SECRET = "globex.eu", "globex-1", b"globex-secret"
KEYS = {TENANT: {KEY_ID: SECRET}, OTHER: {OTHER_KEY_ID: OTHER_SECRET}}


def event_target(trigger_id: str, topic: str, tenant: str = TENANT) -> ev.TriggerDefinition:
    d = definition(trigger_id, target=ev.Target(kind=ev.TargetKind.EVENT, topic=topic))
    if tenant == TENANT:
        return d
    return signing.sign(replace(d, tenant=tenant, signature=None), OTHER_KEY_ID, OTHER_SECRET)


def events_in(env: PlannerEnv, full_name: str) -> list[ev.ScheduleEvent]:
    names = admin_client(env.bootstrap).list_topics(timeout=10).topics
    if full_name not in names:
        return []
    return [decode(v, ev.ScheduleEvent) for _, v in read_all(env.bootstrap, full_name) if v]


@pytest.fixture
def env(planner_env: PlannerEnv) -> Iterator[PlannerEnv]:
    planner_env.start_thread(tenant_keys=KEYS)
    yield planner_env


def test_events_land_only_in_their_tenants_topic_and_clients_read_only_their_own(
    env: PlannerEnv,
) -> None:
    acme_sub = events_topic(TENANT, "") + ".beats"  # "events.acme.beats"
    env.put(event_target("beat", acme_sub))
    env.put(event_target("beat", events_topic(OTHER), tenant=OTHER))  # "events.globexDeu"
    mine_full, other_full = env.prefix + acme_sub, events_topic(OTHER, env.prefix)

    def both_fired() -> bool:
        return bool(events_in(env, mine_full)) and bool(events_in(env, other_full))

    wait_until(both_fired, 60, 0.5, "both tenants' event targets fired into their topics")
    assert {e.tenant for e in events_in(env, mine_full)} == {TENANT}
    assert {e.tenant for e in events_in(env, other_full)} == {OTHER}
    assert {e.type for e in events_in(env, mine_full)} == {"schedule.triggered"}
    names = admin_client(env.bootstrap).list_topics(timeout=10).topics
    assert topic_name(Topic.SCHEDULE_EVENTS, env.prefix) not in names, "no shared topic"
    assert f"{env.prefix}schedule-events" not in names
    # the planner created each tenant's main topic too (before producing into its namespace)
    assert events_topic(TENANT, env.prefix) in names and other_full in names

    acme = HoraeClient(env.bootstrap, tenant=TENANT, key_id=KEY_ID, key=SECRET, prefix=env.prefix)
    beats = list(acme.schedule_events(topic=acme_sub, timeout_s=2, max_events=3))
    assert beats and {e.tenant for e in beats} == {TENANT}
    assert all(e.tenant == TENANT for e in acme.schedule_events(timeout_s=2))
    with pytest.raises(ValueError, match="must be"):  # another tenant's topic: refused
        next(acme.schedule_events(topic=events_topic(OTHER)))
    globex = HoraeClient(
        env.bootstrap, tenant=OTHER, key_id=OTHER_KEY_ID, key=OTHER_SECRET, prefix=env.prefix
    )
    theirs = list(globex.schedule_events(timeout_s=2, max_events=3))
    assert theirs and {e.tenant for e in theirs} == {OTHER}


@pytest.mark.parametrize(
    "topic",
    [
        events_topic(OTHER),  # another tenant's topic
        events_topic(OTHER) + ".x",  # another tenant's sub-topic
        "events.acmeDeu",  # a tenant whose name starts like this one's
        "schedule-events",  # the old shared topic
        "definitions.accepted",  # a trusted internal topic
        "events.acme.a_b",  # a sub-topic Kafka would confuse with events.acme.a.b
    ],
)
def test_an_event_target_outside_its_tenants_namespace_is_refused(
    env: PlannerEnv, topic: str
) -> None:
    env.put(event_target("escape", topic))
    env.put(definition("canary"))  # the rest keeps flowing

    def quarantined() -> list[ev.Quarantined]:
        return [
            decode(v, ev.Quarantined)
            for _, v in read_all(env.bootstrap, env.topic(Topic.QUARANTINE))
            if v
        ]

    (refused,) = wait_until(quarantined, 60, 0.2, "the definition was quarantined")
    assert refused.cause == "invalid"
    assert "target.topic" in refused.detail and "'events.acme" in refused.detail
    wait_until(lambda: any(f.trigger_id == "canary" for f in ledger(env)), 60, 0.2)
    accepted = [
        decode(v, ev.TriggerDefinition)
        for _, v in read_all(env.bootstrap, env.topic(Topic.ACCEPTED))
        if v
    ]
    assert [d.trigger_id for d in accepted] == ["canary"]
    assert not any(f.trigger_id == "escape" for f in ledger(env))
    if topic.startswith("events."):  # nothing reached the named topic
        assert events_in(env, env.prefix + topic) == []


def test_tenant_topics_are_created_with_a_leader_and_a_failure_blocks_nothing(
    planner_env: PlannerEnv,
) -> None:
    env = planner_env
    admin = admin_client(env.bootstrap)
    topics = TenantTopics(admin, env.topic(Topic.DEFINITIONS), timeout_s=10, retry_after_s=60)
    good = events_topic("new-tenant", env.prefix)
    assert topics.ensure([good]) is None
    meta = admin.list_topics(timeout=10).topics[good]
    assert len(meta.partitions) == PARTITIONS
    assert all(p.leader >= 0 for p in meta.partitions.values())
    assert good in topics.known
    bad = env.prefix + "events." + "x" * 250  # longer than Kafka allows
    started = time.monotonic()
    problem = topics.ensure([bad])
    assert problem is not None and "could not be created" in problem
    again = topics.ensure([bad])  # remembered: refused at once, without asking the broker
    assert again == problem and time.monotonic() - started < 10
    assert topics.ensure([good]) is None  # the others are unaffected
