"""``horae apply -f PATH`` and ``horae diff -f PATH``: triggers kept as files, the way people keep
them in git.

Usage::

    horae diff  -f PATH [--prune] [--label KEY:VALUE] [--json]
    horae apply -f PATH [--prune] [--label KEY:VALUE] [--yes] [--json]

``PATH`` is a YAML or JSON file, a folder (every ``*.yaml``, ``*.yml`` and ``*.json`` below it, in
name order) or ``-`` (YAML on stdin). One document per trigger, several per YAML file
(``---``), a JSON file one object or a list of them. A document is the trigger JSON of the API
(TriggerIn, ``docs/api.md``) with the trigger's ``id``; what the API fills in (``tenant``,
``version``, ``authored_at``, ``author``, ``role``, ``signature``) is refused, and so are unknown
fields, wrong types and two documents with one id (naming the file and document). ``state``
(``live`` or ``paused``) manages the pause declaratively: given, it is planned like a field
(compared with the stored trigger's run state, the state it is decided under); absent, the
stored trigger keeps whatever state it has (a paused one stays paused).

The stored triggers are the API's listing (the read model) and, for each document's id it
lacks, a read by id (which sees what this API just wrote, before the read model does). The plan
compares each document with the stored trigger, both in their full form (the schema's defaults
filled in, instants in UTC), field by field:

- ``create`` a trigger no stored one has the id of;
- ``change`` one whose fields differ: each difference as ``path: before -> after`` (``state:
  paused -> live`` resumes it: an amendment whose state is live);
- ``delete`` a stored trigger no document names, only with ``--prune`` (without it they are
  counted as kept). ``--label KEY:VALUE`` narrows the stored triggers considered to those with
  the label (so ``--prune`` deletes only among them).

A suspended tenant's or a completed trigger is compared by its run state: ``state: live``
plans nothing for a live trigger of a suspended tenant (the suspension is the platform's act).

``diff`` prints the plan and exits 2 when it has steps, 0 when none (1 on an error).
``apply`` prints the plan, asks for confirmation (a line ``y`` on stdin; ``--yes``: does not
ask, and is required with ``-f -``) and applies it step by step: create, amend with
``If-Match`` on the version the plan read (a trigger changed since answers 412 and the apply
stops: run it again), delete. It stops at the first refused step (exit 1, what was done is
printed); applying the same files again plans nothing. A stored trigger with a field this
version does not know stops the plan (exit 1) rather than being planned around.
:func:`plan` is a pure function and :func:`execute` runs a plan against any
:class:`TriggerStore`. ``horae triggers export`` prints stored triggers as these documents
(:func:`compact`, :func:`to_yaml`).
"""

from __future__ import annotations

import argparse
import base64
import binascii
import contextlib
import json
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

import yaml

from horae.api.client import ApiClient, ApiError, ApiUnreachable
from horae.cli import connect
from horae.contracts import events as ev
from horae.contracts.codec import DecodeError, default_codec
from horae.contracts.ingress import NAME
from horae.contracts.jsonform import coerce, plain
from horae.settings import Settings

Doc = dict[str, Any]
#: Fields of a definition the API fills in: never in a document, never compared.
SERVER_FIELDS = ("tenant", "version", "authored_at", "author", "role", "signature")
#: What TriggerOut adds to a stored definition, or shows of it (left out of its full form; the
#: run state is compared with a document's ``state`` when it has one: :class:`Current`).
OUTPUT_FIELDS = (
    "state", "run_state", "created_at", "updated_at", "next_instants", "last_run"
)  # fmt: skip
#: The states a document may ask for (``state``); without one the stored trigger's is kept.
DOCUMENT_STATES = ("live", "paused")
SUFFIXES = (".yaml", ".yml", ".json")


class DocumentError(ValueError):
    """A document that cannot be planned: where it is and why."""


class _Absent:
    def __repr__(self) -> str:
        return "(absent)"


#: A field one side of a change does not have.
ABSENT: Any = _Absent()


@dataclass(frozen=True)
class Change:
    """One field that differs: its dotted path, the stored value and the desired one."""

    path: str
    before: Any
    after: Any

    def line(self) -> str:
        return f"{self.path}: {_show(self.before)} -> {_show(self.after)}"


