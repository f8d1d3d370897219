"""The one way a refused input record becomes a :class:`~horae.contracts.events.Quarantined`."""

from __future__ import annotations

from datetime import datetime

from horae.contracts import events as ev
from horae.ports import InputRecord

DETAIL_LIMIT = 2000


def quarantine(
    record: InputRecord,
    cause: str,
    detail: str,
    now: datetime,
    definition: ev.TriggerDefinition | None = None,
) -> ev.Quarantined:
    """The quarantine record of ``record``: where it was read, its original key and value bytes,
    why it was refused (``detail`` cut at 2,000 characters), and the trigger it names when it
    decoded as a ``definition``."""
    return ev.Quarantined(
        source_topic=record.topic() or "",
        source_partition=record.partition() or 0,
        source_offset=record.offset() or 0,
        cause=cause,
        detail=detail[:DETAIL_LIMIT],
        original=record.value() or b"",
        quarantined_at=now,
        original_key=record.key(),
        tenant=definition.tenant if definition else None,
        trigger_id=definition.trigger_id if definition else None,
    )
