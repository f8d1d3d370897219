"""Fixtures of the projection tests: topics under a unique prefix (deleted afterwards), a unique
schema (dropped afterwards), a producer of synthetic history and a projector configuration."""

from __future__ import annotations

import shutil
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from horae.devstack.postgres import PostgresCluster
from horae.projections.projector import ProjectorConfig
from horae.projections.synthetic import HistoryProducer
from tests.integration.projections.projection_support import create_topics, projected_names


@pytest.fixture
def prefix(kafka_bootstrap: str, topic_prefix: str) -> str:
    """The projected topics under this test's prefix (deleted when the test ends)."""
    create_topics(kafka_bootstrap, topic_prefix)
    return topic_prefix


@pytest.fixture
def topics(prefix: str) -> list[str]:
    return [name for name, _ in projected_names(prefix)]


@pytest.fixture
def schema(database_url: str, unique: str) -> Iterator[str]:
    name = f"proj_{unique}"
    yield name
    with psycopg.connect(database_url, autocommit=True) as conn:
        for s in (name, f"{name}_shadow", f"{name}_old", f"{name}_api"):
            conn.execute(f'DROP SCHEMA IF EXISTS "{s}" CASCADE')


@pytest.fixture
def db(database_url: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(database_url, autocommit=True) as conn:
        yield conn


@pytest.fixture
def producer(kafka_bootstrap: str, prefix: str) -> HistoryProducer:
    return HistoryProducer(kafka_bootstrap, prefix)


@pytest.fixture
def config(kafka_bootstrap: str, database_url: str, prefix: str, schema: str) -> ProjectorConfig:
    return ProjectorConfig(
        bootstrap=kafka_bootstrap,
        database_url=database_url,
        schema=schema,
        topic_prefix=prefix,
        batch_ms=100,
        consumer_overrides={"session.timeout.ms": 6000, "heartbeat.interval.ms": 500},
    )


@pytest.fixture
def private_postgres(tmp_path: Path) -> Iterator[PostgresCluster]:
    """A throwaway PostgreSQL cluster of this test alone, to stop and start at will: restarting
    the session's database (external or not) would break whatever else uses it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    home = tmp_path / "pg-restart"
    cluster = PostgresCluster(home, port)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(home, ignore_errors=True)
