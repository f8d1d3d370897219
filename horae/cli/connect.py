"""The tenant CLI's connection to the HTTP API, shared by ``horae triggers`` (and its siblings,
:mod:`horae.cli.triggers`) and ``horae apply`` / ``diff`` (:mod:`horae.cli.apply`): where the API
is and the token (:class:`ClientSettings`, ``HORAE_API_URL`` / ``HORAE_API_TOKEN``, flags
``--api-url`` / ``--token``), the client of a command's flags (:func:`open_client`), how a failed
call is told (:func:`failed`) and the one confirmation question (:func:`confirm`)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from horae.api.client import ApiClient, ApiError, ApiUnreachable
from horae.settings import Settings, env_name


class ClientSettings(BaseSettings):
    """Where the CLI finds the API and how it authenticates (``HORAE_API_URL``,
    ``HORAE_API_TOKEN``); the server's own settings are :class:`horae.settings.ApiSettings`."""

    model_config = SettingsConfigDict(env_prefix="HORAE_API_", extra="ignore")

    url: str | None = Field(
        default=None,
        description="base URL of the Horae API; unset: http://HORAE_API_HOST:HORAE_API_PORT "
        "(the server's own address)",
    )
    token: SecretStr | None = Field(
        default=None, description="bearer token (horae tokens issue); prefer the environment"
    )


#: The flag of each :class:`ClientSettings` field.
CLIENT_FLAGS = {"url": "--api-url", "token": "--token"}


def add_connection_flags(parser: argparse.ArgumentParser) -> None:
    """``--api-url``, ``--token`` (from :class:`ClientSettings`) and ``--json``."""
    for name, flag in CLIENT_FLAGS.items():
        field = ClientSettings.model_fields[name]
        default = "" if field.default is None else f", default {field.default}"
        text = f"{field.description} [env {env_name(ClientSettings, name)}{default}]"
        parser.add_argument(
            flag, dest=f"client_{name}", default=None, metavar=name.upper(), help=text
        )
    parser.add_argument("--json", action="store_true", help="print the API's JSON")


def client_settings(args: argparse.Namespace) -> ClientSettings:
    """The environment's :class:`ClientSettings` with the flags given applied."""
    given = {
        name: getattr(args, f"client_{name}")
        for name in CLIENT_FLAGS
        if getattr(args, f"client_{name}", None) is not None
    }
    return ClientSettings(**given)


def api_url(settings: Settings, config: ClientSettings) -> str:
    """The configured URL, else the address ``horae api`` listens on by the same settings (a
    wildcard host reached on loopback)."""
    if config.url:
        return config.url
    host = settings.api.host
    host = "127.0.0.1" if host in ("0.0.0.0", "") else "[::1]" if host == "::" else host
    return f"http://{host}:{settings.api.port}"


def open_client(settings: Settings, args: argparse.Namespace) -> ApiClient:
    """The API client of the command's flags and environment."""
    config = client_settings(args)
    token = None if config.token is None else config.token.get_secret_value()
    return ApiClient(api_url(settings, config), token)


def failed(name: str, exc: ApiError | ApiUnreachable) -> int:
    """Print why a call failed on stderr; exit code 1."""
    if isinstance(exc, ApiUnreachable):
        print(f"{name}: the API does not answer ({exc}); is `horae api` running?", file=sys.stderr)
        return 1
    for line in exc.problem.lines():
        print(f"{name}: {line}", file=sys.stderr)
    if exc.status == 401:
        print(f"{name}: set HORAE_API_TOKEN (horae tokens issue) or --token", file=sys.stderr)
    if exc.retry_after_s is not None:
        print(f"{name}: retry after {exc.retry_after_s:g} s", file=sys.stderr)
    return 1


def confirm(question: str) -> bool:
    """Ask on stderr, read one line of stdin: ``y`` or ``yes`` agrees (end of input: no)."""
    print(f"{question} [y/N] ", end="", file=sys.stderr, flush=True)
    answer = sys.stdin.readline().strip().lower()
    return answer in ("y", "yes")


def print_json(value: Any) -> None:
    """``value`` on stdout as ``--json`` prints it: indented, keys sorted."""
    print(json.dumps(value, indent=2, sort_keys=True))
