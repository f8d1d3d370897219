"""Label selectors (:mod:`horae.domain.selector`): what parses, and each refusal's sentence."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from horae.domain.selector import (
    MAX_TERMS,
    SelectorError,
    matches,
    parse_selector,
    selector_text,
)


def test_terms_are_pairs_all_required() -> None:
    assert parse_selector("env=prod") == {"env": "prod"}
    assert parse_selector(" env = prod , team=payments ") == {"env": "prod", "team": "payments"}
    assert parse_selector("tier=") == {"tier": ""}
    assert parse_selector("url=a=b") == {"url": "a=b"}  # the first = splits


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("env=prod,", "term 2 is empty"),
        (",env=prod", "term 1 is empty"),
        ("env", "is not key=value"),
        ("=prod", "has no key"),
        ("env!=prod", "only equality"),
        ("env==prod", "only equality"),
        ("env=prod,env=dev", "given twice"),
        ("env=pro\x00d", "control character"),
        ("e\nv=prod", "control character"),
        ("k" * 129 + "=v", "1-128 characters"),
        ("k=" + "v" * 257, "at most 256"),
        (",".join(f"k{i}=v" for i in range(MAX_TERMS + 1)), "at most 16"),
    ],
)
def test_refusals_say_why(text: str, says: str) -> None:
    with pytest.raises(SelectorError, match=says):
        parse_selector(text)


def test_matching_needs_every_pair() -> None:
    labels = {"env": "prod", "team": "payments", "tier": "1"}
    assert matches(labels, {"env": "prod"})
    assert matches(labels, {"env": "prod", "team": "payments"})
    assert not matches(labels, {"env": "prod", "team": "search"})
    assert not matches(labels, {"region": ""})  # absent is not empty
    assert matches({"region": ""}, {"region": ""})


names = st.text(
    st.characters(blacklist_categories=("Cc", "Zs", "Zl", "Zp"), blacklist_characters="=,!"),
    min_size=1,
    max_size=20,
)
values = st.text(
    st.characters(blacklist_categories=("Cc", "Zs", "Zl", "Zp"), blacklist_characters=","),
    max_size=20,
).filter(lambda v: not v.startswith("="))


@given(st.dictionaries(names, values, min_size=1, max_size=MAX_TERMS))
def test_canonical_text_parses_back(selector: dict[str, str]) -> None:
    assert parse_selector(selector_text(selector)) == selector
