"""The projector on the real broker and database: every table filled from produced records."""

from __future__ import annotations

from typing import Any

import psycopg

from horae.contracts.topics import Topic
from horae.projections.projector import Projector, ProjectorConfig
from horae.projections.synthetic import HistoryProducer, history
from tests.integration.projections.projection_support import end_offsets, running, wait_caught_up


def count(db: psycopg.Connection[Any], schema: str, table: str) -> int:
    row = db.execute(f'SELECT count(*) FROM "{schema}".{table}').fetchone()
    assert row is not None
    return int(row[0])


def test_projects_every_table(
    config: ProjectorConfig,
    producer: HistoryProducer,
    db: psycopg.Connection[Any],
    topics: list[str],
) -> None:
    records = list(history(600, tenants=2, triggers=3))
    producer.send(records)
    producer.send_raw(Topic.FIRES, "garbage", b"\x00\x00\x00\x00\x01not avro", "x")
    producer.flush()
    ends = end_offsets(config.bootstrap, topics)
    projector = Projector(config)
    with running(projector):
        wait_caught_up(db, config.schema, ends)
    s = config.schema
    by_topic = {t: sum(1 for r in records if r.topic is t) for t in Topic}
    assert count(db, s, "fires") == 600
    assert count(db, s, "attempts") == by_topic[Topic.ATTEMPTS]
    assert count(db, s, "work_outcomes") == by_topic[Topic.OUTCOMES]
    assert count(db, s, "schedule_events") == by_topic[Topic.SCHEDULE_EVENTS]
    assert count(db, s, "audit_entries") == 2
    assert count(db, s, "triggers") == 6
    assert count(db, s, "trigger_versions") == 6
    assert count(db, s, "projection_errors") == 1
    assert count(db, s, "fire_duplicates") == 0
    # every fire with an outcome has its terminal time and lateness
    row = db.execute(
        f'SELECT count(*) FROM "{s}".fires WHERE outcome IS NOT NULL '
        "AND (terminal_at IS NULL OR lateness_ms IS NULL OR first_attempt_at IS NULL)"
    ).fetchone()
    assert row == (0,)
    billing = db.execute(f'SELECT sum(fires) + sum(non_fires) FROM "{s}".billing_daily').fetchone()
    assert billing == (600,)
    assert projector.stats.errors == 1
