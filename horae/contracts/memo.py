"""The ingest path's speed devices (one owner, one switch): a definition's checks that are pure
functions of values many definitions share are computed once per distinct value, its signature
is computed by compiled code, and its accepted copy is not encoded again.

- the canonical-JSON walker of a schema (its named types and field defaults), which signatures
  are computed through (:func:`horae.contracts.jsonform.canonical`);
- the canonical-JSON writers compiled per schema (:mod:`horae.contracts.canonical_json`), which
  :func:`horae.contracts.signing.signing_bytes` uses instead of that walk (the same bytes);
- the domain validation of a (recurrence, policies) pair and the domain spec it compiles
  (:func:`horae.contracts.ingress.domain_checked`,
  :data:`horae.contracts.domain_map.CHECKED_SPECS`, a :class:`PairMemo`), the last
  ``DOMAIN_CHECKS`` pairs (a refusal is not remembered: it raises again); the planner's index
  takes the spec from there (:func:`horae.contracts.domain_map.trigger_spec`) instead of
  compiling it a second time;
- the accepted copy of a definition keeping its record's bytes when they are wire Avro under the
  current writer schema (:func:`horae.contracts.ingress.accepted_value`), not encoded again.

Each gives what computing afresh gives (the accepted copy: an encoding of the same definition);
:data:`INGEST_MEMO` ``.enabled = False`` (setting ``HORAE_INGEST_MEMO=false``, applied by
:func:`set_ingest_memo`) takes the generic paths every time, for bisecting. The planner's unit
tests run with it on and off.
"""

from __future__ import annotations

from typing import Generic, TypeVar

DOMAIN_CHECKS = 16_384
R = TypeVar("R")
P = TypeVar("P")
S = TypeVar("S")


class IngestMemo:
    """Whether the ingest memos are used (see the module docstring)."""

    def __init__(self) -> None:
        self.enabled = True


INGEST_MEMO = IngestMemo()


def set_ingest_memo(enabled: bool) -> None:
    """Switch the ingest memos on or off for this process (the CLI, from the ``ingest_memo``
    setting; the test configuration)."""
    INGEST_MEMO.enabled = enabled


class PairMemo(Generic[R, P, S]):
    """Values computed from a pair of frozen values, the last ``limit`` pairs (then forgotten
    all at once). A pair is looked up by the identity of its two objects first (the decoder
    hands out one object per distinct recurrence or policies: a dict lookup of two ints), by
    value next. Holds the pair's objects, so their ids stay theirs while remembered."""

    def __init__(self, limit: int = DOMAIN_CHECKS) -> None:
        self.limit = limit
        self._by_id: dict[tuple[int, int], tuple[R, P, S]] = {}
        self._by_value: dict[tuple[R, P], S] = {}

    def get(self, r: R, p: P) -> S | None:
        found = self._by_id.get((id(r), id(p)))
        if found is not None and found[0] is r and found[1] is p:
            return found[2]
        value = self._by_value.get((r, p))
        if value is not None:
            self._remember_ids(r, p, value)
        return value

    def put(self, r: R, p: P, value: S) -> None:
        if len(self._by_value) >= self.limit:
            self.clear()
        self._by_value[(r, p)] = value
        self._remember_ids(r, p, value)

    def _remember_ids(self, r: R, p: P, value: S) -> None:
        if len(self._by_id) >= self.limit:
            self._by_id.clear()
        self._by_id[(id(r), id(p))] = (r, p, value)

    def clear(self) -> None:
        self._by_id.clear()
        self._by_value.clear()

    def __len__(self) -> int:
        return len(self._by_value)
