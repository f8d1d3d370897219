"""``horae dead-letters list|show|redrive``: a tenant's dead letters through the HTTP API
(``/v1/dead-letters``, :mod:`horae.api.dead_letters`) with the tenant's API token — the
tenant's view of what ``horae dlq`` (the platform's tool, reading the topic as the dispatcher's
Kafka user) shows of every tenant.

Usage::

    horae dead-letters list [--trigger ID] [--selector KEY=VALUE[,...]] [--from T] [--to T]
                            [--cause TEXT] [--state dead|redriven] [--limit N]
    horae dead-letters show ID
    horae dead-letters redrive (ID... | --trigger ID | --selector S | --from T | --to T
                                | --cause TEXT) [--state dead|redriven] [--dry-run]
                               [--request-id ID] [--yes]

``redrive`` first asks for a dry run and prints how many dead letters it would send again (with
``--dry-run`` their ids too, and stops); then asks (a line ``y`` on stdin; ``--yes`` does not)
and sends them under a request id (``--request-id``, default a new one). Every command takes
``--api-url``, ``--token`` (env ``HORAE_API_TOKEN``) and ``--json`` (:mod:`horae.cli.connect`).
Exit codes: 0 done; 1 the API refused or could not be reached, or not confirmed; 2 usage.
"""

from __future__ import annotations

import argparse
import sys
import uuid
from collections.abc import Iterable
from itertools import islice
from typing import Any

from horae.api.client import JSON, ApiError, ApiUnreachable
from horae.cli import connect
from horae.cli.triggers import table
from horae.settings import Settings

STATES = ("dead", "redriven")


def _filter_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--trigger", metavar="ID", default=None, help="of this trigger")
    parser.add_argument(
        "--selector", metavar="KEY=VALUE[,...]", default=None, help="of triggers with these labels"
    )
    parser.add_argument(
        "--from", dest="start", metavar="INSTANT", help="dead at or after (RFC 3339)"
    )
    parser.add_argument("--to", dest="end", metavar="INSTANT", help="dead before (RFC 3339)")
    parser.add_argument("--cause", default=None, help="whose cause holds this text")
    parser.add_argument("--state", choices=STATES, default=None, help="dead or redriven")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    text = "the tenant's dead letters: list, show, redrive (HTTP API)"
    top = subparsers.add_parser("dead-letters", help=text, description=text)
    sub = top.add_subparsers(dest="dead_letters_command", metavar="ACTION", required=True)

    text = "list dead letters, oldest first"
    listing = sub.add_parser("list", help=text, description=text)
    _filter_flags(listing)
    listing.add_argument("--limit", type=int, default=None, help="at most this many")
    connect.add_connection_flags(listing)
    listing.set_defaults(func=_list)

    text = "show one dead letter and the order it holds"
    show = sub.add_parser("show", help=text, description=text)
    show.add_argument("id", metavar="ID")
    connect.add_connection_flags(show)
    show.set_defaults(func=_show)

    text = "send dead letters again under their fire key (a dry run first; author)"
    redrive = sub.add_parser("redrive", help=text, description=text)
    redrive.add_argument("ids", nargs="*", metavar="ID", help="these dead letters")
    _filter_flags(redrive)
    redrive.add_argument("--dry-run", action="store_true", help="print what matches, send nothing")
    redrive.add_argument("--request-id", default=None, metavar="ID", help="default a new one")
    redrive.add_argument("--yes", "-y", action="store_true", help="do not ask")
    connect.add_connection_flags(redrive)
    redrive.set_defaults(func=_redrive)


def dead_letters_table(items: Iterable[JSON]) -> str:
    rows = [
        (i.get("id"), i.get("trigger_id"), i.get("scheduled_at"), i.get("attempts"),
         i.get("state"), i.get("dead_at"), i.get("cause"))
        for i in items
    ]  # fmt: skip
    return table(("ID", "TRIGGER", "SCHEDULED", "ATTEMPTS", "STATE", "DEAD", "CAUSE"), rows)


def _filters(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "trigger_id": args.trigger,
        "selector": args.selector,
        "start": args.start,
        "end": args.end,
        "cause": args.cause,
        "state": args.state,
    }


def _list(settings: Settings, args: argparse.Namespace) -> int:
    try:
        with connect.open_client(settings, args) as api:
            found = list(islice(api.dead_letters_all(**_filters(args)), args.limit))
    except (ApiError, ApiUnreachable) as exc:
        return connect.failed("horae dead-letters list", exc)
    if args.json:
        connect.print_json(found)
    else:
        print(dead_letters_table(found))
    return 0


def _show(settings: Settings, args: argparse.Namespace) -> int:
    try:
        with connect.open_client(settings, args) as api:
            found = api.dead_letter(args.id)
    except (ApiError, ApiUnreachable) as exc:
        return connect.failed("horae dead-letters show", exc)
    connect.print_json(found)
    return 0


def _redrive(settings: Settings, args: argparse.Namespace) -> int:
    name = "horae dead-letters redrive"
    body: JSON = {}
    if args.ids:
        body["ids"] = list(args.ids)
    for key, value in (("trigger_id", args.trigger), ("selector", args.selector),
                       ("from", args.start), ("to", args.end), ("cause", args.cause),
                       ("state", args.state)):  # fmt: skip
        if value is not None:
            body[key] = value
    if not body or set(body) == {"state"}:
        print(f"{name}: name them: IDs, --trigger, --selector, --from, --to or --cause",
              file=sys.stderr)  # fmt: skip
        return 2
    out = sys.stderr if args.json else sys.stdout
    try:
        with connect.open_client(settings, args) as api:
            dry = api.redrive({**body, "dry_run": True})
            print(f"redrive: {dry.get('matched')} dead letter(s) match", file=out)
            if args.dry_run:
                if args.json:
                    connect.print_json(dry)
                else:
                    for dlq_id in dry.get("ids") or []:
                        print(f"  {dlq_id}")
                return 0
            if not dry.get("matched"):
                return 0
            if not args.yes and not connect.confirm(f"Redrive {dry.get('matched')}?"):
                print(f"{name}: not confirmed, nothing sent", file=sys.stderr)
                return 1
            request_id = args.request_id or uuid.uuid4().hex
            done = api.redrive({**body, "request_id": request_id})
    except (ApiError, ApiUnreachable) as exc:
        return connect.failed(name, exc)
    if args.json:
        connect.print_json(done)
    else:
        sent = done.get("redriven") or []
        print(f"redriven: {len(sent)} (request {request_id})")
        for item in sent:
            print(f"  {item.get('id')} {item.get('fire_key')} attempt {item.get('attempt')}")
    return 0
