"""Kafka ACLs through the real broker, with real SCRAM credentials: each attempt outside a
principal's grants is refused by the broker with its own error code (or the login fails), and the
grants a tenant needs work. Needs an authenticating broker (the tests' private stack); against a
broker without credentials in the environment the module is skipped."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer

from horae.client import HoraeClient, cron_trigger
from horae.contracts import events as ev
from horae.contracts.codec import encode
from horae.contracts.topics import PRODUCER_DEFAULTS, Topic, events_topic, topic_name
from horae.kafka.acls import ROLES, all_bindings, apply_acls, tenant_group_prefix, tenant_principal
from horae.kafka.admin import Plan, admin_client, apply
from horae.kafka.config import KafkaCredentials, client_config
from horae.kafka.scram import new_password, upsert_scram_users
from tests.waiting import wait_until

TENANTS = ("acme", "globex")


@dataclass(frozen=True)
class Cluster:
    bootstrap: str
    prefix: str
    users: dict[str, KafkaCredentials]  # role or tenant -> credentials


@pytest.fixture
def cluster(kafka_bootstrap: str, topic_prefix: str) -> Iterator[Cluster]:
    if "HORAE_KAFKA_USERNAME" not in os.environ:
        pytest.skip("the broker does not authenticate (no HORAE_KAFKA_USERNAME)")
    apply(admin_client(kafka_bootstrap), Plan(topic_prefix, 3, 1, TENANTS))
    names = {role: role for role in ROLES} | {t: tenant_principal(t) for t in TENANTS}
    users = {key: KafkaCredentials(name, new_password()) for key, name in names.items()}
    upsert_scram_users(kafka_bootstrap, None, {c.username: c.password for c in users.values()})
    apply_acls(admin_client(kafka_bootstrap), all_bindings(topic_prefix, TENANTS))
    yield Cluster(kafka_bootstrap, topic_prefix, users)


def produce_error(cluster: Cluster, who: KafkaCredentials, topic: str) -> int | None:
    """The delivery error code of one record ``who`` produces to ``topic`` (None: delivered)."""
    errors: list[KafkaError | None] = []
    producer = Producer(
        client_config(
            cluster.bootstrap,
            {**PRODUCER_DEFAULTS, "enable.idempotence": False, "message.timeout.ms": 15_000},
            credentials=who,
        )
    )
    producer.produce(topic, key=b"k", value=b"v", on_delivery=lambda e, _m: errors.append(e))
    producer.flush(30)
    assert len(errors) == 1
    return None if errors[0] is None else errors[0].code()


def consume_outcome(cluster: Cluster, who: KafkaCredentials, topic: str, group: str) -> int | bytes:
    """The first error code ``who`` meets subscribing ``group`` to ``topic``, or the first
    record's value."""
    consumer = Consumer(
        client_config(
            cluster.bootstrap,
            {"group.id": group, "auto.offset.reset": "earliest", "log_level": 3},
            credentials=who,
        )
    )
    consumer.subscribe([topic])
    got: list[int | bytes] = []

    def polled() -> bool:
        msg: Message | None = consumer.poll(0.5)
        if msg is not None:
            err = msg.error()
            got.append(err.code() if err is not None else msg.value() or b"")
        return bool(got)

    try:
        assert wait_until(polled, 30)
    finally:
        consumer.close()
    return got[0]


def login_error(cluster: Cluster, creds: KafkaCredentials | None) -> int:
    errors: list[int] = []
    conf = client_config(  # the session's transport (TLS or not); no login when creds is None
        cluster.bootstrap,
        {"error_cb": lambda e: errors.append(e.code())},
        credentials=creds,
        authenticate=creds is not None,
    )
    producer = Producer(conf)
    assert wait_until(lambda: producer.poll(0.2) >= 0 and bool(errors), 20)
    return errors[0]


def test_tenant_reads_its_own_events_and_writes_definitions(cluster: Cluster) -> None:
    acme = cluster.users["acme"]
    assert produce_error(cluster, acme, topic_name(Topic.DEFINITIONS, cluster.prefix)) is None
    assert produce_error(cluster, acme, topic_name(Topic.COMMANDS, cluster.prefix)) is None
    own = events_topic("acme", cluster.prefix)
    assert produce_error(cluster, cluster.users["planner"], own) is None
    group = tenant_group_prefix("acme", cluster.prefix) + "watch"
    assert consume_outcome(cluster, acme, own, group) == b"v"


def test_a_tenant_cannot_read_another_tenants_events(cluster: Cluster) -> None:
    other = events_topic("globex", cluster.prefix)
    group = tenant_group_prefix("acme", cluster.prefix) + "peek"
    code = consume_outcome(cluster, cluster.users["acme"], other, group)
    assert code == KafkaError.TOPIC_AUTHORIZATION_FAILED


