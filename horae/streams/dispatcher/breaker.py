"""The breaker: ``threshold`` consecutive failed fires of a trigger pause it.

A fire counts as failed when its dispatch ends ``failed``, ``exhausted`` or ``unknown``; a
succeeded fire resets the count (retries in between do not count either way). Counts are applied
only after the transaction holding the fire's outcome committed. They live in memory: a restart
or a rebalance starts them at zero (a trip may then come later, never wrongly).

On a trip the dispatcher writes, in its next transaction, a ``pause`` command onto the trigger's
partition of ``commands`` — role ``platform``, signed with the platform key (``HORAE_PLATFORM_KEY``,
which the settings add to every tenant's key map so planners accept it), the cause as its
``reason``, expiring well within the planners' ``HORAE_COMMAND_MAX_TTL_S`` — plus a
``schedule.failed`` event with the cause. The planner applies the pause as it applies a tenant's
(``schedule.paused`` carries the cause); a trigger already paused stays paused, a deleted one is
left alone (the command is quarantined ``unknown-trigger``).

The dispatcher reads nothing for a trip: it needs WRITE on ``commands`` and no access at all to
the tenants' ingress topic ``definitions`` (docs/security.md). Without a platform key the breaker
only emits ``schedule.failed``.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from horae.contracts import events as ev
from horae.contracts import signing
from horae.contracts.ids import event_id
from horae.streams.dispatcher.records import TERMINAL_FAILURES, Verdict

log = logging.getLogger(__name__)
AUTHOR = "horae-dispatcher/breaker"
#: how much sooner than the planners' longest command lifetime a breaker's pause expires (the
#: dispatcher's clock may run ahead of a planner's)
TTL_MARGIN_S = 60


class Breaker:
    """Consecutive failed fires per trigger key."""

    def __init__(self, threshold: int) -> None:
        self.threshold = threshold
        self._failed: dict[str, int] = {}

    def observe(self, trigger_key: str, verdict: Verdict) -> int | None:
        """Record a fire's final verdict; the failure count when this one trips the breaker."""
        if self.threshold <= 0 or verdict in (Verdict.RETRY, Verdict.CANCELLED, Verdict.EXPIRED):
            return None
        if verdict not in TERMINAL_FAILURES:
            self._failed.pop(trigger_key, None)
            return None
        count = self._failed.get(trigger_key, 0) + 1
        if count >= self.threshold:
            self._failed.pop(trigger_key, None)
            return count
        self._failed[trigger_key] = count
        return None

    def forget(self, keys: set[str] | None = None) -> None:
        """Drop counts (all, or of ``keys``): after a rebalance they are not ours to keep."""
        if keys is None:
            self._failed.clear()
        for k in keys or ():
            self._failed.pop(k, None)


def pause_command(
    fire: ev.FireRecord,
    cause: str,
    key_id: str,
    key: bytes,
    now: datetime,
    ttl_s: int,
) -> ev.Command:
    """The platform-signed ``pause`` of ``fire``'s trigger with ``cause``, expiring
    ``ttl_s - TTL_MARGIN_S`` after ``now`` (at least a minute). Its id names the fire that
    tripped the breaker: a trip redone after a lost commit writes the same command, which the
    planner then refuses as ``replayed``."""
    command = ev.Command(
        command_id=event_id("breaker", fire.tenant, fire.trigger_id, fire.fire_key),
        tenant=fire.tenant,
        trigger_id=fire.trigger_id,
        kind=ev.CommandKind.PAUSE,
        requested_by=AUTHOR,
        role=ev.Role.PLATFORM,
        requested_at=now.replace(microsecond=0),
        reason=cause[:500],
        expires_at=now + timedelta(seconds=max(60, ttl_s - TTL_MARGIN_S)),
    )
    return signing.sign(command, key_id, key)


def trip_outputs(
    fire: ev.FireRecord,
    cause: str,
    *,
    platform_key_id: str,
    platform_key: bytes | None,
    command_ttl_s: int,
    now: datetime,
) -> list[ev.Command | ev.ScheduleEvent]:
    """What a trip writes (see the module docstring)."""
    out: list[ev.Command | ev.ScheduleEvent] = []
    if platform_key is None:
        log.error(
            "breaker tripped for %s/%s but no platform key is set", fire.tenant, fire.trigger_id
        )
    else:
        out.append(pause_command(fire, cause, platform_key_id, platform_key, now, command_ttl_s))
    out.append(
        breaker_event(
            fire.tenant, fire.trigger_id, fire.trigger_version, cause, now, fire.tzdata_version
        )
    )
    log.warning("breaker tripped: %s/%s paused (%s)", fire.tenant, fire.trigger_id, cause)
    return out


def breaker_event(
    tenant: str,
    trigger_id: str,
    version: int,
    cause: str,
    now: datetime,
    tzdata: str | None = None,
) -> ev.ScheduleEvent:
    """``schedule.failed`` about the trigger itself: the breaker tripped; ``tzdata``: the
    release of the fire that tripped it (its fire record's)."""
    return ev.ScheduleEvent(
        event_id=event_id("breaker", tenant, trigger_id, version, cause),
        type=ev.ScheduleEventType.FAILED.value,
        tenant=tenant,
        trigger_id=trigger_id,
        emitted_at=now,
        trigger_version=version,
        cause=cause,
        tzdata_version=tzdata,
    )
