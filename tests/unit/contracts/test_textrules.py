"""The text rules of every incoming definition and command (:mod:`horae.contracts.textrules`):
each rule against an oracle written independently of its regular expression, and each refusal
through the Kafka ingress (wire Avro and JSON) naming the field."""

from __future__ import annotations

import json
import unicodedata
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from horae.contracts import events as ev
from horae.contracts import signing
from horae.contracts.codec import DecodeError, encode
from horae.contracts.ingress import decode_command, decode_definition
from horae.contracts.textrules import (
    DEFINITION_RULES,
    FIELD_VALUE_KIND,
    FREE,
    LINE,
    MAX_DEPTH,
    METHODS,
    TOKEN_KIND,
    Rule,
    check_command,
    check_definition,
    json_problem,
    printable,
    text_problem,
)
from horae.domain.errors import ValidationError
from tests.unit.contracts.test_ingress import as_json, ingest, sample, signed

TCHAR = set("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
#: text with what the rules are about: controls, lone surrogates, blanks, obs-text, tchars
NASTY = st.text(
    st.one_of(
        st.characters(),
        st.sampled_from(["\x00", "\n", "\r", "\t", " ", "\x7f", "\x85", "\ud800", "\udcff", "é"]),
        st.sampled_from(sorted(TCHAR)),
    ),
    max_size=40,
)


def is_control(ch: str) -> bool:
    return unicodedata.category(ch) in ("Cc", "Cs")  # C0, DEL, C1; a lone surrogate


def line_oracle(value: str, cap: int) -> bool:
    return len(value) <= cap and not any(is_control(c) for c in value)


def field_value_oracle(value: str) -> bool:
    """RFC 9110 field-value without obs-text: VCHAR, SP and HTAB, no blank at either end."""
    if any(not (c in " \t" or 0x21 <= ord(c) <= 0x7E) for c in value):
        return False
    return not value or (value[0] not in " \t" and value[-1] not in " \t")


@given(NASTY, st.integers(0, 50))
def test_a_line_holds_no_control_and_keeps_its_cap(value: str, cap: int) -> None:
    assert (text_problem(value, Rule(cap, LINE)) is None) == line_oracle(value, cap)


@given(NASTY)
def test_free_text_may_hold_tab_and_newline_only(value: str) -> None:
    ok = not any(is_control(c) and c not in "\t\n" for c in value)
    assert (text_problem(value, Rule(100, FREE)) is None) == ok


@given(NASTY)
def test_a_token_is_tchars(value: str) -> None:
    ok = bool(value) and set(value) <= TCHAR
    assert (text_problem(value, Rule(100, TOKEN_KIND, 1)) is None) == ok


@given(NASTY)
def test_a_field_value_is_visible_ascii_with_blanks_inside(value: str) -> None:
    assert (text_problem(value, Rule(100, FIELD_VALUE_KIND)) is None) == field_value_oracle(value)


@given(NASTY)
def test_printable_is_safe_to_log_and_encode(value: str) -> None:
    shown = printable(value)
    assert shown.isprintable() and "\n" not in shown
    shown.encode("utf-8")  # no lone surrogate left


def depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((depth(v) for v in value), default=0)
    return 0


JSON = st.recursive(
    st.none() | st.integers() | st.text(max_size=3),
    lambda inner: (
        st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=2), inner, max_size=2)
    ),
    max_leaves=60,
)


@given(JSON, st.integers(1, 8))
def test_json_depth_against_a_recursive_oracle(value: Any, limit: int) -> None:
    assert (json_problem(value, limit) is None) == (depth(value) <= limit)


def test_json_nested_beyond_any_recursion_limit_is_walked() -> None:
    value: Any = "x"
    for _ in range(100_000):
        value = {"a": value}
    where, why = json_problem(value) or ("", "")
    assert where.startswith("a.a.a") and why == f"nested deeper than {MAX_DEPTH} levels"
    assert json_problem({"k\ud800": 1}) == (
        "k\\ud800",
        "not valid Unicode text (a lone surrogate U+D800 at 1)",
    )


