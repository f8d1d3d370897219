"""Restarting PostgreSQL while the projector runs loses nothing: it retries, catches up, and the
result equals a rebuild."""

from __future__ import annotations

import dataclasses

import psycopg
import pytest

from horae.devstack.postgres import PostgresCluster
from horae.projections.projector import Projector, ProjectorConfig
from horae.projections.rebuild import rebuild, verify
from horae.projections.synthetic import HistoryProducer, history
from tests.integration.projections.projection_support import (
    PARTITIONS,
    end_offsets,
    running,
    stored_offsets,
    wait_caught_up,
)
from tests.waiting import wait_until


@pytest.mark.timeout(180)
def test_postgres_restart_loses_nothing(
    config: ProjectorConfig,
    producer: HistoryProducer,
    topics: list[str],
    private_postgres: PostgresCluster,
) -> None:
    config = dataclasses.replace(config, database_url=private_postgres.url, batch_records=500)
    prefix = config.topic_prefix
    producer.send(history(3000, tenants=2, triggers=5, prefix=prefix, partitions=PARTITIONS))
    producer.flush()
    with (
        psycopg.connect(private_postgres.url, autocommit=True) as watch,
        running(Projector(config)) as projector,
    ):
        wait_until(lambda: stored_offsets(watch, config.schema), 30, 0.05, "a batch stored")
        private_postgres.stop()  # fast shutdown: the batch in flight is rolled back
        later = history(3000, 2, 5, start_index=3000, prefix=prefix, partitions=PARTITIONS)
        producer.send(later)
        producer.flush()
        wait_until(lambda: projector.stats.db_retries, 60, 0.05, "retried while it is down")
        private_postgres.start()
        ends = end_offsets(config.bootstrap, topics)
        with psycopg.connect(private_postgres.url, autocommit=True) as db:
            wait_caught_up(db, config.schema, ends, timeout_s=90)
            assert db.execute(f'SELECT count(*) FROM "{config.schema}".fires').fetchone() == (6000,)
    shadow = f"{config.schema}_shadow"
    rebuild(dataclasses.replace(config, schema=shadow))
    report = verify(private_postgres.url, config.schema, shadow)
    assert report.divergence == 0, report.render()
