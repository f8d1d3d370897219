"""The CLI end to end in subprocesses: ``horae migrate``, ``horae projector`` (with /metrics),
``horae projections rebuild`` (progress on stderr) and ``verify --swap``."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import psycopg

from horae.projections.projector import ProjectorConfig
from horae.projections.synthetic import HistoryProducer, history
from tests.integration.projections.projection_support import PARTITIONS, end_offsets, wait_caught_up
from tests.paths import REPO_ROOT
from tests.waiting import wait_until


def horae(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "horae.cli.main", *args],
        env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=90, check=False,
    )  # fmt: skip


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_cli_projector_metrics_rebuild_verify_swap(
    config: ProjectorConfig,
    producer: HistoryProducer,
    db: psycopg.Connection[Any],
    topics: list[str],
    tmp_path: Path,
) -> None:
    env = {
        **os.environ,
        "HORAE_KAFKA_BOOTSTRAP": config.bootstrap,
        "HORAE_DATABASE_URL": config.database_url,
        "HORAE_TOPIC_PREFIX": config.topic_prefix,
        "HORAE_PROJECTION_SCHEMA": config.schema,
    }
    done = horae("migrate", env=env)
    assert done.returncode == 0 and "0001_initial" in done.stdout
    assert "up to date" in horae("migrate", env=env).stdout

    producer.send(history(500, 2, 2, prefix=producer.prefix, partitions=PARTITIONS))
    producer.flush()
    ends = end_offsets(config.bootstrap, topics)
    port = free_port()
    served = (
        "horae_projection_lag_records{",
        "horae_projection_lag_seconds{",
        "horae_projection_rows_total{",
        "horae_projection_rows_per_second{",
    )
    log = tmp_path / "projector.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "horae.cli.main", "projector", "--metrics-port", str(port)],
            env=env, cwd=REPO_ROOT, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        wait_caught_up(db, config.schema, ends, alive=lambda: proc.poll() is None)

        def scraped() -> str:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
                text: str = resp.read().decode()
            return text if all(name in text for name in served) else ""

        # the lag gauges appear with the lag refresh after the last batch
        metrics = wait_until(scraped, 30, 0.2, lambda: f"metrics missing of {served}")
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0, log.read_text()
    assert f'horae_projection_rows_total{{schema="{config.schema}",table="fires"}} 500.0' in metrics

    rebuilt = horae("projections", "rebuild", env=env)
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert "records" in rebuilt.stderr and "rec/s" in rebuilt.stderr
    verified = horae("projections", "verify", env=env)
    assert verified.returncode == 0, verified.stdout
    assert "divergence: 0 rows" in verified.stdout
    db.execute(f'DELETE FROM "{config.schema}".fires WHERE state = %s', ("skipped",))
    diverged = horae("projections", "verify", env=env)
    assert diverged.returncode == 1 and "only shadow" in diverged.stdout
    swapped = horae("projections", "verify", "--swap", env=env)
    assert swapped.returncode == 0 and "swapped" in swapped.stdout
    assert horae("projections", "verify", env=env).returncode == 2  # no shadow any more
    count = db.execute(f'SELECT count(*) FROM "{config.schema}".fires').fetchone()
    assert count == (500,)