def text_fields(d: ev.TriggerDefinition) -> dict[str, Any]:
    """A definition with ``value`` in each text field of the rules table."""
    return {
        "author": lambda v: replace(d, author=v),
        "content_type": lambda v: replace(d, content_type=v),
        "description": lambda v: replace(d, description=v),
        "recurrence.expr": lambda v: replace(d, recurrence=replace(d.recurrence, expr=v)),
        "recurrence.zone": lambda v: replace(d, recurrence=replace(d.recurrence, zone=v)),
        "target.url": lambda v: replace(d, target=replace(d.target, url=v)),
        "target.topic": lambda v: replace(d, target=replace(d.target, topic=v)),
        "target.body": lambda v: replace(d, target=replace(d.target, body=v)),
        "target.oidc.audience": lambda v: replace(
            d, target=replace(d.target, oidc=ev.OidcToken(audience=v))
        ),
        "target.method": lambda v: replace(d, target=replace(d.target, method=v)),
        "target.headers.x-team": lambda v: replace(
            d, target=replace(d.target, headers={"x-team": v})
        ),
        "target.secret_refs[0]": lambda v: replace(d, target=replace(d.target, secret_refs=(v,))),
        "labels.env": lambda v: replace(d, labels={"env": v}),
    }


FIELDS = sorted(text_fields(sample()))


def test_the_table_covers_every_text_field_of_a_definition() -> None:
    """Every ``str`` field of the definition and its parts is in the table or has its own rule
    (tenant and trigger id: NAME; method: METHODS; maps and lists: their entries)."""
    own = {
        "tenant",
        "trigger_id",
        "target.method",
        "target.headers",
        "target.secret_refs",
        "labels",
    }
    found = set()
    for prefix, cls in (("", ev.TriggerDefinition), ("recurrence.", ev.Recurrence),
                        ("target.", ev.Target), ("target.oidc.", ev.OidcToken),
                        ("signature.", ev.Signature)):  # fmt: skip
        for name, f in cls.__dataclass_fields__.items():
            kind = str(f.type)
            if "str" in kind and "Role" not in kind and "State" not in kind:
                found.add(prefix + name)
    assert found - own == set(DEFINITION_RULES)


@pytest.mark.parametrize("field", FIELDS)
@pytest.mark.parametrize("bad", ["a\x00b", "line\nbreak", "\x1b[31m", "\x85"])
def test_a_control_character_is_refused_naming_the_field(field: str, bad: str) -> None:
    if field == "description" and bad == "line\nbreak":
        bad = "tab\tand\nnewline are free text\x00"  # but NUL is not
    d = text_fields(sample())[field](bad)
    with pytest.raises(ValidationError) as refused:
        check_definition(d)
    assert refused.value.field == field
    result = ingest(encode(signing.sign(d, "acme-1", b"acme-secret")))
    assert isinstance(result, ev.Quarantined) and result.cause == "invalid"
    assert result.detail.startswith(f"{field}: ")


def test_every_allowed_method_passes_and_nothing_else() -> None:
    for method in METHODS:
        check_definition(replace(sample(), target=replace(sample().target, method=method)))
    for method in ("post", "CONNECT", "TRACE", "FOO BAR", "", "GET\r\nX: y"):
        with pytest.raises(ValidationError, match=r"target\.method"):
            check_definition(replace(sample(), target=replace(sample().target, method=method)))


@pytest.mark.parametrize(
    ("headers", "why"),
    [
        ({"x-a\r\nx-b": "1"}, "key 'x-a\\r\\nx-b': holds a control character (U+000D at 3)"),
        ({"x a": "1"}, "token"),
        ({"": "1"}, "empty"),
        ({"x-a": "1\r\nInjected: yes"}, "control"),
        ({"x-a": " padded"}, "field value"),
        ({"x-a": "caf\u00e9"}, "field value"),
        ({f"x-{i}": "v" for i in range(65)}, "at most 64"),
        ({"x-a": "v" * 4097}, "longer than 4096"),
    ],
)
def test_header_names_and_values_keep_rfc_9110(headers: dict[str, str], why: str) -> None:
    d = replace(sample(), target=replace(sample().target, headers=headers))
    with pytest.raises(ValidationError, match=r"target\.headers") as refused:
        check_definition(d)
    assert why in str(refused.value)


