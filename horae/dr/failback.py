"""Fail-back: the former writer made a fresh standby, so that a promotion the other way can follow.

After a promotion to b, region a still holds what it decided after its last replicated record
(the recovery point's decisions) and its own consumer offsets: mirroring b into it as it is would
mix two ledgers. :func:`reset_standby` wipes it instead: every topic of its Kafka (Horae's and
MirrorMaker 2's internal ones; a DR region's Kafka holds nothing else) and every consumer group,
then provisions it again (the catalogue, users and ACLs, which also gives back the grants a fence
deleted) and records it in the DR state as ``fresh``. ``horae dr up`` then starts MM2 from the
writer into it, and ``horae dr promote --to <it>`` is the fail-back (it fences the writer first).
"""

from __future__ import annotations

import time
from pathlib import Path

from confluent_kafka.admin import AdminClient

from horae.dr import DrError
from horae.dr.promote import provision_standby, tenants_of
from horae.dr.regions import DrState, Region, read_state, write_state

WIPE_TIMEOUT_S = 60.0


def reset_standby(standby: Region, writer: Region, home: Path) -> dict[str, int]:
    """Wipe region ``standby`` and provision it again as a fresh standby of ``writer`` (see the
    module docstring); what was deleted: ``{"topics": n, "groups": n}``."""
    state = read_state(home)
    if standby.name == state.active:
        raise DrError(f"region {standby.name} writes; only the standby can be reset")
    if not standby.reachable():
        raise DrError(f"region {standby.name} does not answer; start it (`horae dr up`) first")
    if not writer.reachable():
        raise DrError(f"region {writer.name} (the writer) does not answer")
    admin = AdminClient(standby.client({"log_level": 3}))
    groups = [g.group_id for g in admin.list_consumer_groups(request_timeout=30).result().valid]
    if groups:
        for group, future in admin.delete_consumer_groups(groups, request_timeout=30).items():
            try:
                future.result()
            except Exception as exc:
                raise DrError(
                    f"region {standby.name}: consumer group {group} could not be deleted (a "
                    f"process of the region still runs? stop them all first): {exc}"
                ) from exc
    topics = [t for t in admin.list_topics(timeout=10).topics if not t.startswith("__")]
    if topics:
        for future in admin.delete_topics(topics, operation_timeout=30).values():
            future.result()
    deadline = time.monotonic() + WIPE_TIMEOUT_S  # for the deletion and the leaders after
    while set(topics) & set(admin.list_topics(timeout=10).topics):
        if time.monotonic() >= deadline:
            raise DrError(f"region {standby.name}: its topics were not deleted in time")
        time.sleep(0.5)
    provision_standby(standby, tuple(tenants_of(writer)))

    def led() -> bool:  # every partition of the recreated topics has its leader again
        meta = admin.list_topics(timeout=10).topics
        return all(
            p.leader >= 0 and p.error is None
            for t in meta.values() if not (t.topic or "").startswith("__")
            for p in t.partitions.values()
        )  # fmt: skip

    while not led():
        if time.monotonic() >= deadline:
            raise DrError(f"region {standby.name}: its topics have no leader yet")
        time.sleep(0.5)
    write_state(home, DrState(state.active, state.promotions, fresh=standby.name))
    return {"topics": len(topics), "groups": len(groups)}
