"""Rebuild into a shadow schema, verify against live, swap; a running projector follows a swap."""

from __future__ import annotations

import dataclasses
from typing import Any

import psycopg

from horae.contracts import events as ev
from horae.contracts.codec import encode
from horae.contracts.topics import Topic
from horae.projections import schema as pschema
from horae.projections.projector import Projector, ProjectorConfig
from horae.projections.rebuild import Progress, rebuild, verify
from horae.projections.synthetic import START, HistoryProducer, history
from horae.projections.synthetic import fire as make_fire
from tests.integration.projections.projection_support import (
    PARTITIONS,
    end_offsets,
    running,
    wait_caught_up,
)


def test_rebuild_equals_live_then_divergence_is_reported_and_swap_repairs(
    config: ProjectorConfig,
    producer: HistoryProducer,
    db: psycopg.Connection[Any],
    topics: list[str],
) -> None:
    producer.send(history(900, 3, 3, prefix=producer.prefix, partitions=PARTITIONS))
    f = make_fire("tenant-0", "trigger-0", START)
    tk = ev.trigger_key(f.tenant, f.trigger_id)
    other = dataclasses.replace(f, state=ev.FireState.SHED, cause="shed: overload")
    producer.send_raw(Topic.FIRES, f.fire_key, encode(other), tk)  # a second decision
    producer.send_raw(Topic.ATTEMPTS, "x", b"garbage", tk)  # undecodable
    producer.flush()
    ends = end_offsets(config.bootstrap, topics)
    live = Projector(config)
    with running(live):
        wait_caught_up(db, config.schema, ends)
    registry, s = live.metrics.registry, config.schema
    sample = registry.get_sample_value
    assert sample("horae_projection_duplicate_keys_total", {"schema": s, "kind": "different"}) == 1
    assert sample("horae_projection_errors_total", {"schema": s, "cause": "framing"}) == 1
    # the duplicate is staged, not applied
    assert sample("horae_projection_rows_total", {"schema": s, "table": "fires"}) == 901

    shadow = f"{config.schema}_shadow"
    reports: list[Progress] = []
    replay = dataclasses.replace(config, schema=shadow)
    progress = rebuild(replay, reports.append)
    assert progress.done == progress.total == sum(ends.values())
    assert reports and "rec/s" in reports[-1].render()
    # the rebuilt tables have planner statistics (a bulk load planned as empty pages slowly)
    unanalyzed = db.execute(
        "SELECT relname FROM pg_stat_user_tables WHERE schemaname = %s AND last_analyze IS NULL",
        (shadow,),
    ).fetchall()
    assert unanalyzed == []
    report = verify(config.database_url, config.schema, shadow)
    assert report.divergence == 0, report.render()
    assert report.offsets_equal
    assert report.tables["fires"].live_rows == 900
    assert report.tables["fire_duplicates"].live_rows == 1
    assert report.tables["projection_errors"].live_rows == 1

    # damage live: a lost row, a changed row; verify names them
    db.execute(f'DELETE FROM "{config.schema}".attempts WHERE n = 2')
    db.execute(f"""UPDATE "{config.schema}".fires SET cause = 'tampered'
                   WHERE fire_key = %s""", (f.fire_key,))  # fmt: skip
    report = verify(config.database_url, config.schema, shadow)
    assert report.tables["fires"].different == 1
    assert report.tables["attempts"].only_shadow > 0
    assert f"fire_key={f.fire_key}" in report.render()

    old = pschema.swap(db, config.schema, shadow)
    assert not pschema.schema_exists(db, shadow)
    row = db.execute(
        f'SELECT cause FROM "{config.schema}".fires WHERE fire_key = %s', (f.fire_key,)
    )
    assert row.fetchone() == (None,)
    assert verify(config.database_url, config.schema, old).divergence > 0


def test_running_projector_follows_a_swap(
    config: ProjectorConfig,
    producer: HistoryProducer,
    db: psycopg.Connection[Any],
    topics: list[str],
) -> None:
    producer.send(history(300, 1, 3, prefix=producer.prefix, partitions=PARTITIONS))
    producer.flush()
    ends = end_offsets(config.bootstrap, topics)
    with running(Projector(config)) as projector:
        wait_caught_up(db, config.schema, ends)
        shadow = f"{config.schema}_shadow"
        rebuild(dataclasses.replace(config, schema=shadow))
        pschema.swap(db, config.schema, shadow)
        later = history(
            300,
            1,
            3,
            start_index=300,
            with_definitions=False,
            prefix=producer.prefix,
            partitions=PARTITIONS,
        )
        producer.send(later)
        producer.flush()
        ends = end_offsets(config.bootstrap, topics)
        wait_caught_up(db, config.schema, ends)
        assert projector.stats.resyncs >= 1
    count = db.execute(f'SELECT count(*) FROM "{config.schema}".fires').fetchone()
    assert count == (600,)
