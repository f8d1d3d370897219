"""``horae triggers ...``, ``horae history``, ``horae fires``, ``horae lateness``,
``horae backfill``: the HTTP API (``docs/api.md``) for people, through
:class:`horae.api.client.ApiClient`.

Usage::

    horae triggers create ID (--cron EXPR | --every SECONDS | --at INSTANT...) [--zone Z]
                             (--url URL [--secret-ref REF]... | --topic TOPIC)
                             [--label KEY=VALUE]... [--description TEXT] [--payload TEXT]
    horae triggers create -f FILE              (one document of ``horae apply``, with its id)
    horae triggers list [--label KEY:VALUE] [--state STATE] [--limit N]
                        (STATE: live, paused, suspended, completed, deleted)
    horae triggers show ID
    horae triggers amend ID [-f FILE] [--set PATH=VALUE]... [--if-version N]
    horae triggers pause|resume|delete|run ID
    horae triggers pause|resume|delete --selector KEY=VALUE[,...] [--dry-run] [--request-id ID]
                       [--yes]             (every trigger the labels select: horae.cli.groups)
    horae triggers amend --selector KEY=VALUE[,...] --set policies.PATH=VALUE... [--dry-run]
    horae triggers next ID [-n N]              (the stored version's next instants, local time)
    horae triggers export [ID...] [--label KEY:VALUE]   (YAML documents for ``horae apply``)
    horae targets verify URL | check HOST      (prove the tenant controls a webhook host)
    horae history TRIGGER [--from T] [--to T] [--state S] [--limit N]
    horae fires [--from T] [--to T] [--state S[,S...]] [--label KEY:VALUE] [--limit N]
    horae fires cancel FIRE_KEY                (its attempts not yet sent; flags after the key)
    horae lateness [TRIGGER] [--from T] [--to T]
    horae backfill TRIGGER --from T --to T [--reason TEXT] [--yes]

Every command takes ``--api-url`` (env ``HORAE_API_URL``; unset: where ``horae api`` listens,
``http://<HORAE_API_HOST>:<HORAE_API_PORT>``, 127.0.0.1:8089 by default), ``--token`` (env
``HORAE_API_TOKEN``, a token of ``horae tokens issue``; the environment keeps it out of the
process list) and ``--json``: the API's JSON instead of a table. Tables are plain columns
aligned with spaces, ``-`` for an empty cell.

``amend`` reads the stored trigger, applies ``-f`` (the whole new document) and then each
``--set`` (a dotted path, the value as JSON or else a string), prints the field changes and
sends the amendment with ``If-Match`` on the version it read (or ``--if-version``): a trigger
changed in between answers 412. It keeps the trigger's pause state unless the document or a
``--set state=live|paused`` names one. ``backfill`` first asks the API for the cost (how many
fires), prints it and asks for confirmation (a line ``y`` on stdin; ``--yes`` does not ask), then
sends the confirm token the API gave.

Exit codes: 0 done; 1 the API refused (the problem's title, detail and field errors on stderr) or
could not be reached; 2 a usage error.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Sequence
from itertools import islice
from typing import Any

from horae.api.client import JSON, ApiError, ApiUnreachable
from horae.cli import connect, groups
from horae.delivery.table import describe
from horae.domain.errors import ValidationError
from horae.domain.keys import FireKey
from horae.settings import Settings

#: what a trigger is doing, as the API shows it (TriggerOut.state)
STATES = ("live", "paused", "suspended", "completed", "deleted")
#: why a trigger that is not live has no next instant (the line under ``horae history``)
NOT_LIVE = {
    "paused": "paused: no instant is decided until it is resumed",
    "suspended": "suspended with its tenant: each instant is recorded paused (tenant suspended)",
    "completed": "completed: its recurrence has no instant left",
    "deleted": "deleted",
}


# --- rendering ----------------------------------------------------------------------------


def cell(value: Any) -> str:
    """A table cell: ``-`` for nothing, JSON for lists and objects."""
    if value is None or value == "" or value == [] or value == {}:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True)
    return str(value)


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """Plain aligned columns: a header line, one line per row, two spaces between columns,
    no trailing spaces."""
    lines = [list(headers), *([cell(v) for v in row] for row in rows)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(headers))]
    return "\n".join(
        "  ".join(text.ljust(width) for text, width in zip(line, widths, strict=True)).rstrip()
        for line in lines
    )


def schedule(trigger: JSON) -> str:
    """The recurrence in a few words: ``cron 0 9 * * 1-5 Europe/Paris``, ``every 90s``, ``at
    2026-03-08T07:00:00Z (+2)``."""
    r = trigger.get("recurrence") or {}
    zone = r.get("zone") or "UTC"
    if r.get("kind") == "cron":
        return f"cron {r.get('expr')} {zone}"
    if r.get("kind") == "every":
        return f"every {r.get('interval_s')}s"
    instants = r.get("instants") or []
    more = f" (+{len(instants) - 1})" if len(instants) > 1 else ""
    return f"at {instants[0] if instants else '-'}{more}"


def target(trigger: JSON) -> str:
    """``POST https://...`` for a webhook, ``event <topic>`` for an event target (its kind's
    deliverer says)."""
    return describe(trigger.get("target") or {})


def _next(trigger: JSON) -> Any:
    instants = trigger.get("next_instants") or []
    return instants[0] if instants else None


def _last(trigger: JSON, field: str) -> Any:
    last = trigger.get("last_run")
    return last.get(field) if isinstance(last, dict) else None


def last_run(trigger: JSON) -> str | None:
    """The last run in a few words: ``2026-01-02T01:00:00Z failed (lateness 12 ms)``."""
    last = trigger.get("last_run")
    if not isinstance(last, dict):
        return None
    words = f"{last.get('scheduled_at')} {last.get('state')}"
    if last.get("cause"):
        words += f" ({last['cause']})"
    if last.get("lateness_ms") is not None:
        words += f", lateness {last['lateness_ms']:.0f} ms"
    return words


def triggers_table(items: Iterable[JSON]) -> str:
    headers = ("ID", "STATE", "VERSION", "SCHEDULE", "TARGET", "NEXT", "LAST_RUN", "LAST_STATE")
    rows = (
        (
            t.get("trigger_id"),
            t.get("state"),
            t.get("version"),
            schedule(t),
            target(t),
            _next(t),
            _last(t, "scheduled_at"),
            _last(t, "state"),
        )
        for t in items
    )
    return table(headers, rows)


def state_of(trigger: JSON) -> Any:
    """The state shown, and the run state when it differs (``suspended (run state paused)``: the
    state it resumes in)."""
    state, run = trigger.get("state"), trigger.get("run_state")
    if run and state != run and state != "completed":
        return f"{state} (run state {run})"
    return state


def trigger_card(trigger: JSON) -> str:
    """One trigger, one field a line."""
    policies = trigger.get("policies") or {}
    labels = trigger.get("labels") or {}
    rows = [
        ("id", trigger.get("trigger_id")),
        ("tenant", trigger.get("tenant")),
        ("state", state_of(trigger)),
        ("version", trigger.get("version")),
        ("schedule", schedule(trigger)),
        ("target", target(trigger)),
        ("misfire", policies.get("misfire")),
        ("overlap", policies.get("overlap")),
        ("horizon_s", policies.get("horizon_s")),
        ("jitter_s", policies.get("jitter_s")),
        ("labels", ", ".join(f"{k}={v}" for k, v in sorted(labels.items()))),
        ("description", trigger.get("description")),
        ("created_at", trigger.get("created_at")),
        ("updated_at", trigger.get("updated_at")),
        ("next", ", ".join(trigger.get("next_instants") or [])),
        ("last_run", last_run(trigger)),
    ]
    return table(("FIELD", "VALUE"), rows)


def _outcome(fire: JSON) -> Any:
    outcome = fire.get("outcome")
    return outcome.get("state") if isinstance(outcome, dict) else outcome


def history_table(items: Iterable[JSON]) -> str:
    headers = ("SCHEDULED", "DUE", "STATE", "LANE", "LATENESS_MS", "CAUSE", "OUTCOME", "FIRE_KEY")
    rows = (
        (
            f.get("scheduled_at"),
            f.get("due_at"),
            f.get("state"),
            f.get("lane"),
            f.get("lateness_ms"),
            f.get("cause"),
            _outcome(f),
            f.get("fire_key"),
        )
        for f in items
    )
    return table(headers, rows)


def fires_table(items: Iterable[JSON]) -> str:
    """The fire search: a history table with each fire's trigger."""
    headers = ("SCHEDULED", "TRIGGER", "STATE", "LANE", "LATENESS_MS", "CAUSE", "FIRE_KEY")
    keys = ("scheduled_at", "trigger_id", "state", "lane", "lateness_ms", "cause", "fire_key")
    return table(headers, ([f.get(k) for k in keys] for f in items))


