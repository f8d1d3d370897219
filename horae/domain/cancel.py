"""A fire's cancel, the tenant's act (a command): its cause, and what a cancel marker stops.

Two acts cancel a fire, and both reach the dispatcher as a *cancel marker* (a dispatch order
whose ``cancel`` holds the cause):

- the planner's overlap ``replace`` (cause ``cancelled: replaced``,
  :data:`horae.domain.overlap.CAUSE_REPLACED`): a first attempt not yet sent is dropped; a fire
  already sent, or retrying, runs to its end;
- a tenant's cancel of one fire (cause ``cancelled: by <actor>``, and ``: <reason>`` when one was
  given): every attempt not yet sent is dropped, whichever it is, and no retry starts after an
  attempt in flight (that attempt finishes and its result is kept).

Pure: text in, text out.
"""

from __future__ import annotations

from horae.domain.overlap import CAUSE_REPLACED

CAUSE_BY = "cancelled: by "
#: the longest cause a cancel records (the actor and the reason are cut to fit)
MAX_CAUSE = 500


def cancel_cause(actor: str, reason: str | None = None) -> str:
    """The cause a tenant's cancel records, naming who asked (and why, when said)."""
    cause = f"{CAUSE_BY}{actor}"
    if reason:
        cause = f"{cause}: {reason}"
    return cause[:MAX_CAUSE]


def stops_retries(cause: str) -> bool:
    """True when a marker with ``cause`` stops every attempt of its fire not yet sent, retries
    included (a tenant's cancel); False for overlap ``replace``, which only drops a first attempt
    not yet sent."""
    return cause != CAUSE_REPLACED
