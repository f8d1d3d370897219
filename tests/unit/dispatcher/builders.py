"""Records for the dispatcher's unit tests."""

from __future__ import annotations

from datetime import UTC, datetime

from horae.contracts import events as ev
from horae.domain.keys import FireKey


def fire_record(key: FireKey, lane: ev.Lane) -> ev.FireRecord:
    """The ledger record of a fire decided and due at its instant, handed to ``lane``."""
    at = datetime.fromtimestamp(key.scheduled, UTC)
    return ev.FireRecord(
        fire_key=key.canonical(),
        key_hash=key.short_hash(),
        tenant=key.tenant,
        trigger_id=key.trigger,
        origin=key.origin,
        scheduled_at=at,
        sequence=key.sequence,
        jitter_ms=0,
        due_at=at,
        decided_at=at,
        state=ev.FireState.FIRED,
        trigger_version=1,
        tzdata_version="x",
        target_kind=ev.TargetKind.WEBHOOK,
        lane=lane,
    )
