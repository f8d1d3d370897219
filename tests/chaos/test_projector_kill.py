"""Chaos: SIGKILL the ``horae projector`` process mid-batch, several times, while 20,000 fire
records stream in. Afterwards every table equals a from-scratch rebuild (zero divergence) and no
row is doubled. "Mid-batch" is observed, not hoped for: the kill is sent while the projector's
PostgreSQL session is inside its batch transaction (pg_stat_activity)."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from horae.contracts.topics import Topic, topic_name
from horae.projections import schema as pschema
from horae.projections.projector import ProjectorConfig
from horae.projections.rebuild import end_offsets, rebuild, verify
from horae.projections.roles import Roles
from horae.projections.synthetic import HistoryProducer, history
from tests.integration.projections.projection_support import (
    PARTITIONS,
    create_topics,
    stored_offsets,
)
from tests.paths import REPO_ROOT
from tests.waiting import wait_until

FIRES = 20_000
KILLS = 5


@pytest.fixture
def env(
    kafka_bootstrap: str, database_url: str, topic_prefix: str, unique: str
) -> Iterator[dict[str, str]]:
    """The projector's environment; its topics are deleted when the test ends (``topic_prefix``),
    its schemas dropped here."""
    prefix, schema = topic_prefix, f"chaos_{unique}"
    create_topics(kafka_bootstrap, prefix)
    with psycopg.connect(database_url, autocommit=True) as conn:  # as `horae migrate` does
        pschema.migrate(conn, schema, Roles())  # the projector role may not create it
    yield {
        **os.environ,
        "HORAE_KAFKA_BOOTSTRAP": kafka_bootstrap,
        "HORAE_DATABASE_URL": database_url,
        "HORAE_TOPIC_PREFIX": prefix,
        "HORAE_PROJECTION_SCHEMA": schema,
        "HORAE_PROJECTOR_BATCH_RECORDS": "1000",
        "HORAE_PROJECTOR_BATCH_MS": "100",
        "HORAE_PROJECTOR_INSTANCE_ID": f"chaos-{unique}",  # a restart takes over at once
        "HORAE_PROJECTOR_SESSION_TIMEOUT_MS": "6000",
        "HORAE_LOG_LEVEL": "WARNING",
    }
    with psycopg.connect(database_url, autocommit=True) as conn:
        for s in (schema, f"{schema}_shadow"):
            conn.execute(f'DROP SCHEMA IF EXISTS "{s}" CASCADE')


def start(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """A projector process; its output goes to ``log`` (appended)."""
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "horae.cli.main", "projector"], env=env, cwd=REPO_ROOT,
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip


def stored_total(db: psycopg.Connection[Any], schema: str) -> int:
    return sum(stored_offsets(db, schema).values())


def batch_open(
    proc: subprocess.Popen[bytes], db: psycopg.Connection[Any], schema: str, log: Path
) -> Callable[[], bool]:
    """True while ``proc`` is inside a batch transaction; fails once ``proc`` died."""

    def check() -> bool:
        assert proc.poll() is None, log.read_text()[-3000:]
        return in_batch(db, schema)

    return check


def committed_since(
    db: psycopg.Connection[Any], schema: str, before: int, produced: threading.Event
) -> Callable[[], bool]:
    """True once the stored offsets passed ``before`` in total, or everything was produced."""
    return lambda: produced.is_set() or stored_total(db, schema) > before


def in_batch(db: psycopg.Connection[Any], schema: str) -> bool:
    row = db.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s "
        "AND state IN ('active', 'idle in transaction') AND xact_start IS NOT NULL "
        "AND (query LIKE 'COPY stage_%%' OR query LIKE '%%FROM stage_%%' "
        "     OR query LIKE '%%FROM projection_offsets o%%')",
        (f"horae-projector:{schema}",),
    ).fetchone()
    return row is not None and row[0] > 0


@pytest.mark.timeout(280)
def test_sigkill_mid_batch_loses_and_doubles_nothing(
    env: dict[str, str], database_url: str, tmp_path: Path
) -> None:
    log = tmp_path / "projector.log"
    bootstrap, prefix, schema = (
        env["HORAE_KAFKA_BOOTSTRAP"], env["HORAE_TOPIC_PREFIX"], env["HORAE_PROJECTION_SCHEMA"]
    )  # fmt: skip
    records = list(history(FIRES, 4, 25, dispatch_share=0.1, prefix=prefix, partitions=PARTITIONS))
    producer = HistoryProducer(bootstrap, prefix)
    produced = threading.Event()

    def stream() -> None:  # ~2,000 records/s, so the kills land while records flow
        for i in range(0, len(records), 200):
            producer.send(records[i : i + 200])
            producer.producer.poll(0)
            time.sleep(0.1)
        producer.flush()
        produced.set()

    streamer = threading.Thread(target=stream, daemon=True)
    streamer.start()
    kills = 0
    with psycopg.connect(database_url, autocommit=True) as db:
        proc = start(env, log)
        try:
            while kills < KILLS:
                wait_until(batch_open(proc, db, schema, log), 20, 0.002, "no batch seen")
                proc.send_signal(signal.SIGKILL)
                proc.wait(10)
                kills += 1
                before = stored_total(db, schema)
                proc = start(env, log)
                # the restarted projector commits a batch before the next kill, unless all is in
                wait_until(
                    committed_since(db, schema, before, produced),
                    60,
                    0.05,
                    "the restarted projector committed nothing",
                )
            streamer.join(120)
            assert produced.is_set()
            live = ProjectorConfig(bootstrap, database_url, schema, prefix)
            ends = end_offsets(bootstrap, live.existing_topics())  # tenants' events topics too
            alive = proc

            def caught_up() -> bool:
                assert alive.poll() is None, log.read_text()[-3000:]
                stored = stored_offsets(db, schema)
                return all(stored.get(tp, 0) >= end for tp, end in ends.items() if end)

            wait_until(caught_up, 90, 0.2, "never caught up")
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        assert kills == KILLS

        n_attempts = sum(1 for r in records if r.topic == topic_name(Topic.ATTEMPTS, prefix))
        counts = db.execute(
            f"""SELECT (SELECT count(*) FROM "{schema}".fires),
                       (SELECT count(DISTINCT fire_key) FROM "{schema}".fires),
                       (SELECT count(*) FROM "{schema}".attempts),
                       (SELECT count(*) FROM "{schema}".fire_duplicates),
                       (SELECT count(*) FROM "{schema}".projection_errors)"""
        ).fetchone()
        assert counts == (FIRES, FIRES, n_attempts, 0, 0)

    config = ProjectorConfig(bootstrap, database_url, f"{schema}_shadow", prefix)
    progress = rebuild(dataclasses.replace(config))
    assert progress.done == sum(ends.values())
    report = verify(database_url, schema, f"{schema}_shadow")
    assert report.offsets_equal
    assert report.divergence == 0, report.render()