LATENESS = ("fires", "p50_ms", "p99_ms", "max_ms", "missed")


def lateness_table(summary: JSON) -> str:
    """The summary row (``TRIGGER`` ``*`` for the whole tenant) then one row per trigger."""
    rows = [summary.get("summary", summary), *(summary.get("triggers") or [])]
    headers = ("TRIGGER", *(name.upper() for name in LATENESS))
    return table(
        headers, ([r.get("trigger_id") or "*", *(r.get(n) for n in LATENESS)] for r in rows)
    )


# --- commands -----------------------------------------------------------------------------


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    text = "create, list, show, amend, pause, resume, delete, run triggers (HTTP API)"
    triggers = subparsers.add_parser("triggers", help=text, description=text)
    sub = triggers.add_subparsers(dest="triggers_command", metavar="ACTION", required=True)

    create = sub.add_parser("create", help="create a trigger", description="create a trigger")
    create.add_argument("trigger", nargs="?", metavar="ID", help="the trigger id")
    create.add_argument("-f", "--file", metavar="FILE", help="a trigger document (YAML/JSON, -)")
    when = create.add_mutually_exclusive_group()
    when.add_argument(
        "--cron", metavar="EXPR", help="a cron expression (5 or 6 fields; L, LW, 15W, FRI#3, FRIL)"
    )
    when.add_argument("--every", type=int, metavar="SECONDS", help="a fixed interval")
    when.add_argument("--at", nargs="+", metavar="INSTANT", help="RFC 3339 instants")
    create.add_argument("--zone", default=None, help="IANA time zone of the expression")
    where = create.add_mutually_exclusive_group()
    where.add_argument("--url", help="webhook URL")
    where.add_argument("--topic", help="event target: a topic of the tenant (events.<token>...)")
    create.add_argument(
        "--secret-ref", action="append", default=[], metavar="REF", help="webhook signing secret"
    )
    create.add_argument(
        "--oidc", action="store_true", default=None,
        help="an identity token on each attempt, audience the URL's origin",
    )  # fmt: skip
    create.add_argument(
        "--oidc-audience", metavar="AUDIENCE", help="an identity token with this audience"
    )
    create.add_argument(
        "--label", action="append", default=[], metavar="KEY=VALUE", help="a label (repeat)"
    )
    create.add_argument("--description", default=None)
    create.add_argument("--payload", default=None, help="the payload (a string)")
    connect.add_connection_flags(create)
    create.set_defaults(func=_create)

    listing = sub.add_parser("list", help="list triggers", description="list triggers")
    listing.add_argument("--label", metavar="KEY:VALUE", default=None, help="only this label")
    listing.add_argument("--state", choices=STATES, default=None, help="only this state")
    listing.add_argument("--limit", type=int, default=None, help="at most this many")
    connect.add_connection_flags(listing)
    listing.set_defaults(func=_list)

    show = sub.add_parser("show", help="show one trigger", description="show one trigger")
    show.add_argument("trigger", metavar="ID")
    connect.add_connection_flags(show)
    show.set_defaults(func=_show)

    text = "amend a trigger (a new version, If-Match on the version read)"
    amend = sub.add_parser("amend", help=text, description=text)
    amend.add_argument("trigger", metavar="ID", nargs="?")
    groups.add_group_flags(amend)  # --selector: set policies of every trigger it names
    amend.add_argument("-f", "--file", metavar="FILE", help="the whole new document")
    amend.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="PATH=VALUE",
        help="set a field, e.g. policies.misfire=skip (the value as JSON, else a string)",
    )
    amend.add_argument(
        "--if-version", type=int, default=None, metavar="N", help="amend only version N"
    )
    connect.add_connection_flags(amend)
    amend.set_defaults(func=_amend)

    acts = {
        "pause": "pause a trigger (no instant is decided until it is resumed)",
        "resume": "resume a paused trigger (under its misfire policy)",
        "delete": "delete a trigger",
        "run": "run a trigger now (a manual fire; prints its fire key)",
    }
    for act, text in acts.items():
        p = sub.add_parser(act, help=text, description=text)
        if act == "run":
            p.add_argument("trigger", metavar="ID")
        else:  # or every trigger a selector names (horae.cli.groups)
            p.add_argument("trigger", metavar="ID", nargs="?")
            groups.add_group_flags(p)
        connect.add_connection_flags(p)
        p.set_defaults(func=_act)

    text = "the next instants of a stored trigger: UTC, local time, offset, DST note, jitter"
    upcoming = sub.add_parser("next", help=text, description=text)
    upcoming.add_argument("trigger", metavar="ID")
    upcoming.add_argument("-n", type=int, default=10, help="how many, 1..1000 (default 10)")
    connect.add_connection_flags(upcoming)
    upcoming.set_defaults(func=_next_of)

    text = "print stored triggers as the documents horae apply reads (defaults left out)"
    export = sub.add_parser("export", help=text, description=text)
    export.add_argument("triggers", nargs="*", metavar="ID", help="these (default: every one)")
    export.add_argument("--label", metavar="KEY:VALUE", default=None, help="only this label")
    connect.add_connection_flags(export)
    export.set_defaults(func=_export)

    text = "prove control of a webhook host: a challenge, then a check (author)"
    targets = subparsers.add_parser("targets", help=text, description=text)
    actions = targets.add_subparsers(dest="targets_command", metavar="ACTION", required=True)
    text = "ask for a challenge for the host of a webhook URL and say how to answer it"
    verify = actions.add_parser("verify", help=text, description=text)
    verify.add_argument("url", metavar="URL")
    connect.add_connection_flags(verify)
    verify.set_defaults(func=_verify)
    text = "have the API fetch the host's answer and compare it (exit 1: not verified)"
    check = actions.add_parser("check", help=text, description=text)
    check.add_argument("host", metavar="HOST")
    connect.add_connection_flags(check)
    check.set_defaults(func=_check)

    text = "a trigger's instants: state, lane, lateness, cause, outcome"
    history = subparsers.add_parser("history", help=text, description=text)
    history.add_argument("trigger", metavar="TRIGGER")
    history.add_argument("--from", dest="start", metavar="INSTANT", help="RFC 3339, inclusive")
    history.add_argument("--to", dest="end", metavar="INSTANT", help="RFC 3339, exclusive")
    history.add_argument("--state", default=None, help="only fires in this state")
    history.add_argument("--limit", type=int, default=None, help="at most this many (all pages)")
    connect.add_connection_flags(history)
    history.set_defaults(func=_history)

    text = "search the tenant's fires across its triggers: window, state, label"
    fires = subparsers.add_parser("fires", help=text, description=text)
    fires.add_argument("--from", dest="start", metavar="INSTANT", help="RFC 3339, inclusive")
    fires.add_argument("--to", dest="end", metavar="INSTANT", help="RFC 3339, exclusive")
    fires.add_argument(
        "--state", default=None, help="only fires in these states (comma-separated: failed,...)"
    )
    fires.add_argument("--label", metavar="KEY:VALUE", default=None, help="only this label")
    fires.add_argument("--limit", type=int, default=None, help="at most this many (all pages)")
    connect.add_connection_flags(fires)
    fires.set_defaults(func=_fires)
    on_fire = fires.add_subparsers(dest="fires_command", metavar="ACTION", required=False)
    text = "cancel a fire that is waiting or retrying (an attempt in flight finishes; author)"
    cancel = on_fire.add_parser("cancel", help=text, description=text)
    cancel.add_argument("fire_key", metavar="FIRE_KEY", help="as horae fires or history shows it")
    connect.add_connection_flags(cancel)
    cancel.set_defaults(func=_cancel_fire)

    text = "lateness (p50/p99/max, missed) of a trigger or of the whole tenant over a window"
    lateness = subparsers.add_parser("lateness", help=text, description=text)
    lateness.add_argument("trigger", nargs="?", metavar="TRIGGER", help="unset: the tenant")
    lateness.add_argument("--from", dest="start", metavar="INSTANT", help="RFC 3339")
    lateness.add_argument("--to", dest="end", metavar="INSTANT", help="RFC 3339")
    connect.add_connection_flags(lateness)
    lateness.set_defaults(func=_lateness)

    text = "backfill a trigger over a window (prints the cost, then asks; policy role)"
    backfill = subparsers.add_parser("backfill", help=text, description=text)
    backfill.add_argument("trigger", metavar="TRIGGER")
    backfill.add_argument("--from", dest="start", required=True, metavar="INSTANT")
    backfill.add_argument("--to", dest="end", required=True, metavar="INSTANT")
    backfill.add_argument("--reason", default=None, help="why (kept in the command)")
    backfill.add_argument("--yes", "-y", action="store_true", help="do not ask")
    connect.add_connection_flags(backfill)
    backfill.set_defaults(func=_backfill)


