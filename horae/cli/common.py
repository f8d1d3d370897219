"""Helpers shared by the CLI subcommands: flags derived from the settings, service endpoints,
logging, metrics.

A command's flags come from the fields of :class:`~horae.settings.Settings` (:func:`add_flags`):
``--tick-s`` for ``planner.tick_s``, its help the field's description plus its environment
variable and default. Every flag of every command is one (positional arguments aside), so each
has an environment fallback; a ``list[str]`` field is a repeated flag (its env: a JSON list). A
flag given on the command line overrides the environment; the entry point applies them with
:func:`settings_from_args` and hands the command the result.
"""

from __future__ import annotations

import argparse
import logging
import signal
import threading
import types
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

from prometheus_client import CollectorRegistry, start_http_server
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings

from horae.devstack import StackError
from horae.devstack.probe import database_healthy, kafka_healthy
from horae.devstack.stack import LocalStack
from horae.settings import METRICS_HOST, SECTIONS, Settings, env_name

#: argparse dest of a generated flag: ``setting:<section>.<field>``, or ``setting:<field>``
_DEST = "setting:"
_SCALARS = (str, int, float, bool, Path)


def _flag_type(annotation: Any) -> Any:
    """The scalar type behind ``annotation`` (``X | None`` unwrapped), a ``Literal``,
    ``list[str]`` (a repeated flag), or None for what a flag does not carry (maps, secrets:
    those are set through the env)."""
    if get_origin(annotation) in (Union, types.UnionType):
        rest = [a for a in get_args(annotation) if a is not type(None)]
        annotation = rest[0] if len(rest) == 1 else None
    if get_origin(annotation) is Literal or annotation in _SCALARS or annotation == list[str]:
        return annotation
    return None


def _help(model: type[BaseSettings], name: str, field: FieldInfo) -> str:
    if field.default_factory is not None:
        default = ""
    elif field.default is None:
        default = ", default unset"
    else:
        default = f", default {field.default}"
    text = f"{field.description or name} [env {env_name(model, name)}{default}]"
    return text.replace("%", "%%")


def add_flags(
    parser: argparse.ArgumentParser, section: str | None, only: Iterable[str] | None = None
) -> None:
    """Add a ``--field-name`` flag for each scalar field of a settings section (``None``: the
    shared fields of :class:`Settings`; ``only`` picks some of them)."""
    model: type[BaseSettings] = SECTIONS[section] if section else Settings
    names = list(only) if only is not None else list(model.model_fields)
    for name in names:
        field = model.model_fields[name]
        kind = _flag_type(field.annotation)
        if kind is None:
            if only is not None:
                raise TypeError(f"{model.__name__}.{name} cannot be a flag")
            continue
        flag = "--" + name.replace("_", "-")
        dest = f"{_DEST}{section}.{name}" if section else f"{_DEST}{name}"
        common: dict[str, Any] = {"dest": dest, "default": argparse.SUPPRESS}
        common["help"] = _help(model, name, field)
        if kind is bool:
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, **common)
        elif get_origin(kind) is Literal:  # its choices' type: a Literal[1, 3] takes "3"
            choices = get_args(kind)
            parser.add_argument(flag, choices=choices, type=type(choices[0]), **common)
        elif kind == list[str]:
            parser.add_argument(flag, action="append", metavar="VALUE", **common)
        else:
            unit = name.rpartition("_")[2]
            metavar = "SECONDS" if unit == "s" else unit.upper()
            parser.add_argument(flag, type=kind, metavar=metavar, **common)


def settings_from_args(args: argparse.Namespace, base: Settings) -> Settings:
    """``base`` with the flags given on the command line (see :func:`add_flags`) applied."""
    shared: dict[str, Any] = {}
    sections: dict[str, dict[str, Any]] = {}
    for dest, value in vars(args).items():
        if dest.startswith(_DEST):
            section, _, name = dest.removeprefix(_DEST).rpartition(".")
            (sections.setdefault(section, {}) if section else shared)[name] = value
    for section, values in sections.items():
        shared[section] = getattr(base, section).model_copy(update=values)
    return base.model_copy(update=shared) if shared else base


