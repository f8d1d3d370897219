"""Which consumer errors stop a group member (:func:`horae.kafka.txn.is_fatal`) and which a read
outside a group passes over (:func:`horae.kafka.reader._passing`)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError

from horae.kafka.reader import _passing
from horae.kafka.txn import is_fatal

DENIED = (KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED)


@pytest.mark.parametrize("code", [*DENIED, KafkaError._FATAL])
def test_a_member_stops_when_fenced_or_denied(code: int) -> None:
    assert is_fatal(KafkaError(code))


@pytest.mark.parametrize("code", [KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN])
def test_a_member_goes_on_after_a_lost_connection(code: int) -> None:
    assert not is_fatal(KafkaError(code))


@pytest.mark.parametrize(
    "code", [*DENIED, KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.TOPIC_AUTHORIZATION_FAILED]
)
def test_a_read_ends_at_an_error_that_does_not_pass(code: int) -> None:
    assert not _passing(KafkaError(code))


@pytest.mark.parametrize(
    "code", [KafkaError._TRANSPORT, KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError._TIMED_OUT]
)
def test_a_read_goes_on_through_an_error_that_passes(code: int) -> None:
    assert _passing(KafkaError(code))