@pytest.mark.parametrize("topic", [Topic.ACCEPTED, Topic.FIRES, Topic.PLANNER_STATE])
def test_a_tenant_cannot_write_trusted_topics(cluster: Cluster, topic: Topic) -> None:
    code = produce_error(cluster, cluster.users["acme"], topic_name(topic, cluster.prefix))
    assert code == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_a_tenant_cannot_join_the_planners_group(cluster: Cluster) -> None:
    own = events_topic("acme", cluster.prefix)
    code = consume_outcome(cluster, cluster.users["acme"], own, f"{cluster.prefix}planner")
    assert code == KafkaError.GROUP_AUTHORIZATION_FAILED


def test_a_tenant_cannot_use_the_planners_transactional_id(cluster: Cluster) -> None:
    producer = Producer(
        client_config(
            cluster.bootstrap,
            {**PRODUCER_DEFAULTS, "transactional.id": f"{cluster.prefix}planner-slot1"},
            credentials=cluster.users["acme"],
        )
    )
    with pytest.raises(KafkaException) as refused:
        producer.init_transactions(30)
    assert refused.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


@pytest.mark.parametrize("topic", [Topic.DEFINITIONS, Topic.ACCEPTED, Topic.FIRES, Topic.AUDIT])
def test_the_projector_writes_no_topic(cluster: Cluster, topic: Topic) -> None:
    code = produce_error(cluster, cluster.users["projector"], topic_name(topic, cluster.prefix))
    assert code == KafkaError.TOPIC_AUTHORIZATION_FAILED


@pytest.mark.parametrize("topic", [Topic.DEFINITIONS, Topic.ACCEPTED])
def test_the_dispatcher_cannot_write_definitions(cluster: Cluster, topic: Topic) -> None:
    """Its breaker pauses through ``commands``: no definition, ingress or accepted, is its."""
    code = produce_error(cluster, cluster.users["dispatcher"], topic_name(topic, cluster.prefix))
    assert code == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_a_wrong_password_is_refused(cluster: Cluster) -> None:
    wrong = KafkaCredentials(tenant_principal("acme"), uuid.uuid4().hex)
    assert login_error(cluster, wrong) == KafkaError._AUTHENTICATION


def test_no_credentials_get_no_connection(cluster: Cluster) -> None:
    assert login_error(cluster, None) in (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN)


def test_tenants_add_makes_a_principal_that_holds(cluster: Cluster) -> None:
    env = dict(
        os.environ,
        HORAE_KAFKA_BOOTSTRAP=cluster.bootstrap,
        HORAE_TOPIC_PREFIX=cluster.prefix,
        HORAE_TOPIC_PARTITIONS="3",
        HORAE_TOPIC_REPLICATION_FACTOR="1",
    )
    done = subprocess.run(
        [sys.executable, "-m", "horae.cli.main", "tenants", "add", "new.co"],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    found = re.search(
        r"Kafka user 'tenant\.newDco' \(SASL/SCRAM-SHA-512\), password (\S+)", done.stdout
    )
    assert found is not None, done.stdout
    assert "ingress key (add to HORAE_TENANT_KEYS; shown once): " in done.stdout
    newco = KafkaCredentials("tenant.newDco", found.group(1))
    own = events_topic("new.co", cluster.prefix)
    assert produce_error(cluster, newco, topic_name(Topic.DEFINITIONS, cluster.prefix)) is None
    assert produce_error(cluster, cluster.users["planner"], own) is None
    group = tenant_group_prefix("new.co", cluster.prefix) + "watch"
    assert consume_outcome(cluster, newco, own, group) == b"v"
    code = consume_outcome(cluster, newco, events_topic("acme", cluster.prefix), group)
    assert code == KafkaError.TOPIC_AUTHORIZATION_FAILED
    wrong = KafkaCredentials("tenant.newDco", found.group(1) + "x")
    assert login_error(cluster, wrong) == KafkaError._AUTHENTICATION


def test_the_client_works_as_its_tenants_user(cluster: Cluster) -> None:
    acme = cluster.users["acme"]
    now = datetime.now(UTC).replace(microsecond=0)
    event = ev.ScheduleEvent(
        event_id=uuid.uuid4().hex, type=ev.ScheduleEventType.TRIGGERED, tenant="acme",
        trigger_id="nightly", emitted_at=now, trigger_version=1,
        fire_key=f"acme/nightly/{now:%Y-%m-%dT%H:%M:%SZ}/0/scheduled", scheduled_at=now,
        origin=ev.Origin.SCHEDULED, payload=b"",
    )  # fmt: skip
    planner = Producer(client_config(cluster.bootstrap, credentials=cluster.users["planner"]))
    planner.produce(events_topic("acme", cluster.prefix), key=b"acme/nightly", value=encode(event))
    assert planner.flush(30) == 0
    with HoraeClient(
        cluster.bootstrap, tenant="acme", key_id="acme-1", key=b"k", prefix=cluster.prefix,
        credentials=acme,
    ) as client:  # fmt: skip
        client.put(cron_trigger("acme", "nightly", "0 9 * * *", "https://a.example/h"))
        got = list(client.schedule_events(timeout_s=20, max_events=1))
    assert [(e.tenant, e.trigger_id) for e in got] == [("acme", "nightly")]