def test_caps() -> None:
    d = sample()
    with pytest.raises(ValidationError, match="description: longer than 4096"):
        check_definition(replace(d, description="x" * 4097))
    with pytest.raises(ValidationError, match="labels: at most 64"):
        check_definition(replace(d, labels={str(i): "v" for i in range(65)}))
    check_definition(replace(d, description="x" * 4096, labels={str(i): "v" for i in range(64)}))


def test_json_refusals_name_the_path() -> None:
    obj = as_json(signed())
    obj["labels"] = {"env": "a\ud800b"}
    with pytest.raises(DecodeError) as refused:
        decode_definition(json.dumps(obj).encode())
    assert refused.value.cause == "invalid"
    assert (
        refused.value.detail == "labels.env: not valid Unicode text (a lone surrogate U+D800 at 1)"
    )
    obj["labels"] = {"env": "x"}
    obj["description"] = "before\u0000after"
    result = ingest(json.dumps(obj).encode())
    assert isinstance(result, ev.Quarantined) and result.cause == "invalid"
    assert result.detail.startswith("description: holds a control character (U+0000 at 6)")
    obj["description"] = None
    for deep in (40, 900, 990, 5000):
        nested = '{"a":' * deep + '"x"' + "}" * deep
        text = json.dumps(obj).replace('"labels": {"env": "x"}', f'"labels": {nested}')
        result = ingest(text.encode())
        assert isinstance(result, ev.Quarantined), deep
        assert result.cause == "json" or result.detail.startswith("labels.a.a"), result.detail


def test_wire_text_that_is_not_utf8_is_refused_naming_the_field() -> None:
    wire = encode(signed(replace(sample(), description="MARKER")))
    broken = wire.replace(b"MARKER", b"MA\xffKER")
    result = ingest(broken)
    assert isinstance(result, ev.Quarantined) and result.cause == "invalid", result
    assert result.detail.startswith("description: not valid UTF-8 (byte 0xff at 2)")


def command(**change: Any) -> ev.Command:
    now = datetime(2025, 4, 1, tzinfo=UTC)
    c = ev.Command(
        command_id="c-1", tenant="acme", trigger_id="nightly", kind=ev.CommandKind.PAUSE,
        requested_by="alice", role=ev.Role.AUTHOR, requested_at=now, reason="maintenance",
        expires_at=now + timedelta(minutes=5),
    )  # fmt: skip
    return replace(c, **change)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"reason": "before\x00after"}, "reason"),
        ({"reason": "x" * 1025}, "reason"),
        ({"requested_by": "a\n2026-01-01 00:00:00,000 ERROR FORGED"}, "requested_by"),
        ({"command_id": "c\x00"}, "command_id"),
        ({"trigger_id": "n\x7f"}, "trigger_id"),
        ({"cancel_fire_key": "v1/acme/nightly\n"}, "cancel_fire_key"),
        ({"cancel_fire_key": ""}, "cancel_fire_key"),
    ],
)
def test_a_command_keeps_the_rules(change: dict[str, Any], field: str) -> None:
    c = command(**change)
    with pytest.raises(ValidationError) as refused:
        check_command(c)
    assert refused.value.field == field
    with pytest.raises(DecodeError) as decoded:
        decode_command(encode(signing.sign(c, "acme-1", b"acme-secret")))
    assert decoded.value.cause == "invalid" and decoded.value.detail.startswith(f"{field}: ")


def test_a_good_command_decodes_and_free_text_reasons_pass() -> None:
    c = signing.sign(command(reason="two\nlines\tok"), "acme-1", b"acme-secret")
    assert decode_command(encode(c)) == c
    wire = encode(signing.sign(command(reason="MARKER"), "acme-1", b"acme-secret"))
    with pytest.raises(DecodeError) as refused:
        decode_command(wire.replace(b"MARKER", b"MARK\xc3("))
    assert refused.value.detail.startswith("reason: not valid UTF-8 (byte 0xc3 at 4)")
