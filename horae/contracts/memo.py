"""The ingest path's memos (one owner, one switch): a definition's checks that are pure functions
of values many definitions share are computed once per distinct value.

- the canonical-JSON walker of a schema (its named types and field defaults), which signatures
  are computed through (:func:`horae.contracts.jsonform.canonical`);
- the domain validation of a (recurrence, policies) pair
  (:func:`horae.contracts.ingress.domain_checked`), the last ``DOMAIN_CHECKS`` pairs (a refusal
  is not remembered: it raises again).

Both return what computing afresh returns; :data:`INGEST_MEMO` ``.enabled = False`` (setting
``HORAE_INGEST_MEMO=false``, applied by :func:`set_ingest_memo`) computes afresh every time, for
bisecting. The planner's unit tests run with it on and off.
"""

from __future__ import annotations

DOMAIN_CHECKS = 16_384


class IngestMemo:
    """Whether the ingest memos are used (see the module docstring)."""

    def __init__(self) -> None:
        self.enabled = True


INGEST_MEMO = IngestMemo()


def set_ingest_memo(enabled: bool) -> None:
    """Switch the ingest memos on or off for this process (the CLI, from the ``ingest_memo``
    setting; the test configuration)."""
    INGEST_MEMO.enabled = enabled
