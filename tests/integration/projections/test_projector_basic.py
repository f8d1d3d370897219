"""The projector on the real broker and database: every table filled from produced records."""

from __future__ import annotations

from collections import defaultdict
from datetime import date
from typing import Any

import psycopg

from horae.contracts import events as ev
from horae.contracts.codec import decode
from horae.contracts.topics import Topic, is_events_topic, topic_name
from horae.ports import Emit
from horae.projections.projector import Projector, ProjectorConfig
from horae.projections.synthetic import HistoryProducer, history
from tests.integration.projections.projection_support import (
    PARTITIONS,
    end_offsets,
    running,
    wait_caught_up,
)

GARBAGE = b"\x00\x00\x00\x00\x01not avro"


def count(db: psycopg.Connection[Any], schema: str, table: str) -> int:
    row = db.execute(f'SELECT count(*) FROM "{schema}".{table}').fetchone()
    assert row is not None
    return int(row[0])


def expected_billing(
    records: list[Emit], prefix: str
) -> dict[tuple[str, date], tuple[int, int, int, int]]:
    """Per tenant and UTC day of the scheduled instant: fired, not fired, attempts, succeeded,
    counted from the produced records themselves."""
    fires = {
        f.fire_key: f
        for r in records
        if r.topic == topic_name(Topic.FIRES, prefix)
        for f in [decode(r.value or b"", ev.FireRecord)]
    }
    counts: dict[tuple[str, date], list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for f in fires.values():
        counts[(f.tenant, f.scheduled_at.date())][0 if f.state is ev.FireState.FIRED else 1] += 1
    for r in records:
        if r.topic == topic_name(Topic.ATTEMPTS, prefix):
            f = fires[decode(r.value or b"", ev.Attempt).fire_key]
            counts[(f.tenant, f.scheduled_at.date())][2] += 1
        elif r.topic == topic_name(Topic.OUTCOMES, prefix):
            o = decode(r.value or b"", ev.WorkOutcome)
            if o.state is ev.OutcomeState.SUCCEEDED:
                counts[(o.tenant, fires[o.fire_key].scheduled_at.date())][3] += 1
    return {k: (a, b, c, d) for k, (a, b, c, d) in counts.items()}


def test_projects_every_table(
    config: ProjectorConfig,
    producer: HistoryProducer,
    db: psycopg.Connection[Any],
    topics: list[str],
) -> None:
    prefix = config.topic_prefix
    records = list(history(600, tenants=2, triggers=3, prefix=prefix, partitions=PARTITIONS))
    producer.send(records)
    producer.send_raw(Topic.FIRES, "garbage", GARBAGE, "x")
    producer.flush()
    ends = end_offsets(config.bootstrap, topics)
    projector = Projector(config)
    with running(projector):
        wait_caught_up(db, config.schema, ends)
    s = config.schema
    by_topic = {t: sum(1 for r in records if r.topic == topic_name(t, prefix)) for t in Topic}
    assert count(db, s, "fires") == 600
    assert count(db, s, "attempts") == by_topic[Topic.ATTEMPTS]
    assert count(db, s, "work_outcomes") == by_topic[Topic.OUTCOMES]
    events = sum(1 for r in records if is_events_topic(r.topic, prefix))  # the tenants' topics
    assert events > 0 and count(db, s, "schedule_events") == events
    assert count(db, s, "audit_entries") == 2
    assert count(db, s, "triggers") == 6
    assert count(db, s, "trigger_versions") == 6
    errors = db.execute(
        f'SELECT topic, cause, record_key, record_value FROM "{s}".projection_errors'
    ).fetchall()
    # schema id 1 is a definition's: its body is read, and runs out of bytes
    assert errors == [(topic_name(Topic.FIRES, config.topic_prefix), "avro", b"garbage", GARBAGE)]
    assert count(db, s, "fire_duplicates") == 0
    # every fire with an outcome has its terminal time and lateness
    row = db.execute(
        f'SELECT count(*) FROM "{s}".fires WHERE outcome IS NOT NULL '
        "AND (terminal_at IS NULL OR lateness_ms IS NULL OR first_attempt_at IS NULL)"
    ).fetchone()
    assert row == (0,)
    billing = db.execute(
        f'SELECT tenant, day, fires, non_fires, attempts, succeeded FROM "{s}".billing_daily'
    ).fetchall()
    assert {(t, d): tuple(n) for t, d, *n in billing} == expected_billing(records, prefix)
    assert projector.stats.errors == 1
