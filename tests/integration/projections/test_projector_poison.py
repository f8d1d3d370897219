"""A record the read models cannot hold stalls no one (real broker, real database): a definition
with a NUL byte in its description, and one with a NUL in a label (its JSON escape ``\\u0000``,
which jsonb refuses), produced straight onto ``definitions.accepted`` below any ingress check,
between other tenants' records on the same partition. The projector retries the batch, splits it,
sets each of the two aside in ``projection_errors`` (cause ``store``, with its coordinates, key
and bytes), counts them, and projects every other record; the partition goes on moving, and a
rebuild sets the same records aside."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import psycopg

from horae.contracts.codec import encode
from horae.contracts.topics import Topic, topic_name
from horae.ports import Emit
from horae.projections.isolate import STORE_CAUSE
from horae.projections.projector import Projector, ProjectorConfig
from horae.projections.rebuild import rebuild, verify
from horae.projections.synthetic import HistoryProducer, definition
from tests.integration.projections.projection_support import (
    end_offsets,
    running,
    stored_offsets,
    wait_caught_up,
)
from tests.waiting import wait_until

PARTITION = 0


def triggers(db: psycopg.Connection[Any], schema: str) -> set[tuple[str, str]]:
    rows = db.execute(f'SELECT tenant, description FROM "{schema}".triggers').fetchall()
    return {(str(t), str(d)) for t, d in rows}


def test_a_record_the_store_cannot_hold_is_set_aside_and_the_partition_moves_on(
    config: ProjectorConfig,
    producer: HistoryProducer,
    db: psycopg.Connection[Any],
    topics: list[str],
) -> None:
    accepted = topic_name(Topic.ACCEPTED, config.topic_prefix)

    def record(tenant: str, description: str, labels: dict[str, str] | None = None) -> Emit:
        d = replace(definition(tenant, "t"), description=description)
        if labels is not None:
            d = replace(d, labels=labels)
        return Emit(accepted, f"{tenant}/t".encode(), encode(d), PARTITION)

    producer.send(
        [
            record("tenant-a", "a"),
            record("tenant-b", "b"),
            record("evil-1", "before\x00after"),
            record("tenant-c", "c"),
            record("evil-2", "label", {"team": "x\x00y"}),
            record("tenant-d", "d"),
        ]
    )
    producer.flush()
    ends = end_offsets(config.bootstrap, topics)
    assert ends[(accepted, PARTITION)] == 6
    projector = Projector(replace(config, record_retries=1, retry_backoff_s=1.0))
    with running(projector):
        wait_caught_up(db, config.schema, ends)
        assert triggers(db, config.schema) == {
            ("tenant-a", "a"),
            ("tenant-b", "b"),
            ("tenant-c", "c"),
            ("tenant-d", "d"),
        }
        errors = db.execute(
            'SELECT topic, partition, "offset", cause, detail, record_key, '
            "record_ts IS NOT NULL "
            f'FROM "{config.schema}".projection_errors ORDER BY "offset"'
        ).fetchall()
        assert [e[:4] for e in errors] == [
            (accepted, PARTITION, 2, STORE_CAUSE),
            (accepted, PARTITION, 4, STORE_CAUSE),
        ]
        assert "stage_definitions" in errors[0][4] and "0x00" in errors[0][4]
        assert "stage_definitions" in errors[1][4] and "\\u0000" in errors[1][4]
        assert [e[5] for e in errors] == [b"evil-1/t", b"evil-2/t"]
        assert all(e[6] for e in errors)
        value = db.execute(
            f'SELECT record_value FROM "{config.schema}".projection_errors WHERE "offset" = 2'
        ).fetchone()
        assert value is not None and bytes(value[0]) == encode(
            replace(definition("evil-1", "t"), description="before\x00after")
        )
        samples = projector.metrics.registry.get_sample_value(
            "horae_projection_errors_total", {"schema": config.schema, "cause": STORE_CAUSE}
        )
        assert samples == 2

        # the partition goes on: a later tenant's record arrives at once
        producer.send([record("tenant-e", "e")])
        producer.flush()
        wait_until(
            lambda: ("tenant-e", "e") in triggers(db, config.schema),
            30,
            message=lambda: f"stored {stored_offsets(db, config.schema)}",
        )
    assert stored_offsets(db, config.schema)[(accepted, PARTITION)] == 7
    assert projector.stats.errors == 2

    # a rebuild sets the same records aside, with the same rows
    shadow = replace(config, schema=f"{config.schema}_shadow", record_retries=0)
    rebuild(shadow)
    report = verify(config.database_url, config.schema, shadow.schema)
    assert report.divergence == 0, report.render()
    assert report.tables["projection_errors"].live_rows == 2