@dataclass(frozen=True)
class Current:
    """A stored trigger: its document (full form, without the id and state), version and run
    state (``live`` / ``paused``: what a document's ``state`` is compared with; ``None``:
    unknown)."""

    document: Doc
    version: int
    state: str | None = None


@dataclass(frozen=True)
class Step:
    """One act of a plan. ``document``: the desired one (create, change); ``version``: the
    stored version it was planned against (change, delete)."""

    action: Literal["create", "change", "delete"]
    trigger_id: str
    document: Doc | None = None
    version: int | None = None
    changes: tuple[Change, ...] = ()


@dataclass(frozen=True)
class Plan:
    """The steps from the stored triggers to the desired ones, and the ids of stored triggers
    no document names that are kept (no ``--prune``)."""

    steps: tuple[Step, ...] = ()
    kept: tuple[str, ...] = ()

    def count(self, action: str) -> int:
        return sum(1 for s in self.steps if s.action == action)

    def lines(self) -> list[str]:
        """The plan for people: one line per step (changes indented under it) and a total."""
        out: list[str] = []
        for step in self.steps:
            if step.action == "create":
                out.append(f"+ create {step.trigger_id}")
            elif step.action == "change":
                out.append(f"~ change {step.trigger_id} (version {step.version})")
                out += [f"    {c.line()}" for c in step.changes]
            else:
                out.append(f"- delete {step.trigger_id} (version {step.version})")
        if self.kept:
            out.append(
                f"  {len(self.kept)} stored trigger(s) not in the files kept "
                f"({', '.join(self.kept)}); --prune deletes them"
            )
        if not self.steps:
            out.append("No changes.")
        else:
            out.append(
                f"Plan: {self.count('create')} to create, {self.count('change')} to change, "
                f"{self.count('delete')} to delete."
            )
        return out

    def as_json(self) -> dict[str, Any]:
        return {
            "steps": [
                {
                    "action": s.action,
                    "id": s.trigger_id,
                    "version": s.version,
                    "changes": [
                        {"path": c.path, "before": _jsonable(c.before), "after": _jsonable(c.after)}
                        for c in s.changes
                    ],
                }
                for s in self.steps
            ],
            "kept": list(self.kept),
        }


# --- planning (pure) ----------------------------------------------------------------------


def diff(before: Any, after: Any, path: str = "") -> list[Change]:
    """Field-level differences of two JSON values: objects compared key by key (recursively),
    anything else (lists included) as a whole; a key on one side only is :data:`ABSENT` on the
    other."""
    if isinstance(before, dict) and isinstance(after, dict):
        changes: list[Change] = []
        for key in sorted(set(before) | set(after)):
            sub = f"{path}.{key}" if path else str(key)
            if key not in before:
                changes.append(Change(sub, ABSENT, after[key]))
            elif key not in after:
                changes.append(Change(sub, before[key], ABSENT))
            else:
                changes += diff(before[key], after[key], sub)
        return changes
    if before == after and type(before) is type(after):
        return []
    return [Change(path or "<document>", before, after)]


def plan(desired: Mapping[str, Doc], current: Mapping[str, Current], prune: bool) -> Plan:
    """The plan from ``current`` (stored triggers by id) to ``desired`` (documents by id, the
    id left out): creates and changes in id order, then deletes (``prune``) in id order. A
    document's ``state`` is compared with the stored run state; without one the stored state is
    not compared (and the amendment, which has none, keeps it)."""
    steps: list[Step] = []
    for trigger_id in sorted(desired):
        document = desired[trigger_id]
        stored = current.get(trigger_id)
        if stored is None:
            steps.append(Step("create", trigger_id, document))
        elif changes := diff(with_state(stored, document), document):
            steps.append(Step("change", trigger_id, document, stored.version, tuple(changes)))
    gone = sorted(set(current) - set(desired))
    if prune:
        steps += [Step("delete", t, version=current[t].version) for t in gone]
    return Plan(tuple(steps), () if prune else tuple(gone))


