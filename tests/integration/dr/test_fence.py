"""The fence of a promotion, on the session's real broker: once the writing region is fenced,
its planners' transactional ids can neither commit nor start again, and its dispatchers can write
nothing; the other roles keep their grants."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Producer

from horae.contracts.topics import PRODUCER_DEFAULTS, Topic, topic_name
from horae.devstack.stack import LocalStack
from horae.dr.promote import fence, provision_standby
from horae.dr.regions import Region, provision
from horae.kafka.acls import role_bindings
from horae.kafka.config import KafkaCredentials
from horae.settings import Settings
from tests.waiting import wait_until


def _txn(r: Region, user: KafkaCredentials, txn_id: str) -> Producer:
    return Producer(
        r.connection()
        .as_user(user)
        .config({**PRODUCER_DEFAULTS, "transactional.id": txn_id, "log_level": 0})
    )


def _commit(p: Producer, topic: str) -> None:
    p.begin_transaction()
    p.produce(topic, key=b"k", value=b"v")
    p.commit_transaction(30)


def _init_refused(r: Region, user: KafkaCredentials, txn_id: str) -> bool:
    try:
        _txn(r, user, txn_id).init_transactions(15)
    except KafkaException as exc:
        return "AUTHORIZATION" in str(exc)
    return False


def test_a_fenced_region_decides_and_dispatches_nothing_more(
    local_stack: LocalStack, region_settings: Settings, topic_prefix: str, tmp_path: Path
) -> None:
    settings = region_settings
    r = Region("a", tmp_path, local_stack, settings)
    roles = provision(r)
    fires = topic_name(Topic.FIRES, topic_prefix)
    planner = _txn(r, roles["planner"], f"{topic_prefix}planner-p1")
    planner.init_transactions(30)
    _commit(planner, fires)  # before the fence: the planner commits
    outcomes = topic_name(Topic.OUTCOMES, topic_prefix)
    dispatcher = _txn(r, roles["dispatcher"], f"{topic_prefix}dispatcher-d1")
    dispatcher.init_transactions(30)
    _commit(dispatcher, outcomes)

    deleted = fence(r)

    expected = {*role_bindings("planner", topic_prefix), *role_bindings("dispatcher", topic_prefix)}
    assert deleted == len(expected)
    wait_until(
        lambda: _init_refused(r, roles["planner"], f"{topic_prefix}planner-p2"),
        30, 0.5, "a planner's transactional id still starts after the fence",
    )  # fmt: skip
    assert _init_refused(r, roles["dispatcher"], f"{topic_prefix}dispatcher-d2")
    for producer, topic in ((planner, fires), (dispatcher, outcomes)):
        with pytest.raises(KafkaException):
            _commit(producer, topic)  # a running member of the fenced region commits nothing
    # the others keep theirs: the API still writes definitions
    api = Producer(
        r.connection().as_user(roles["api"]).config({**PRODUCER_DEFAULTS, "log_level": 0})
    )
    errors: list[object] = []
    api.produce(
        topic_name(Topic.DEFINITIONS, topic_prefix), key=b"acme/x", value=b"v",
        on_delivery=lambda err, _msg: errors.append(err),
    )  # fmt: skip
    assert api.flush(30) == 0 and errors == [None]


def test_a_standby_is_fenced_until_its_promotion_grants_it_back(
    local_stack: LocalStack, region_settings: Settings, topic_prefix: str, tmp_path: Path
) -> None:
    settings = region_settings
    r = Region("b", tmp_path, local_stack, settings)
    roles = provision_standby(r)
    # a planner or dispatcher started in the standby by mistake starts no transaction there
    wait_until(
        lambda: _init_refused(r, roles["planner"], f"{topic_prefix}planner-s1"),
        30, 0.5, "a standby's planner starts a transaction",
    )  # fmt: skip
    assert _init_refused(r, roles["dispatcher"], f"{topic_prefix}dispatcher-s1")

    provision(r)  # what the promotion does

    started: list[Producer] = []
    wait_until(
        lambda: _started(r, roles["planner"], f"{topic_prefix}planner-s2", started),
        30, 0.5, "the promoted region's planner is still fenced",
    )  # fmt: skip
    _commit(started[0], topic_name(Topic.FIRES, topic_prefix))


def _started(r: Region, user: KafkaCredentials, txn_id: str, into: list[Producer]) -> bool:
    producer = _txn(r, user, txn_id)  # a new one each try: a refused init may leave it fatal
    try:
        producer.init_transactions(15)
    except KafkaException:
        return False
    into.append(producer)
    return True
