"""Label selectors: which of a tenant's triggers a group act (``POST /v1/groups/...``,
``horae triggers pause --selector ...``) or a dead-letter search names.

A selector is ``key=value`` terms joined by commas, every term required (an AND), as a
Kubernetes equality selector: ``env=prod,team=payments`` selects the triggers whose labels hold
both pairs (other labels do not matter). Spaces around a term, its key and its value are not
part of them. :func:`parse_selector` refuses, with a sentence naming the fault
(:class:`SelectorError`): an empty selector (a group act on every trigger is not a selector's
to ask), an empty term, a term without ``=``, an empty key, a key or value that breaks the label
rules of ingress (``labels`` of a definition: a key of 1-128 characters and a value of at most
256, no control character), the same key twice, and more than :data:`MAX_TERMS` terms. A label
key holding ``=`` or ``,`` cannot be selected (the grammar has no escape).

Pure: no I/O, no clock.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping

#: the most terms one selector may have (a definition holds at most 64 labels)
MAX_TERMS = 16
#: the label rules of ingress (:data:`horae.contracts.textrules.LABEL_KEY` / ``LABEL_VALUE``)
KEY_MAX, VALUE_MAX = 128, 256


class SelectorError(ValueError):
    """A selector refused; the message says why."""


def _control(text: str) -> bool:
    return any(unicodedata.category(c) == "Cc" for c in text)


def parse_selector(text: str) -> dict[str, str]:
    """The label pairs ``text`` requires (see the module docstring), or :class:`SelectorError`."""
    if not text.strip():
        raise SelectorError("empty: give key=value terms, e.g. env=prod")
    terms = text.split(",")
    if len(terms) > MAX_TERMS:
        raise SelectorError(f"{len(terms)} terms: at most {MAX_TERMS}")
    out: dict[str, str] = {}
    for n, raw in enumerate(terms, 1):
        term = raw.strip()
        if not term:
            raise SelectorError(f"term {n} is empty")
        key, sep, value = term.partition("=")
        key, value = key.strip(), value.strip()
        if not sep:
            raise SelectorError(f"term {n} ({term!r}) is not key=value")
        if value.startswith("="):
            raise SelectorError(f"term {n} ({term!r}): only equality (key=value) is supported")
        if not key:
            raise SelectorError(f"term {n} ({term!r}) has no key")
        if key.endswith("!"):
            raise SelectorError(f"term {n} ({term!r}): only equality (key=value) is supported")
        if len(key) > KEY_MAX or len(value) > VALUE_MAX:
            raise SelectorError(
                f"term {n}: a label key holds 1-{KEY_MAX} characters, a value at most {VALUE_MAX}"
            )
        if _control(key) or _control(value):
            raise SelectorError(f"term {n} holds a control character")
        if key in out:
            raise SelectorError(f"term {n}: key {key!r} is given twice")
        out[key] = value
    return out


def matches(labels: Mapping[str, str], selector: Mapping[str, str]) -> bool:
    """Whether ``labels`` hold every pair of ``selector``."""
    return all(labels.get(k) == v for k, v in selector.items())


def selector_text(selector: Mapping[str, str]) -> str:
    """The canonical text of a parsed selector (keys sorted): equal selectors, equal text."""
    return ",".join(f"{k}={selector[k]}" for k in sorted(selector))