def setup_logging(process: str, level: str) -> None:
    """Log lines tagged with the process name, at ``level`` (``Settings.log_level``)."""
    logging.basicConfig(level=level, format=f"%(asctime)s %(levelname)s {process} %(message)s")


def require_services(settings: Settings, need_database: bool = True) -> tuple[str, str]:
    """(bootstrap, database URL): the configured ones, else the local stack's endpoints.

    Raises :class:`StackError` (printed without a traceback) when one of them does not answer.
    """
    endpoints = LocalStack.from_settings(settings).endpoints
    if not kafka_healthy(endpoints.kafka_bootstrap, timeout_s=10.0):
        raise StackError(
            f"Kafka at {endpoints.kafka_bootstrap} does not answer. Start the local stack with "
            "`horae dev up`, or point HORAE_KAFKA_BOOTSTRAP at a running broker."
        )
    if need_database and not database_healthy(endpoints.database_url, timeout_s=10):
        raise StackError(
            f"PostgreSQL at {endpoints.database_url} does not answer. Start the local stack with "
            "`horae dev up`, or point HORAE_DATABASE_URL at a running database."
        )
    return endpoints.kafka_bootstrap, endpoints.database_url if need_database else ""


def serve_metrics(port: int, registry: CollectorRegistry, host: str = METRICS_HOST) -> None:
    """Serve ``registry`` on ``http://<host>:<port>/metrics`` from a daemon thread; port 0:
    not served (every process's ``metrics_port`` and ``metrics_host`` mean the same)."""
    if port:
        start_http_server(port, addr=host, registry=registry)


def ensure_topics(settings: Settings, bootstrap: str, tenants: tuple[str, ...] = ()) -> None:
    """Create or update the topic catalogue under the configured prefix (idempotent), with the
    events topic of every tenant of the settings and of ``tenants``."""
    from horae.kafka.admin import Plan, admin_client, apply, auto_replication_factor

    admin = admin_client(bootstrap)
    rf = settings.topic_replication_factor or auto_replication_factor(admin)
    every = (*settings.tenant_keys, *tenants)
    apply(admin, Plan(settings.topic_prefix, settings.topic_partitions, rf, every))


#: what a stopping process may take, after its drain, to commit, leave its group and close
STOP_GRACE_S = 10.0
#: how long each process drains after SIGTERM: the planner ends its iteration (decisions, one
#: commit), the projector its batch (one database transaction), the API its requests; the
#: dispatcher's in-flight sends finish within their attempt deadline (:func:`drain_s`)
DRAIN_S = {"planner": 10.0, "projector": 10.0, "api": 5.0}


def drain_s(process: str, settings: Settings) -> float:
    """How long ``process`` drains after SIGTERM (see :data:`DRAIN_S`)."""
    if process == "dispatcher":
        return settings.dispatcher.deadline_s + 1
    return DRAIN_S[process]


def stop_on_signals(stop: threading.Event, drain_s: float, grace_s: float = STOP_GRACE_S) -> None:
    """SIGTERM and SIGINT set ``stop``, and from then on the process has ``drain_s`` +
    ``grace_s`` to end: past that, a timer ends it as a hung process (a log line, every
    thread's stack, exit status 70), so a stop is always bounded, whatever a thread waits on."""
    from horae.kafka.txn import exit_hung

    def stopped(signum: int, _frame: object) -> None:
        if stop.is_set():
            return  # a second signal (a supervisor's SIGTERM after the terminal's SIGINT)
        stop.set()
        limit = drain_s + grace_s
        timer = threading.Timer(limit, exit_hung, (f"stop on {signal.Signals(signum).name}", limit))
        timer.daemon = True
        timer.start()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, stopped)