def with_state(stored: Current, document: Mapping[str, Any]) -> Doc:
    """``stored``'s full form, with its run state when ``document`` names a state (so the two
    compare field for field)."""
    if "state" not in document:
        return stored.document
    return {**stored.document, "state": stored.state}


def run_state(trigger: Mapping[str, Any]) -> str | None:
    """The run state of a TriggerOut (``run_state``; from an API without it, ``state`` when it
    is live or paused), ``None`` when unknown."""
    run = trigger.get("run_state")
    if run is None and trigger.get("state") in DOCUMENT_STATES:
        run = trigger.get("state")
    return run if isinstance(run, str) else None


class TriggerStore(Protocol):
    """Where a plan is applied. Each call raises when it is refused."""

    def create(self, trigger_id: str, document: Doc) -> None: ...

    def amend(self, trigger_id: str, document: Doc, version: int) -> None:
        """Replace the trigger if its version is still ``version``."""
        ...

    def delete(self, trigger_id: str) -> None: ...


def execute(steps: Iterable[Step], store: TriggerStore) -> Iterator[Step]:
    """Apply ``steps`` in order, yielding each once it is done; a refused step raises (what
    the store raised) and the later steps are not run."""
    for step in steps:
        if step.action == "create":
            assert step.document is not None
            store.create(step.trigger_id, step.document)
        elif step.action == "change":
            assert step.document is not None and step.version is not None
            store.amend(step.trigger_id, step.document, step.version)
        else:
            store.delete(step.trigger_id)
        yield step


# --- documents ----------------------------------------------------------------------------


