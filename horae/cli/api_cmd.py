"""``horae api``: serve the HTTP API v1 (FastAPI + uvicorn, default 127.0.0.1:8089).

It produces platform-signed definitions and commands to Kafka (as the ``api`` Kafka user, from
``HORAE_KAFKA_USERNAME``/``PASSWORD``), reads the read models and keeps its shared state
(read-your-writes, target verification: :mod:`horae.api.state`, schema
``<projection schema>_api``, made by ``horae migrate``) as the API role
(``HORAE_API_DATABASE_URL``, default: the owner's database as ``horae_api``).

``api.workers`` processes serve one port (uvicorn's supervisor binds it once and hands it to
each; the kernel spreads connections among them); each builds its own producer and pools,
and ends when the supervisor is gone.
Given ``api.tls_cert_file`` and ``api.tls_key_file`` (``HORAE_API_TLS_CERT_FILE`` /
``HORAE_API_TLS_KEY_FILE``), it serves HTTPS only, with that certificate; else plain HTTP.
uvicorn parses HTTP with ``httptools`` and runs on ``uvloop`` when they are installed.
"""

from __future__ import annotations

import argparse
import atexit
import functools
import importlib.util
import os
import signal
import sys
import threading
import time
from typing import TYPE_CHECKING

from horae.cli.common import add_flags, drain_s, require_services, setup_logging
from horae.settings import Settings

if TYPE_CHECKING:
    from fastapi import FastAPI


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    text = "serve the HTTP API (management, dry-run, history) for tenants"
    p = subparsers.add_parser("api", help=text, description=text)
    add_flags(p, "api")
    p.set_defaults(func=run)


def _exit_with_parent() -> None:
    """End this worker gracefully (SIGTERM) once its supervisor is gone, even a killed one: a
    worker never outlives ``horae api``."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="api-parent-watch", daemon=True).start()


def build_app(settings: Settings, worker: bool = False) -> FastAPI:
    """One API process: its producer, its pools (closed when the process exits), its app;
    ``worker``: one of several under uvicorn's supervisor."""
    from horae.api.adapters import KafkaSink, PostgresHistory
    from horae.api.app import create_app
    from horae.api.state import PostgresState, state_schema
    from horae.cli.projections import database_urls
    from horae.kafka.connection import KafkaConnection, use_connection

    setup_logging("api", settings.log_level)
    if worker:  # a spawned process: it did not go through the CLI's configure_process
        _exit_with_parent()
        use_connection(KafkaConnection.from_settings(settings))
    bootstrap, owner = require_services(settings)
    url = database_urls(settings, owner).api
    sink = KafkaSink(bootstrap, settings.topic_prefix)
    history = PostgresHistory(url, settings.projection_schema)
    state = PostgresState(url, state_schema(settings.projection_schema))
    for close in (sink.close, history.close, state.close):
        atexit.register(close)
    return create_app(settings, sink, history, verifications=state, writes=state)


def _check_state(settings: Settings) -> str | None:
    """Why the API role cannot use its state schema, or ``None``."""
    import psycopg

    from horae.api import state
    from horae.cli.projections import database_urls

    _, owner = require_services(settings)
    schema = state.state_schema(settings.projection_schema)
    try:
        with psycopg.connect(database_urls(settings, owner).api, connect_timeout=10) as conn:
            todo = state.pending(conn, schema)
    except psycopg.Error as exc:
        return f"the API role cannot use the database ({str(exc).strip()}): run `horae migrate`"
    if todo:
        return f"schema {schema} needs {', '.join(todo)}: run `horae migrate` as the owner"
    return None


def run(settings: Settings, args: argparse.Namespace) -> int:
    import uvicorn
    from uvicorn.supervisors import Multiprocess

    setup_logging("api", settings.log_level)
    if not settings.api.token_keys:
        print("horae api: HORAE_API_TOKEN_KEYS is not set (JSON {kid: secret})", file=sys.stderr)
        return 2
    if settings.platform_key is None:
        print("horae api: HORAE_PLATFORM_KEY is not set: the API signs with it", file=sys.stderr)
        return 2
    api = settings.api
    if (api.tls_cert_file is None) != (api.tls_key_file is None):
        print(
            "horae api: HORAE_API_TLS_CERT_FILE and HORAE_API_TLS_KEY_FILE go together",
            file=sys.stderr,
        )
        return 2
    problem = _check_state(settings)
    if problem is not None:
        print(f"horae api: {problem}", file=sys.stderr)
        return 2
    config = uvicorn.Config(
        functools.partial(build_app, settings, settings.api.workers > 1),
        factory=True,
        host=settings.api.host,
        port=settings.api.port,
        workers=settings.api.workers,
        http="httptools" if importlib.util.find_spec("httptools") else "h11",
        loop="uvloop" if importlib.util.find_spec("uvloop") else "asyncio",
        log_level=settings.log_level.lower(),
        access_log=False,
        ssl_certfile=api.tls_cert_file,
        ssl_keyfile=api.tls_key_file,
        timeout_graceful_shutdown=int(drain_s("api", settings)),  # open requests are cut then
    )
    if settings.api.workers == 1:
        uvicorn.Server(config).run()
    else:
        Multiprocess(config, sockets=[config.bind_socket()]).run()
    return 0