def _usage(name: str, message: str) -> int:
    print(f"{name}: {message}", file=sys.stderr)
    return 2


def _pairs(items: Sequence[str], sep: str, what: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for item in items:
        key, got, value = item.partition(sep)
        if not got or not key:
            raise ValueError(f"{what} {item!r}: expected KEY{sep}VALUE")
        found[key] = value
    return found


def document_of_flags(args: argparse.Namespace) -> JSON:
    """The TriggerIn document (without the id) the ``create`` flags describe; ValueError
    naming what is missing."""
    recurrence: JSON
    if args.cron:
        recurrence = {"kind": "cron", "expr": args.cron}
    elif args.every is not None:
        recurrence = {"kind": "every", "interval_s": args.every}
    elif args.at:
        recurrence = {"kind": "at", "instants": list(args.at)}
    else:
        raise ValueError("one of --cron, --every, --at (or -f FILE) is required")
    if args.zone:
        recurrence["zone"] = args.zone
    if args.url:
        tgt: JSON = {"kind": "webhook", "url": args.url, "secret_refs": list(args.secret_ref)}
        if args.oidc or args.oidc_audience is not None:
            tgt["oidc"] = {"audience": args.oidc_audience}
    elif args.oidc or args.oidc_audience is not None:
        raise ValueError("--oidc: identity tokens go on webhook calls only (--url)")
    elif args.topic:
        tgt = {"kind": "event", "topic": args.topic}
    else:
        raise ValueError("one of --url, --topic (or -f FILE) is required")
    document: JSON = {"recurrence": recurrence, "target": tgt}
    labels = _pairs(args.label, "=", "--label")
    if labels:
        document["labels"] = labels
    if args.description is not None:
        document["description"] = args.description
    if args.payload is not None:
        document["payload"] = args.payload
    return document


def _one_document(path: str, trigger_id: str | None) -> tuple[str, JSON]:
    from horae.cli.apply import read_documents

    found = read_documents(path)
    if len(found) != 1:
        raise ValueError(f"{path}: expected one trigger document, found {len(found)}")
    [(found_id, (_, document))] = found.items()
    if trigger_id is not None and trigger_id != found_id:
        raise ValueError(f"{path}: the document's id {found_id!r} is not {trigger_id!r}")
    return found_id, document


#: the ``create`` flags that describe the document (refused beside ``-f FILE``)
DOCUMENT_FLAGS = (
    "cron", "every", "at", "zone", "url", "topic", "secret_ref", "oidc", "oidc_audience", "label",
    "description", "payload",
)  # fmt: skip


def _create(settings: Settings, args: argparse.Namespace) -> int:
    name = "horae triggers create"
    from horae.cli.apply import DocumentError

    try:
        if args.file:
            given = [
                f"--{f.replace('_', '-')}"
                for f in DOCUMENT_FLAGS
                if getattr(args, f) not in (None, [])
            ]
            if given:
                raise ValueError(f"-f FILE holds the whole document: {', '.join(given)} too")
            trigger_id, document = _one_document(args.file, args.trigger)
        elif not args.trigger:
            return _usage(name, "ID (the trigger id) or -f FILE is required")
        else:
            trigger_id, document = args.trigger, document_of_flags(args)
    except (ValueError, DocumentError) as exc:
        return _usage(name, str(exc))
    try:
        with connect.open_client(settings, args) as api:
            stored = api.create({**document, "trigger_id": trigger_id})
    except (ApiError, ApiUnreachable) as exc:
        return connect.failed(name, exc)
    if args.json:
        connect.print_json(stored.trigger)
    else:
        print(f"created {trigger_id}: version {stored.version}")
        print(trigger_card(stored.trigger))
    return 0


def _list(settings: Settings, args: argparse.Namespace) -> int:
    try:
        with connect.open_client(settings, args) as api:
            items = list(islice(api.list_all(label=args.label, state=args.state), args.limit))
    except (ApiError, ApiUnreachable) as exc:
        return connect.failed("horae triggers list", exc)
    if args.json:
        connect.print_json(items)
    else:
        print(triggers_table(items))
    return 0


def _show(settings: Settings, args: argparse.Namespace) -> int:
    try:
        with connect.open_client(settings, args) as api:
            stored = api.get(args.trigger)
    except (ApiError, ApiUnreachable) as exc:
        return connect.failed("horae triggers show", exc)
    if args.json:
        connect.print_json(stored.trigger)
    else:
        print(trigger_card(stored.trigger))
    return 0


def set_path(document: JSON, path: str, value: Any) -> None:
    """Set a dotted path of a document (missing objects on the way are created)."""
    *parents, last = path.split(".")
    here = document
    for part in parents:
        child = here.get(part)
        if not isinstance(child, dict):
            child = here[part] = {}
        here = child
    here[last] = value


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _amend(settings: Settings, args: argparse.Namespace) -> int:
    from horae.cli.apply import Current, DocumentError, diff, normalize, run_state, with_state

    name = "horae triggers amend"
    if args.selector is not None:
        return groups.run_group(settings, args, "amend")
    if not args.trigger:
        return _usage(name, "give an ID or --selector")
    if not args.file and not args.set:
        return _usage(name, "-f FILE or --set PATH=VALUE is required")
    try:
        edits = _pairs(args.set, "=", "--set")
        replacement = _one_document(args.file, args.trigger)[1] if args.file else None
    except (ValueError, DocumentError) as exc:
        return _usage(name, str(exc))
    try:
        with connect.open_client(settings, args) as api:
            stored = api.get(args.trigger)
            before = normalize(stored.trigger, stored=True)
            document = normalize(replacement) if replacement is not None else dict(before)
            document = json.loads(json.dumps(document))  # a deep copy to edit
            for path, text in edits.items():
                set_path(document, path, _value(text))
            document = normalize(document)
            held = Current(before, stored.version, run_state(stored.trigger))
            changes = diff(with_state(held, document), document)
            if not changes:
                print(f"{name}: {args.trigger}: nothing to change", file=sys.stderr)
                return 0
            version = stored.version if args.if_version is None else args.if_version
            amended = api.amend(args.trigger, {**document, "trigger_id": args.trigger}, version)
    except DocumentError as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        return 1
    except (ApiError, ApiUnreachable) as exc:
        return connect.failed(name, exc)
    if args.json:
        connect.print_json(amended.trigger)
    else:
        print(f"amended {args.trigger}: version {version} -> {amended.version}")
        for change in changes:
            print(f"  {change.line()}")
    return 0


def _act(settings: Settings, args: argparse.Namespace) -> int:
    act: str = args.triggers_command
    if act != "run" and args.selector is not None:
        return groups.run_group(settings, args, act)
    if not args.trigger:
        return _usage(f"horae triggers {act}", "give an ID or --selector")
    try:
        with connect.open_client(settings, args) as api:
            if act == "delete":
                api.delete(args.trigger)
                result: JSON = {}
            else:
                result = {"pause": api.pause, "resume": api.resume, "run": api.run}[act](
                    args.trigger
                )
    except (ApiError, ApiUnreachable) as exc:
        return connect.failed(f"horae triggers {act}", exc)
    if args.json:
        connect.print_json(result)
    elif act == "delete":
        print(f"deleted {args.trigger}")
    elif act == "run":
        fire, command = result.get("fire_key"), result.get("command_id")
        print(f"run {args.trigger}: fire {fire} (command {command})")
    else:
        print(f"{act} {args.trigger}: accepted (command {result.get('command_id')})")
    return 0


def occurrences_table(items: Iterable[JSON]) -> str:
    headers = ("UTC", "LOCAL", "OFFSET", "DST", "JITTER_MS")
    keys = ("utc", "local", "offset", "dst_note", "jitter_ms")
    return table(headers, ([o.get(k) for k in keys] for o in items))


def _next_of(settings: Settings, args: argparse.Namespace) -> int:
    try:
        with connect.open_client(settings, args) as api:
            rows = api.next(args.trigger, args.n)
    except (ApiError, ApiUnreachable) as exc:
        return connect.failed("horae triggers next", exc)
    if args.json:
        connect.print_json(rows)
    else:
        print(occurrences_table(rows))
    return 0


def _export(settings: Settings, args: argparse.Namespace) -> int:
    from horae.cli.apply import compact, normalize, run_state, to_yaml

    try:
        with connect.open_client(settings, args) as api:
            if args.triggers:
                stored = [api.get(t).trigger for t in args.triggers]
            else:
                stored = list(api.list_all(label=args.label))
    except (ApiError, ApiUnreachable) as exc:
        return connect.failed("horae triggers export", exc)
    documents = [  # a paused trigger's document says so (applied, it stays paused)
        {
            "id": t["trigger_id"],
            **({"state": "paused"} if run_state(t) == "paused" else {}),
            **compact(normalize(t, stored=True)),
        }
        for t in stored
        if t.get("state") != "deleted"
    ]
    if args.json:
        connect.print_json(documents)
    else:
        print(to_yaml(documents), end="")
    return 0


def _verify(settings: Settings, args: argparse.Namespace) -> int:
    try:
        with connect.open_client(settings, args) as api:
            made = api.verify_target(args.url)
    except (ApiError, ApiUnreachable) as exc:
        return connect.failed("horae targets verify", exc)
    if args.json:
        connect.print_json(made)
        return 0
    print(f"host {made.get('host')}: serve the answer at {made.get('well_known_url')}")
    print(f"  (before {made.get('expires_at')}) as the response body, status 200:")
    print(f"  {made.get('answer')}")
    print(f"  challenge {made.get('challenge')}")
    print(f"then: horae targets check {made.get('host')}")
    return 0


def _check(settings: Settings, args: argparse.Namespace) -> int:
    try:
        with connect.open_client(settings, args) as api:
            result = api.check_target(args.host)
    except (ApiError, ApiUnreachable) as exc:
        return connect.failed("horae targets check", exc)
    verified = result.get("state") == "verified"
    if args.json:
        connect.print_json(result)
    elif verified:
        print(f"host {result.get('host')}: verified until {result.get('verified_until')}")
    else:
        print(f"host {result.get('host')}: not verified: {result.get('detail')}", file=sys.stderr)
    return 0 if verified else 1


def _history(settings: Settings, args: argparse.Namespace) -> int:
    try:
        with connect.open_client(settings, args) as api:
            pages = api.history_all(args.trigger, start=args.start, end=args.end, state=args.state)
            fires = list(islice(pages, args.limit))
            state = None if args.json else api.get(args.trigger).trigger.get("state")
    except (ApiError, ApiUnreachable) as exc:
        return connect.failed("horae history", exc)
    if args.json:
        connect.print_json(fires)
    else:
        print(history_table(fires))
        if isinstance(state, str) and state in NOT_LIVE:
            print(f"{args.trigger} is {NOT_LIVE[state]}")
    return 0


def _fires(settings: Settings, args: argparse.Namespace) -> int:
    try:
        with connect.open_client(settings, args) as api:
            pages = api.fires_all(
                start=args.start, end=args.end, state=args.state, label=args.label
            )
            found = list(islice(pages, args.limit))
    except (ApiError, ApiUnreachable) as exc:
        return connect.failed("horae fires", exc)
    if args.json:
        connect.print_json(found)
    else:
        print(fires_table(found))
    return 0


def _cancel_fire(settings: Settings, args: argparse.Namespace) -> int:
    try:
        trigger_id = FireKey.parse(args.fire_key).trigger
    except ValidationError as exc:
        print(f"horae fires cancel: FIRE_KEY: {exc.message}", file=sys.stderr)
        return 2
    try:
        with connect.open_client(settings, args) as api:
            result = api.cancel_fire(trigger_id, args.fire_key)
    except (ApiError, ApiUnreachable) as exc:
        return connect.failed("horae fires cancel", exc)
    if args.json:
        connect.print_json(result)
    elif "command_id" in result:
        print(f"cancel {args.fire_key}: accepted (command {result.get('command_id')})")
    else:
        print(f"cancel {args.fire_key}: {result.get('detail') or 'already cancelled'}")
    return 0


def _lateness(settings: Settings, args: argparse.Namespace) -> int:
    try:
        with connect.open_client(settings, args) as api:
            summary = api.lateness(args.trigger, start=args.start, end=args.end)
    except (ApiError, ApiUnreachable) as exc:
        return connect.failed("horae lateness", exc)
    if args.json:
        connect.print_json(summary)
    else:
        if args.trigger is not None:
            summary = {**summary, "trigger_id": args.trigger}
        print(lateness_table(summary))
    return 0


def _backfill(settings: Settings, args: argparse.Namespace) -> int:
    name = "horae backfill"
    try:
        with connect.open_client(settings, args) as api:
            cost = api.backfill(args.trigger, args.start, args.end)
            print(
                f"backfill {args.trigger} from {args.start} to {args.end}: "
                f"{cost.get('fires')} fire(s)",
                file=sys.stderr if args.json else sys.stdout,
            )
            if not args.yes and not connect.confirm("Backfill?"):
                print(f"{name}: not confirmed, nothing sent", file=sys.stderr)
                return 1
            accepted = api.backfill(
                args.trigger, args.start, args.end, cost.get("confirm"), args.reason
            )
    except (ApiError, ApiUnreachable) as exc:
        return connect.failed(name, exc)
    if args.json:
        connect.print_json({"fires": cost.get("fires"), **accepted})
    else:
        print(f"backfill {args.trigger}: accepted (command {accepted.get('command_id')})")
    return 0
