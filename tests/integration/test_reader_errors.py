"""Reading a partition outside a group (:mod:`horae.kafka.reader`) as a user without READ on the
topic ends at once with the broker's precise error, instead of skipping it for ever (the
breaker's read of the ingress topic as the dispatcher user hung its committer that way)."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer

from horae.contracts.topics import PRODUCER_DEFAULTS, Topic, topic_name
from horae.kafka.admin import Plan, admin_client, apply
from horae.kafka.config import client_config
from horae.kafka.reader import KafkaPartitionReader, read_partition


def test_a_read_without_the_read_grant_raises_promptly(
    kafka_bootstrap: str,
    topic_prefix: str,
    role_env: dict[str, dict[str, str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    apply(admin_client(kafka_bootstrap), Plan(topic_prefix, 1, 1, ()))
    topic = topic_name(Topic.DEFINITIONS, topic_prefix)
    producer = Producer(client_config(kafka_bootstrap, PRODUCER_DEFAULTS))
    producer.produce(topic, key=b"acme/t", value=b"x", partition=0)
    assert producer.flush(30) == 0
    assert len(list(read_partition(kafka_bootstrap, topic, 0))) == 1  # as the admin
    for name, value in role_env["dispatcher"].items():  # DESCRIBE on the prefix, no READ
        monkeypatch.setenv(name, value)
    for read in (
        lambda: list(read_partition(kafka_bootstrap, topic, 0)),
        lambda: list(KafkaPartitionReader(kafka_bootstrap).read(topic, 0)),
    ):
        started = time.monotonic()
        with pytest.raises(KafkaException) as refused:
            read()
        assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        assert time.monotonic() - started < 10.0
