"""Entry point of the ``horae`` CLI.

Every module in :mod:`horae.cli` that defines ``register(subparsers)`` contributes subcommands; a
subcommand sets ``func`` with ``parser.set_defaults(func=...)``: it takes the settings (the
environment, ``HORAE_*``, with the command's flags applied) and the parsed namespace, and returns
an exit code.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence

from confluent_kafka import KafkaException
from pydantic import ValidationError

import horae.cli
from horae import failpoints
from horae.cli.common import settings_from_args
from horae.contracts.codec import set_wire_mode, use_schema_registry
from horae.contracts.memo import set_ingest_memo
from horae.devstack import StackError
from horae.kafka.connection import KafkaConnection, use_connection
from horae.ports import Fenced
from horae.settings import Settings, get_settings
from horae.streams.planner.index import set_planner_index


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="horae", description="Horae: cron-as-a-service, event-sourced on Apache Kafka."
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(horae.cli.__path__), key=lambda m: m.name):
        if info.name == "main":
            continue
        module = importlib.import_module(f"horae.cli.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(subparsers)
    return parser


def configure_process(settings: Settings) -> None:
    """Hand the process-wide settings to the layers that keep them (they read no settings)."""
    set_wire_mode(settings.codec)
    set_ingest_memo(settings.ingest_memo)
    set_planner_index(settings.planner.index)
    use_schema_registry(settings.schema_registry_url)
    failpoints.arm(settings.failpoints)
    use_connection(KafkaConnection.from_settings(settings))  # every client of the process


def _invalid(exc: ValidationError) -> str:
    where = exc.title.removesuffix("Settings").lower() or "shared"
    what = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
    return f"invalid {where} settings: {what}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    try:
        settings = settings_from_args(args, get_settings())
    except ValidationError as exc:
        print(f"horae {args.command}: {_invalid(exc)}", file=sys.stderr)
        return 2
    try:
        configure_process(settings)
    except ValueError as exc:  # a connection the settings cannot make (SASL_SSL and no user)
        print(f"horae {args.command}: invalid settings: {exc}", file=sys.stderr)
        return 2
    try:
        code: int = func(settings, args)
    except KeyboardInterrupt:
        return 130
    except (StackError, KafkaException, Fenced) as exc:  # setup problem or fenced: say what
        print(f"horae {args.command}: {exc}", file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