class _Loader(yaml.SafeLoader):
    """YAML without implicit timestamps: an instant stays the string it was written as (and
    is validated as RFC 3339 with an offset, like JSON)."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _files(path: Path) -> list[Path]:
    if path.is_dir():
        return sorted(
            p
            for p in path.rglob("*")
            if p.is_file()
            and p.suffix in SUFFIXES
            and not any(part.startswith(".") for part in p.relative_to(path).parts)
        )
    if path.is_file():
        return [path]
    raise DocumentError(f"{path}: no such file or folder")


def _parse(text: str, name: str, as_json: bool) -> list[tuple[str, Any]]:
    try:
        if as_json:
            value = json.loads(text)
            values = value if isinstance(value, list) else [value]
        else:
            values = [v for v in yaml.load_all(text, Loader=_Loader) if v is not None]
    except (ValueError, yaml.YAMLError) as exc:
        raise DocumentError(f"{name}: not {'JSON' if as_json else 'YAML'}: {exc}") from exc
    many = len(values) > 1
    return [(f"{name} (document {i + 1})" if many else name, v) for i, v in enumerate(values)]


def read_documents(path: str) -> dict[str, tuple[str, Doc]]:
    """The documents of a file, a folder or ``-`` (stdin) by trigger id, each with where it
    was read (``file`` or ``file (document N)``) and without its id; :class:`DocumentError`
    when one is not an object with a valid id or two have one id."""
    sources: list[tuple[str, Any]] = []
    if path == "-":
        sources = _parse(sys.stdin.read(), "<stdin>", as_json=False)
    else:
        for file in _files(Path(path)):
            text = file.read_text(encoding="utf-8")
            sources += _parse(text, str(file), as_json=file.suffix == ".json")
    found: dict[str, tuple[str, Doc]] = {}
    for where, value in sources:
        if not isinstance(value, dict):
            raise DocumentError(f"{where}: a trigger document is an object (a mapping)")
        document = dict(value)
        trigger_id = document.pop("id", None)
        if not isinstance(trigger_id, str) or not NAME.match(trigger_id):
            raise DocumentError(
                f"{where}: id {trigger_id!r}: expected 1-63 chars of a-z 0-9 . _ - "
            )
        if trigger_id in found:
            raise DocumentError(f"{where}: id {trigger_id!r} is also in {found[trigger_id][0]}")
        found[trigger_id] = (where, document)
    return found


def normalize(document: Mapping[str, Any], *, stored: bool = False) -> Doc:
    """The full form of a trigger document: validated against the definition schema, defaults
    filled in, instants RFC 3339 UTC, the payload a string (base64 object when not UTF-8).
    ``stored``: a TriggerOut (its id, the fields the API fills and adds are dropped); else a
    desired document (those fields are refused; a ``state``, live or paused, is kept).
    :class:`DocumentError` on a bad document."""
    body = dict(document)
    state = body.pop("state", None) if not stored else None
    if stored:
        for name in (*SERVER_FIELDS, *OUTPUT_FIELDS, "trigger_id", "id"):
            body.pop(name, None)
    else:
        owned = [name for name in (*SERVER_FIELDS, "trigger_id") if name in body]
        if owned:
            raise DocumentError(f"{owned[0]}: set by the API, not by a document")
        if "state" in document and state not in DOCUMENT_STATES:
            raise DocumentError(
                f"state: {state!r}: expected live or paused (or no state: keep the stored one)"
            )
    filler = {
        "tenant": "-", "trigger_id": "-", "version": 1, "state": "live", "authored_at": 0,
        "author": "-",
    }  # fmt: skip
    schema = default_codec().current.raw[ev.TriggerDefinition]
    try:
        datum = coerce(schema, {**body, **filler})
    except DecodeError as exc:
        raise DocumentError(exc.detail) from exc
    full: Doc = plain(datum)
    for name in (*SERVER_FIELDS, "trigger_id"):
        full.pop(name, None)
    full.pop("state", None)
    payload = full.get("payload")
    if isinstance(payload, dict) and set(payload) == {"base64"}:
        with contextlib.suppress(binascii.Error, UnicodeDecodeError):
            full["payload"] = base64.b64decode(payload["base64"]).decode("utf-8")
    if state is not None:
        full["state"] = state
    return full


def compact(full: Doc) -> Doc:
    """A full-form document with every field equal to its default left out (the kinds of the
    recurrence and the target kept): what a person would write. ``normalize(compact(d)) == d``."""
    kinds = {
        "recurrence": {"kind": full["recurrence"]["kind"]},
        "target": {"kind": full["target"]["kind"]},
    }
    return _without(full, normalize(kinds), keep=kinds)


def _without(value: Doc, default: Doc, keep: Doc) -> Doc:
    out: Doc = {}
    for key, item in value.items():
        base, kept = default.get(key, ABSENT), keep.get(key, ABSENT)
        if isinstance(item, dict) and isinstance(base, dict) and item:
            inner = _without(item, base, kept if isinstance(kept, dict) else {})
            if inner:
                out[key] = inner
        elif kept is not ABSENT or item != base or type(item) is not type(base):
            out[key] = item
    return out


def to_yaml(documents: Iterable[Doc]) -> str:
    """Documents as one multi-document YAML text (keys in their order) that
    :func:`read_documents` reads back equal: characters as they are where that holds, else
    escaped (YAML takes some Unicode characters, e.g. U+0085, for line breaks)."""
    return "---\n".join(_yaml(d) for d in documents)


def _yaml(document: Doc) -> str:
    text = yaml.safe_dump(document, sort_keys=False, allow_unicode=True)
    if yaml.load(text, Loader=_Loader) == document:
        return text
    return yaml.safe_dump(document, sort_keys=False, allow_unicode=False)


def trigger_in(trigger_id: str, document: Doc) -> Doc:
    """The API's request body of a document (``trigger_id`` set)."""
    return {**document, "trigger_id": trigger_id}


def current_triggers(
    api: ApiClient, label: str | None, named: Iterable[str] = ()
) -> dict[str, Current]:
    """The tenant's stored triggers (deleted ones left out), in full form, by id: the listing
    (with ``label``), and each id of ``named`` it lacks read one by one (the listing is the
    read model, which may lag behind a write this API just acknowledged; a read by id sees it)."""
    found: dict[str, Current] = {}
    for item in api.list_all(label=label):
        found[str(item["trigger_id"])] = Current(
            _stored(item), int(item["version"]), run_state(item)
        )
    for trigger_id in sorted(set(named) - set(found)):
        try:
            stored = api.get(trigger_id)
        except ApiError as exc:
            if exc.status == 404:
                continue
            raise
        if stored.trigger.get("state") != "deleted":
            found[trigger_id] = Current(
                _stored(stored.trigger), stored.version, run_state(stored.trigger)
            )
    return found


