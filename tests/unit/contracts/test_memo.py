"""The ingest memos (horae.contracts.memo) change no result: signatures, validation and the specs
the index takes, on and off, agree — refusals included, also when a refused pair is met again."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from horae.contracts import events as ev
from horae.contracts import signing
from horae.contracts.domain_map import CHECKED_SPECS, spec_of, trigger_spec
from horae.contracts.ingress import validate_definition
from horae.contracts.memo import INGEST_MEMO, PairMemo
from horae.domain.errors import ValidationError
from tests.unit.planner.builders import definition


@pytest.fixture
def memo_was() -> Iterator[None]:
    was = INGEST_MEMO.enabled
    yield
    INGEST_MEMO.enabled = was


def _outcomes(d: ev.TriggerDefinition) -> tuple[bytes, str | None, str | None]:
    signed = signing.sign(d, "k", b"secret")
    try:
        validate_definition(d)
        refused = None
    except ValidationError as exc:
        refused = str(exc)
    return signing.signing_bytes(signed), signing.check(signed, {"k": b"secret"}), refused


CASES = [
    definition("a"),
    definition("b", "0 9 * * 1-5", policies=ev.Policies(jitter_s=30, max_catchup=3)),
    definition("c", "not a cron"),
    replace(
        definition("d"),
        recurrence=ev.Recurrence(
            kind=ev.RecurrenceKind.CRON, expr="* * * * *", zone="Mars/Olympus"
        ),
    ),
    replace(
        definition("e"),
        recurrence=ev.Recurrence(kind=ev.RecurrenceKind.CRON, expr="* * * * *", count=0),
    ),
    definition("f", policies=ev.Policies(horizon_s=-1)),
]


@pytest.mark.parametrize("d", CASES, ids=[d.trigger_id for d in CASES])
def test_memo_on_and_off_give_the_same_signature_and_verdict(
    d: ev.TriggerDefinition, memo_was: None
) -> None:
    INGEST_MEMO.enabled = False
    off = _outcomes(d)
    INGEST_MEMO.enabled = True
    first, again = _outcomes(d), _outcomes(d)  # the second one from the memos
    assert first == again == off
    assert off[1] is None  # signed by the key it is checked against
    assert (off[2] is None) == (d.trigger_id in ("a", "b"))  # the others are refused


def test_a_refused_pair_is_refused_again_with_the_memo_on(memo_was: None) -> None:
    INGEST_MEMO.enabled = True
    bad = definition("g", "61 * * * *")
    for _ in range(2):
        with pytest.raises(ValidationError):
            validate_definition(bad)


def test_the_index_takes_the_spec_validation_compiled(memo_was: None) -> None:
    INGEST_MEMO.enabled = True
    d = definition("h", "0 9 * * 1-5", policies=ev.Policies(jitter_s=7))
    validate_definition(d)
    checked = CHECKED_SPECS.get(d.recurrence, d.policies)
    assert checked is not None and checked == spec_of(d.recurrence, d.policies)
    assert trigger_spec(d) is checked  # not compiled again
    twin = replace(d, recurrence=replace(d.recurrence), policies=replace(d.policies))
    assert twin.recurrence is not d.recurrence and trigger_spec(twin) is checked  # by value
    INGEST_MEMO.enabled = False
    assert trigger_spec(d) == checked and trigger_spec(d) is not checked


def test_a_refused_pair_leaves_no_spec(memo_was: None) -> None:
    INGEST_MEMO.enabled = True
    bad = replace(
        definition("i"),
        recurrence=ev.Recurrence(kind=ev.RecurrenceKind.CRON, expr="* * * * *", count=0),
    )
    with pytest.raises(ValidationError):
        validate_definition(bad)
    assert CHECKED_SPECS.get(bad.recurrence, bad.policies) is None
    assert trigger_spec(bad) == spec_of(bad.recurrence, bad.policies)  # the index's own


def test_pair_memo_forgets_all_at_its_limit() -> None:
    memo: PairMemo[str, str, int] = PairMemo(limit=2)
    memo.put("a", "b", 1)
    memo.put("c", "d", 2)
    assert memo.get("a", "b") == 1 and len(memo) == 2
    memo.put("e", "f", 3)
    assert memo.get("a", "b") is None and memo.get("e", "f") == 3 and len(memo) == 1
