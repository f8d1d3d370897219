"""``horae api``: serve the HTTP API v1 (FastAPI + uvicorn, default 127.0.0.1:8089).

It produces platform-signed definitions and commands to Kafka (as the ``api`` Kafka user, from
``HORAE_KAFKA_USERNAME``/``PASSWORD``) and reads the read models as the reader role
(``HORAE_READER_DATABASE_URL``, default: the owner's database as ``horae_reader``).
"""

from __future__ import annotations

import argparse
import sys

from horae.cli.common import add_flags, require_services, setup_logging
from horae.projections.roles import DatabaseUrls
from horae.settings import Settings


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    text = "serve the HTTP API (management, dry-run, history) for tenants"
    p = subparsers.add_parser("api", help=text, description=text)
    add_flags(p, "api")
    p.set_defaults(func=run)


def run(settings: Settings, args: argparse.Namespace) -> int:
    import uvicorn

    from horae.api.adapters import KafkaSink, PostgresHistory
    from horae.api.app import create_app

    setup_logging("api", settings.log_level)
    if not settings.api.token_keys:
        print("horae api: HORAE_API_TOKEN_KEYS is not set (JSON {kid: secret})", file=sys.stderr)
        return 2
    if settings.platform_key is None:
        print("horae api: HORAE_PLATFORM_KEY is not set: the API signs with it", file=sys.stderr)
        return 2
    bootstrap, owner = require_services(settings)
    urls = DatabaseUrls.resolve(
        owner, settings.projector_database_url, settings.reader_database_url
    )
    sink = KafkaSink(bootstrap, settings.topic_prefix)
    history = PostgresHistory(urls.reader, settings.projection_schema)
    app = create_app(settings, sink, history)
    try:
        uvicorn.run(
            app,
            host=settings.api.host,
            port=settings.api.port,
            log_level=settings.log_level.lower(),
            access_log=False,
        )
    finally:
        sink.close()
        history.close()
    return 0