def _stored(trigger: Doc) -> Doc:
    try:
        return normalize(trigger, stored=True)
    except DocumentError as exc:  # a field this version does not know: never plan around it
        raise DocumentError(
            f"stored trigger {trigger.get('trigger_id')!r}: {exc} (the API is newer than this "
            "horae: upgrade it)"
        ) from exc


class ApiStore:
    """:class:`TriggerStore` over the HTTP API."""

    def __init__(self, api: ApiClient) -> None:
        self.api = api

    def create(self, trigger_id: str, document: Doc) -> None:
        self.api.create(trigger_in(trigger_id, document))

    def amend(self, trigger_id: str, document: Doc, version: int) -> None:
        self.api.amend(trigger_id, trigger_in(trigger_id, document), version)

    def delete(self, trigger_id: str) -> None:
        self.api.delete(trigger_id)


# --- the commands -------------------------------------------------------------------------


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    texts = {
        "diff": "print the plan from the stored triggers to the files (exit 2: changes)",
        "apply": "print the plan from the stored triggers to the files and apply it",
    }
    for name, text in texts.items():
        p = subparsers.add_parser(name, help=text, description=text)
        p.add_argument(
            "-f",
            "--file",
            required=True,
            metavar="PATH",
            help="a YAML/JSON file, a folder of them, or - (stdin)",
        )
        p.add_argument(
            "--prune", action="store_true", help="delete stored triggers no document names"
        )
        p.add_argument(
            "--label",
            metavar="KEY:VALUE",
            default=None,
            help="consider only the stored triggers with this label",
        )
        if name == "apply":
            p.add_argument("--yes", "-y", action="store_true", help="apply without asking")
        connect.add_connection_flags(p)
        p.set_defaults(func=_diff if name == "diff" else _apply)


def _planned(api: ApiClient, args: argparse.Namespace) -> Plan:
    files = read_documents(args.file)
    desired: dict[str, Doc] = {}
    for trigger_id, (where, document) in files.items():
        try:
            desired[trigger_id] = normalize(document)
        except DocumentError as exc:
            raise DocumentError(f"{where}: {exc}") from exc
    return plan(desired, current_triggers(api, args.label, desired), args.prune)


def _show_plan(result: Plan, args: argparse.Namespace) -> None:
    if args.json:
        print(json.dumps(result.as_json(), indent=2))
    else:
        print("\n".join(result.lines()))


def _diff(settings: Settings, args: argparse.Namespace) -> int:
    name = "horae diff"
    try:
        with connect.open_client(settings, args) as api:
            result = _planned(api, args)
    except DocumentError as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        return 1
    except (ApiError, ApiUnreachable) as exc:
        return connect.failed(name, exc)
    _show_plan(result, args)
    return 2 if result.steps else 0


def _apply(settings: Settings, args: argparse.Namespace) -> int:
    name = "horae apply"
    if args.file == "-" and not args.yes:
        print(f"{name}: -f - reads the documents from stdin: add --yes", file=sys.stderr)
        return 2
    try:
        with connect.open_client(settings, args) as api:
            result = _planned(api, args)
            _show_plan(result, args)
            if not result.steps:
                return 0
            if not args.yes and not connect.confirm("Apply this plan?"):
                print(f"{name}: not applied", file=sys.stderr)
                return 1
            done = 0
            try:
                for step in execute(result.steps, ApiStore(api)):
                    done += 1
                    if not args.json:
                        print(f"{step.action}d {step.trigger_id}")
            except (ApiError, ApiUnreachable) as exc:
                step = result.steps[done]
                print(
                    f"{name}: {step.action} {step.trigger_id} failed after {done} step(s) done",
                    file=sys.stderr,
                )
                return connect.failed(name, exc)
            if not args.json:
                print(f"Applied: {done} step(s).")
    except DocumentError as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        return 1
    except (ApiError, ApiUnreachable) as exc:
        return connect.failed(name, exc)
    return 0


def _show(value: Any) -> str:
    if value is ABSENT:
        return "(absent)"
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True)


def _jsonable(value: Any) -> Any:
    return None if value is ABSENT else value
