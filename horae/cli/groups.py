"""Group acts from the CLI: ``horae triggers pause|resume|delete --selector KEY=VALUE[,...]`` and
``horae triggers amend --selector ... --set policies.PATH=VALUE``, through ``POST /v1/groups/...``
(:mod:`horae.api.groups`).

Each first asks the API for a dry run and prints how many triggers the selector names and how
many would change (with ``--dry-run`` also their ids, and stops there); then asks for
confirmation (a line ``y`` on stdin; ``--yes`` does not ask) and sends the act under a request id
(``--request-id``, default a new one, printed): the same request id sent again does not act
twice. Exit codes: 0 done; 1 refused, not confirmed, or a trigger's own act failed (each on
stderr); 2 a usage error.
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from collections.abc import Sequence
from typing import Any

from horae.api.client import JSON, ApiError, ApiUnreachable
from horae.cli import connect
from horae.domain.selector import SelectorError, parse_selector
from horae.settings import Settings

#: the API's act for each ``horae triggers`` action
ACTS = {"pause": "pause", "resume": "resume", "delete": "delete", "amend": "policies"}


def add_group_flags(parser: argparse.ArgumentParser) -> None:
    """The flags that turn a one-trigger action into a group act."""
    parser.add_argument(
        "--selector",
        metavar="KEY=VALUE[,...]",
        default=None,
        help="act on every trigger whose labels hold these pairs (instead of one ID)",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="with --selector: print what matches, do nothing"
    )
    parser.add_argument(
        "--request-id",
        default=None,
        metavar="ID",
        help="with --selector: the act's id (the same id again does not act twice; default new)",
    )
    parser.add_argument("--yes", "-y", action="store_true", help="with --selector: do not ask")


def policies_of(sets: Sequence[str]) -> dict[str, Any]:
    """The policies fields of ``--set policies.PATH=VALUE`` flags (the value as JSON, else a
    string), nested by the path; ``ValueError`` for any other path."""
    out: dict[str, Any] = {}
    for item in sets:
        path, sep, text = item.partition("=")
        parts = path.strip().split(".")
        if not sep or len(parts) < 2 or parts[0] != "policies" or not all(parts[1:]):
            raise ValueError(f"--set {item!r}: with --selector only policies.PATH=VALUE")
        try:
            value: Any = json.loads(text)
        except ValueError:
            value = text
        node = out
        for part in parts[1:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ValueError(f"--set {item!r}: {part} is set twice")
        node[parts[-1]] = value
    return out


def run_group(settings: Settings, args: argparse.Namespace, action: str) -> int:
    """``horae triggers <action> --selector ...``."""
    name = f"horae triggers {action}"
    if getattr(args, "trigger", None):
        return _usage(name, "give an ID or --selector, not both")
    try:
        parse_selector(args.selector)
        policies = policies_of(args.set) if action == "amend" else None
    except (SelectorError, ValueError) as exc:
        return _usage(name, f"--selector: {exc}" if isinstance(exc, SelectorError) else str(exc))
    if action == "amend" and not policies:
        return _usage(name, "with --selector give --set policies.PATH=VALUE")
    if action == "amend" and getattr(args, "file", None):
        return _usage(name, "with --selector only --set policies.PATH=VALUE (no -f)")
    act = ACTS[action]
    out = sys.stderr if args.json else sys.stdout
    try:
        with connect.open_client(settings, args) as api:
            dry = api.group(act, args.selector, dry_run=True, policies=policies)
            print(
                f"{action} --selector {dry.get('selector')}: {dry.get('matched')} trigger(s) "
                f"match, {dry.get('would_change')} would change",
                file=out,
            )
            if args.dry_run:
                if args.json:
                    connect.print_json(dry)
                else:
                    for trigger_id in dry.get("trigger_ids") or []:
                        print(f"  {trigger_id}")
                return 0
            if not dry.get("matched"):
                return 0
            if not args.yes and not connect.confirm(f"{action} {dry.get('matched')} trigger(s)?"):
                print(f"{name}: not confirmed, nothing sent", file=sys.stderr)
                return 1
            request_id = args.request_id or uuid.uuid4().hex
            done = api.group(act, args.selector, request_id=request_id, policies=policies)
    except (ApiError, ApiUnreachable) as exc:
        return connect.failed(name, exc)
    return _report(name, action, done, args.json)


def _report(name: str, action: str, done: JSON, as_json: bool) -> int:
    failed = done.get("failed") or []
    if as_json:
        connect.print_json(done)
    else:
        again = " (already done under this request id)" if done.get("replayed") else ""
        print(
            f"{action}: {len(done.get('changed') or [])} changed, "
            f"{len(done.get('unchanged') or [])} unchanged, {len(failed)} failed "
            f"(request {done.get('request_id')}){again}"
        )
    for item in failed:
        print(
            f"{name}: {item.get('trigger_id')}: {item.get('status')} {item.get('detail')}",
            file=sys.stderr,
        )
    return 1 if failed else 0


def _usage(name: str, message: str) -> int:
    print(f"{name}: {message}", file=sys.stderr)
    return 2
