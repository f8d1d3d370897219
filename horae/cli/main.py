"""Entry point of the ``horae`` CLI.

Every module in :mod:`horae.cli` that defines ``register(subparsers)`` contributes subcommands; a
subcommand sets ``func`` (taking the parsed namespace, returning an exit code) with
``parser.set_defaults(func=...)``. Flags take their defaults from the environment (``HORAE_*``).
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence

from confluent_kafka import KafkaException

import horae.cli
from horae.devstack import StackError


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


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    try:
        code: int = func(args)
    except KeyboardInterrupt:
        return 130
    except (StackError, KafkaException) as exc:  # a setup problem: say what, not where
        print(f"horae {args.command}: {exc}", file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
