"""Two projectors in one group: partitions move between them (join, leave) while records flow;
the result equals a rebuild and nothing is doubled."""

from __future__ import annotations

import dataclasses
from typing import Any

import psycopg

from horae.projections.projector import Projector, ProjectorConfig
from horae.projections.rebuild import rebuild, verify
from horae.projections.synthetic import HistoryProducer, history
from tests.integration.projections.projection_support import (
    PARTITIONS,
    end_offsets,
    running,
    wait_caught_up,
)
from tests.waiting import wait_until


def test_partitions_move_between_members_without_loss_or_doubling(
    config: ProjectorConfig,
    producer: HistoryProducer,
    db: psycopg.Connection[Any],
    topics: list[str],
) -> None:
    config = dataclasses.replace(config, batch_records=200)
    chunks = [
        list(
            history(
                1500,
                tenants=3,
                triggers=4,
                start_index=i * 1500,
                with_definitions=i == 0,
                prefix=config.topic_prefix,
                partitions=PARTITIONS,
            )
        )
        for i in range(3)
    ]

    def send(chunk: int) -> None:
        producer.send(chunks[chunk])
        producer.flush()

    first = Projector(config)
    second = Projector(config)
    with running(first):
        send(0)
        wait_until(lambda: first.stats.records, 30, 0.05, "the first member projects")
        with running(second):
            # the join first: a first member that drained chunk 1 before the (authenticated,
            # slower) join completed would leave the second member nothing to project
            wait_until(lambda: first.positions and second.positions, 30, 0.1, "no rebalance")
            send(1)
            wait_until(lambda: second.stats.records, 30, 0.05, "the second member projects")
        send(2)  # the second member left: the first takes everything back
        wait_caught_up(db, config.schema, end_offsets(config.bootstrap, topics))
    assert first.stats.records + second.stats.records >= 4500
    counts = db.execute(
        f'SELECT count(*), count(DISTINCT fire_key) FROM "{config.schema}".fires'
    ).fetchone()
    assert counts == (4500, 4500)
    shadow = f"{config.schema}_shadow"
    rebuild(dataclasses.replace(config, schema=shadow))
    report = verify(config.database_url, config.schema, shadow)
    assert report.divergence == 0 and report.offsets_equal, report.render()
