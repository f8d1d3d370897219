"""The breaker: ``threshold`` consecutive failed fires of a trigger pause it.

A fire counts as failed when its dispatch ends ``failed``, ``exhausted`` or ``unknown``; a
succeeded fire resets the count (retries in between do not count either way). Counts are applied
only after the transaction holding the fire's outcome committed. They live in memory: a restart
or a rebalance starts them at zero (a trip may then come later, never wrongly).

On a trip the dispatcher reads the trigger's partition of the ingress topic ``definitions`` (not
``definitions.accepted``) and writes onto it, in its next transaction, a new version of the highest
validly signed version found there, with ``state=paused``, ``role=platform``, the cause in
``labels`` (``horae.paused_by``, ``horae.pause_cause``), signed with the platform key
(``HORAE_PLATFORM_KEY``, which the settings add to every tenant's key map so planners accept it),
plus a ``schedule.failed`` event with the cause. A trigger already paused or deleted is left alone.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime

from horae.contracts import events as ev
from horae.contracts import signing
from horae.contracts.ids import event_id
from horae.contracts.ingress import Source, ingest_definition
from horae.kafka.reader import read_partition
from horae.streams.dispatcher.records import TERMINAL_FAILURES, Verdict

log = logging.getLogger(__name__)
AUTHOR = "horae-dispatcher/breaker"


class Breaker:
    """Consecutive failed fires per trigger key."""

    def __init__(self, threshold: int) -> None:
        self.threshold = threshold
        self._failed: dict[str, int] = {}

    def observe(self, trigger_key: str, verdict: Verdict) -> int | None:
        """Record a fire's final verdict; the failure count when this one trips the breaker."""
        if self.threshold <= 0 or verdict is Verdict.RETRY or verdict is Verdict.CANCELLED:
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


def latest_definition(
    bootstrap: str,
    topic: str,
    partition: int,
    tenant: str,
    trigger_id: str,
    tenant_keys: Mapping[str, Mapping[str, bytes]],
) -> ev.TriggerDefinition | None:
    """The highest validly signed version of a trigger in its partition of ``topic`` (the
    ingress topic), read_committed; None when there is none. It passed ingress, but the planner
    may still have refused it (a platform limit, a stale version)."""
    want = ev.trigger_key(tenant, trigger_id).encode()
    best: ev.TriggerDefinition | None = None
    for msg in read_partition(bootstrap, topic, partition):
        if msg.key() != want:
            continue
        got = ingest_definition(
            msg.value(), msg.key(), Source(topic, partition, msg.offset() or 0), tenant_keys
        )
        if isinstance(got, ev.TriggerDefinition) and (best is None or got.version > best.version):
            best = got
    return best


def paused_version(
    current: ev.TriggerDefinition, cause: str, key_id: str, key: bytes, now: datetime
) -> ev.TriggerDefinition:
    """The next version of ``current``, paused by the platform with ``cause``, signed."""
    labels = {**current.labels, "horae.paused_by": "breaker", "horae.pause_cause": cause[:500]}
    paused = replace(
        current,
        version=current.version + 1,
        state=ev.DefinitionState.PAUSED,
        authored_at=now.astimezone(UTC).replace(microsecond=0),
        author=AUTHOR,
        role=ev.Role.PLATFORM,
        labels=labels,
        signature=None,
    )
    return signing.sign(paused, key_id, key)


def trip_outputs(
    bootstrap: str,
    definitions_topic: str,
    partition: int,
    tenant: str,
    trigger_id: str,
    cause: str,
    *,
    tenant_keys: Mapping[str, Mapping[str, bytes]],
    platform_key_id: str,
    platform_key: bytes | None,
    now: datetime,
) -> list[ev.TriggerDefinition | ev.ScheduleEvent]:
    """What a trip writes (see the module docstring); empty when no live version exists."""
    current = latest_definition(
        bootstrap, definitions_topic, partition, tenant, trigger_id, tenant_keys
    )
    if current is None or current.state is not ev.DefinitionState.LIVE:
        log.info("breaker for %s/%s: no live version to pause", tenant, trigger_id)
        return []
    out: list[ev.TriggerDefinition | ev.ScheduleEvent] = []
    version = current.version
    if platform_key is None:
        log.error("breaker tripped for %s/%s but no platform key is set", tenant, trigger_id)
    else:
        paused = paused_version(current, cause, platform_key_id, platform_key, now)
        version = paused.version
        out.append(paused)
    out.append(breaker_event(tenant, trigger_id, version, cause, now))
    log.warning(
        "breaker tripped: %s/%s paused as version %d (%s)", tenant, trigger_id, version, cause
    )
    return out


def breaker_event(
    tenant: str, trigger_id: str, version: int, cause: str, now: datetime
) -> ev.ScheduleEvent:
    """``schedule.failed`` about the trigger itself: the breaker tripped."""
    return ev.ScheduleEvent(
        event_id=event_id("breaker", tenant, trigger_id, version, cause),
        type=ev.ScheduleEventType.FAILED.value,
        tenant=tenant,
        trigger_id=trigger_id,
        emitted_at=now,
        trigger_version=version,
        cause=cause,
    )
