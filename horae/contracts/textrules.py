"""What every text field of an incoming definition or command must be: one table of rules, checked
before anything stores, signs, logs or sends the record.

The Kafka ingress runs them (:func:`horae.contracts.ingress.ingest_definition`, which calls
:func:`check_definition` first thing in ``validate_definition``, and
:func:`horae.contracts.ingress.decode_command`), and so does the HTTP API on every definition and
command it produces and on every path and query value of a request (:func:`text_problem`). A
refusal is a :class:`~horae.domain.errors.ValidationError` naming the field (the API answers 422
with it, the planner quarantines the record with cause ``invalid``, the detail naming the field).

Every text field of :data:`DEFINITION_RULES` and :data:`COMMAND_RULES`:

- is text: from Avro, valid UTF-8 (a record whose bytes are not is refused, the field named); from
  JSON, no lone surrogate (``"\\ud800"``), which no UTF-8 text can carry;
- holds no control character: C0 (U+0000..U+001F), DEL (U+007F) or C1 (U+0080..U+009F). A NUL is
  what PostgreSQL's ``text`` cannot hold (one stalled the projector for every tenant); a line
  break is how a log line is forged. Free text (``description``, a command's ``reason``) may hold
  TAB and LF. Bytes fields (``payload``) are not text and are not checked;
- is at most its cap long (characters); maps and lists hold at most their cap of entries.

Per field, more: ``target.method`` is one of :data:`METHODS`, the methods both HTTP senders of the
dispatcher send (a token each; ``CONNECT`` and ``TRACE`` are not webhook calls). Header names are
RFC 9110 tokens; header values (and ``content_type``, sent as ``Content-Type``) are RFC 9110 field
values of visible ASCII with SP and HTAB inside, no leading or trailing blank (``obs-text``, bytes
above 0x7F, is refused: the two senders would encode it differently).

A JSON definition is walked by :func:`json_problem` before anything recursive touches it (the
Avro coercion, ``json.dumps``): nested deeper than :data:`MAX_DEPTH` (the schema needs 3 levels)
or holding a lone surrogate, it is refused naming the path.

Pure: no I/O, no state; each check is a compiled regular expression over the field.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from horae.contracts import events as ev
from horae.domain.errors import ValidationError

#: JSON nesting a definition may use (the schema needs 3: ``policies.retry.max_s``)
MAX_DEPTH = 32
#: the methods a webhook target may name: what both HTTP senders send
METHODS = frozenset({"DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT"})
#: how much of a refused value a refusal quotes
QUOTE = 40

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_CONTROL_BUT_TAB_LF = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")
TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
FIELD_VALUE = re.compile(r"(?:[\x21-\x7e](?:[\x20\x21-\x7e\t]*[\x21-\x7e])?)?")


@dataclass(frozen=True, slots=True)
class Rule:
    """One text field: its cap in characters and what it may hold (``line``: no control
    character; ``free``: TAB and LF too; ``token``: an RFC 9110 token; ``field-value``: an RFC
    9110 field value of visible ASCII)."""

    max_len: int
    kind: str = "line"
    min_len: int = 0


LINE = "line"
FREE = "free"
TOKEN_KIND = "token"
FIELD_VALUE_KIND = "field-value"

#: the caps of the definition's text fields (maps and lists: entries, then each key and value)
DEFINITION_RULES: Mapping[str, Rule] = {
    "author": Rule(512),
    "content_type": Rule(255, FIELD_VALUE_KIND),
    "description": Rule(4096, FREE),
    "recurrence.expr": Rule(256),
    "recurrence.zone": Rule(64),
    "target.url": Rule(2048),
    "target.topic": Rule(249),  # Kafka's longest topic name
    "target.body": Rule(16),
    "target.oidc.audience": Rule(2048, LINE, 1),
    "signature.key_id": Rule(256),
    "signature.value": Rule(256),
    "signature.alg": Rule(64),
}
LABELS, LABEL_KEY, LABEL_VALUE = 64, Rule(128, LINE, 1), Rule(256)
HEADERS, HEADER_NAME, HEADER_VALUE = 64, Rule(256, TOKEN_KIND, 1), Rule(4096, FIELD_VALUE_KIND)
SECRET_REFS, SECRET_REF = 16, Rule(128, LINE, 1)
COMMAND_RULES: Mapping[str, Rule] = {
    "command_id": Rule(256, LINE, 1),
    "tenant": Rule(63, LINE, 1),
    "trigger_id": Rule(63, LINE, 1),
    "requested_by": Rule(512),
    "reason": Rule(1024, FREE),
    "cancel_fire_key": Rule(512, LINE, 1),
    "signature.key_id": Rule(256),
    "signature.value": Rule(256),
    "signature.alg": Rule(64),
}


def quoted(value: str) -> str:
    """``value`` cut to :data:`QUOTE` characters for a refusal (its repr escapes what it holds)."""
    return value if len(value) <= QUOTE else value[:QUOTE] + "..."


def printable(value: str) -> str:
    """``value`` cut to :data:`QUOTE` characters and safe to print, log or encode as UTF-8:
    every character that is not printable (controls, lone surrogates) as its escape."""
    cut = quoted(value)
    return cut if cut.isprintable() else ascii(cut)[1:-1]


def _char_problem(ch: str, at: int) -> str:
    code = ord(ch)
    if 0xDC80 <= code <= 0xDCFF:  # how a byte that is not UTF-8 decodes (surrogateescape)
        return f"not valid UTF-8 (byte 0x{code - 0xDC00:02x} at {at})"
    if 0xD800 <= code <= 0xDFFF:
        return f"not valid Unicode text (a lone surrogate U+{code:04X} at {at})"
    return f"holds a control character (U+{code:04X} at {at})"


def text_problem(value: str, rule: Rule) -> str | None:
    """Why ``value`` breaks ``rule``, else None."""
    if len(value) > rule.max_len:
        return f"longer than {rule.max_len} characters ({len(value)})"
    if len(value) < rule.min_len:
        return "must not be empty"
    bad = (_CONTROL_BUT_TAB_LF if rule.kind == FREE else _CONTROL).search(value)
    if bad is not None:
        return _char_problem(bad.group(), bad.start())
    if rule.kind == TOKEN_KIND and not TOKEN.fullmatch(value):
        return "not an RFC 9110 token (letters, digits and !#$%&'*+-.^_`|~)"
    if rule.kind == FIELD_VALUE_KIND and not FIELD_VALUE.fullmatch(value):
        return "not an RFC 9110 field value (visible ASCII, SP and TAB inside, no blank at an end)"
    return None


def _check(field: str, value: str | None, rule: Rule) -> None:
    if value is None:
        return
    problem = text_problem(value, rule)
    if problem is not None:
        raise ValidationError(field, quoted(value), problem)


def _check_map(
    field: str, items: Mapping[str, str], cap: int, key_rule: Rule, value_rule: Rule
) -> None:
    if len(items) > cap:
        raise ValidationError(field, len(items), f"at most {cap} entries")
    for key, value in items.items():
        problem = text_problem(key, key_rule)
        if problem is not None:
            raise ValidationError(field, quoted(key), f"key '{printable(key)}': {problem}")
        _check(f"{field}.{printable(key)}", value, value_rule)


def _check_list(field: str, items: Iterable[str], cap: int, rule: Rule) -> None:
    listed = list(items)
    if len(listed) > cap:
        raise ValidationError(field, len(listed), f"at most {cap} entries")
    for i, value in enumerate(listed):
        _check(f"{field}[{i}]", value, rule)


def _check_signature(s: ev.Signature | None, rules: Mapping[str, Rule]) -> None:
    if s is None:
        return
    for name, value in (("key_id", s.key_id), ("value", s.value), ("alg", s.alg)):
        _check(f"signature.{name}", value, rules[f"signature.{name}"])


def check_definition(d: ev.TriggerDefinition) -> None:
    """Every text field of ``d`` by :data:`DEFINITION_RULES` (``tenant`` and ``trigger_id`` keep
    their own pattern in ``validate_definition``); raises :class:`ValidationError`."""
    r, t, rules = d.recurrence, d.target, DEFINITION_RULES
    for field, value in (
        ("author", d.author),
        ("content_type", d.content_type),
        ("description", d.description),
        ("recurrence.expr", r.expr),
        ("recurrence.zone", r.zone),
        ("target.url", t.url),
        ("target.topic", t.topic),
        ("target.body", t.body),
        ("target.oidc.audience", None if t.oidc is None else t.oidc.audience),
    ):
        _check(field, value, rules[field])
    if t.method not in METHODS:
        allowed = ", ".join(sorted(METHODS))
        raise ValidationError("target.method", quoted(t.method), f"expected one of {allowed}")
    _check_map("target.headers", t.headers, HEADERS, HEADER_NAME, HEADER_VALUE)
    _check_list("target.secret_refs", t.secret_refs, SECRET_REFS, SECRET_REF)
    _check_map("labels", d.labels, LABELS, LABEL_KEY, LABEL_VALUE)
    _check_signature(d.signature, rules)


def check_command(c: ev.Command) -> None:
    """Every text field of ``c`` by :data:`COMMAND_RULES`; raises :class:`ValidationError`."""
    rules = COMMAND_RULES
    for field, value in (
        ("command_id", c.command_id),
        ("tenant", c.tenant),
        ("trigger_id", c.trigger_id),
        ("requested_by", c.requested_by),
        ("reason", c.reason),
        ("cancel_fire_key", c.cancel_fire_key),
    ):
        _check(field, value, rules[field])
    _check_signature(c.signature, rules)


def _children(value: Any, path: str) -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for key, item in value.items():
            sub = f"{path}.{printable(key)}" if path else printable(key)
            yield sub, key
            yield sub, item
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield f"{path}[{i}]", item


def json_problem(value: Any, max_depth: int = MAX_DEPTH) -> tuple[str, str] | None:
    """``(path, why)`` when parsed JSON ``value`` nests deeper than ``max_depth`` or holds a
    string (a key or a value) that is not Unicode text (a lone surrogate); else None. Walks
    without recursion, so any depth json.loads returned is safe to walk."""
    todo: list[tuple[str, Any, int]] = [("", value, 0)]
    while todo:
        path, item, depth = todo.pop()
        if isinstance(item, str):
            bad = _SURROGATE.search(item)
            if bad is not None:
                return path or "<body>", _char_problem(bad.group(), bad.start())
        elif isinstance(item, dict | list):
            if depth >= max_depth:
                where = path if len(path) <= 120 else path[:120] + "..."
                return where or "<body>", f"nested deeper than {max_depth} levels"
            todo.extend((p, v, depth + 1) for p, v in _children(item, path))
    return None
