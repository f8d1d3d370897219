"""``horae tokens issue``: print an API token (operators; signs with ``HORAE_API_TOKEN_KEYS``
under ``HORAE_API_TOKEN_KID``)."""

from __future__ import annotations

import argparse
import sys

from horae.api.auth import issue
from horae.contracts.events import Role
from horae.contracts.ingress import NAME
from horae.settings import Settings


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    tokens = subparsers.add_parser("tokens", help="issue HTTP API tokens (operators)")
    sub = tokens.add_subparsers(dest="tokens_command", metavar="ACTION", required=True)
    text = "print a bearer token for the HTTP API"
    p = sub.add_parser("issue", help=text, description=text)
    p.add_argument("--tenant", required=True, help="the tenant the token acts for")
    p.add_argument(
        "--role",
        dest="roles",
        action="append",
        required=True,
        choices=[r.value for r in Role],
        help="a role the token grants (repeat for more)",
    )
    p.add_argument(
        "--ttl", type=int, default=None, help="lifetime in seconds (default: api.token_ttl_s)"
    )
    p.add_argument("--subject", default=None, help="who acts (default: <tenant>-operator)")
    p.set_defaults(func=run)


def run(settings: Settings, args: argparse.Namespace) -> int:
    if not NAME.match(args.tenant):
        print(f"horae tokens issue: {args.tenant!r} is not a tenant id", file=sys.stderr)
        return 2
    keys = {kid: s.get_secret_value() for kid, s in settings.api.token_keys.items()}
    try:
        token = issue(
            keys,
            settings.api.token_kid,
            tenant=args.tenant,
            roles=[Role(r) for r in args.roles],
            subject=args.subject or f"{args.tenant}-operator",
            ttl_s=args.ttl if args.ttl is not None else settings.api.token_ttl_s,
        )
    except ValueError as exc:
        print(f"horae tokens issue: {exc}", file=sys.stderr)
        return 2
    print(token)
    return 0
