"""`horae dr status`'s figures and their metrics, read from a real broker: the standby's "would be
late by" comes from the planner state in its Kafka (the latest record per trigger), and the lag
counts the writer's records MirrorMaker 2 has not replicated (here: none replicated, no MM2 ran,
so every record of a replicated topic is lag)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from confluent_kafka import Producer
from prometheus_client.parser import text_string_to_metric_families

from horae.contracts import events as ev
from horae.contracts.codec import encode
from horae.contracts.topics import PRODUCER_DEFAULTS, Topic, topic_name
from horae.devstack.stack import LocalStack
from horae.dr.metrics import exposition
from horae.dr.mirror import flow
from horae.dr.promote import standby_due, status
from horae.dr.regions import Region, provision
from horae.settings import Settings


def _state(trigger: str, next_instant: datetime, updated: datetime) -> ev.PlannerState:
    return ev.PlannerState(
        tenant="acme", trigger_id=trigger, trigger_version=1, state=ev.DefinitionState.LIVE,
        updated_at=updated, next_instant=next_instant,
    )  # fmt: skip


def test_the_standby_figures_come_from_its_kafka(
    local_stack: LocalStack, region_settings: Settings, topic_prefix: str, tmp_path: Path
) -> None:
    settings = region_settings
    # both regions on the session's broker, under one prefix: what a writes, b holds
    a = Region("a", tmp_path / "a", local_stack, settings)
    b = Region("b", tmp_path / "b", local_stack, settings)
    provision(a)
    now = datetime.now(UTC)
    records = [
        (b"acme/t1", _state("t1", now - timedelta(seconds=300), now)),  # superseded below
        (b"acme/t1", _state("t1", now + timedelta(seconds=60), now)),
        (b"acme/t2", _state("t2", now - timedelta(seconds=40), now)),
        (b"acme/t3", _state("t3", now - timedelta(seconds=10), now)),
    ]
    producer = Producer(a.client({**PRODUCER_DEFAULTS, "log_level": 3}))
    state_topic = topic_name(Topic.PLANNER_STATE, topic_prefix)
    for key, value in records:
        producer.produce(state_topic, key=key, value=encode(value))
    assert producer.flush(30) == 0

    due = standby_due(b)
    assert due is not None and (due.trigger_id, due.instant) == ("t2", records[2][1].next_instant)

    st = status(flow(a, b, tmp_path / "dr", tmp_path / "cache"), tmp_path / "dr")
    at = time.time()
    assert st.regions == {"a": True, "b": True} and not st.mirror_running
    assert st.lag is not None and st.lag[state_topic] == len(records)
    assert st.lag[topic_name(Topic.FIRES, topic_prefix)] == 0
    metrics = {
        f.name: [(dict(s.labels), s.value) for s in f.samples]
        for f in text_string_to_metric_families(exposition(st.figures(), at).decode())
    }
    assert ({"topic": state_topic}, float(len(records))) in metrics[
        "horae_dr_replication_lag_records"
    ]
    [(_, late)] = metrics["horae_dr_standby_would_be_late_by_seconds"]
    assert 40.0 <= late <= at - now.timestamp() + 40.0
    lines = st.lines(at)
    assert any(line.startswith("the standby would be late by: ") and "acme/t2" in line
               for line in lines), lines  # fmt: skip
