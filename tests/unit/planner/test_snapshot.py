"""Snapshots of the compact due index (:mod:`horae.streams.planner.snapshot`): a partition loaded
from its latest snapshot and the changelog after it holds exactly what a full rebuild from the
whole changelog holds; a snapshot that is not this planner's to load is not used."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from horae.contracts import events as ev
from horae.contracts import signing
from horae.contracts.topics import Topic
from horae.streams.planner import snapshot as snap
from horae.streams.planner.index import INDEX, CompactIndex, DueIndex
from horae.streams.planner.rebuild import rebuild_partition
from horae.streams.planner.snapshot import (
    CHUNK_BYTES,
    Snapshots,
    chunk_records,
    decode_snapshot,
    encode_snapshot,
    read_latest,
    snapshot_topic,
)
from horae.testing import InMemoryLog, InMemoryReader
from tests.paths import REPO_ROOT
from tests.unit.planner.builders import KEY_ID, SECRET, command, definition
from tests.unit.planner.rig import PREFIX, Rig, make_rig

MINUTE = 60.0


@pytest.fixture(autouse=True)
def planner_index() -> Iterator[str]:
    """Snapshots are of the compact index only: this module's tests run on it alone."""
    was = INDEX.kind
    INDEX.kind = "compact"
    try:
        yield "compact"
    finally:
        INDEX.kind = was


def _contents(index: DueIndex) -> dict[str, Any]:
    """Everything ``index`` holds, comparable; its due positions in order last (consumed)."""
    entries = {}
    for key in sorted(index.trigger_keys()):
        e = index.get(key)
        assert e is not None
        d = e.definition
        entries[key] = (
            d, e.next_instant, e.due_ts, e.last_decided, e.paused_since, e.applied, e.fired,
        )  # fmt: skip
    index.settle()
    return {
        "entries": entries,
        "tenants": index.tenants,
        "flights": index.flights,
        "running": index.running,
        "pending": [(p.topic, p.key, p.value) for p in index.pending],
        "due": [key for key, _ in index.pop_due(4e9, 10**6)],
    }


def _busy(rig: Rig) -> None:
    """Triggers of every kind the index holds: plain, paused, with applied commands, with a fire
    in flight (overlap), a payload, labels, a second version, deleted; some fired."""
    d = definition("plain", "* * * * *")
    labelled = replace(d, trigger_id="labelled", labels={"team": "a"}, payload=b'{"x":1}')
    rig.put(signing.sign(replace(labelled, signature=None), KEY_ID, SECRET))
    rig.put(d)
    rig.put(definition("every5", "*/5 * * * *"))
    rig.put(definition("paused", "* * * * *"))
    rig.put(definition("doomed", "* * * * *"))
    rig.put(definition("versioned", "* * * * *"))
    target = ev.Target(kind=ev.TargetKind.WEBHOOK, url="https://hooks.example/other")
    skip = ev.Policies(overlap=ev.Overlap.SKIP)
    rig.put(definition("overlap", "* * * * *", policies=skip, target=target))
    for i in range(20):
        rig.put(definition(f"t{i}", f"{i} * * * *"))
    rig.step()
    rig.step(MINUTE)
    rig.send(command("paused", ev.CommandKind.PAUSE, rig.clock.now()))
    rig.send(command("plain", ev.CommandKind.MANUAL_RUN, rig.clock.now()))
    rig.step()


def _later(rig: Rig) -> None:
    """Changes after the snapshots: a new version, a deletion, fires, a new trigger."""
    rig.put(definition("versioned", "*/2 * * * *", version=2))
    rig.put(definition("doomed", "* * * * *", version=2, state=ev.DefinitionState.DELETED))
    rig.put(definition("newcomer", "*/3 * * * *"))
    rig.step(MINUTE)
    rig.step(MINUTE)


def _rebuilt(rig: Rig, partition: int, from_snapshot: bool) -> DueIndex:
    planner = rig.planner
    base = None
    if from_snapshot:
        assert planner.snapshots is not None
        base = planner.snapshots.load(partition, planner.decider.shared)
        assert base is not None, f"partition {partition} has a usable snapshot"
    index, _ = rebuild_partition(
        planner.reader,
        partition,
        accepted_topic=rig.name(Topic.ACCEPTED),
        state_topic=rig.name(Topic.PLANNER_STATE),
        decider=planner.decider,
        now=rig.clock.now(),
        base=base,
    )
    return index


def _snapshot_all(rig: Rig) -> None:
    """A snapshot of every partition holding triggers, committed."""
    for _ in range(8):
        rig.step()
    if rig.snapshot_changes:
        assert rig.planner.snapshots is not None
        assert rig.planner.snapshots.written >= 4


def test_a_snapshot_and_the_changelog_after_it_hold_what_the_whole_changelog_holds() -> None:
    rig = make_rig(snapshot_changes=1)
    _busy(rig)
    _snapshot_all(rig)
    _later(rig)  # not in any snapshot yet: replayed after them
    held = 0
    for p in range(4):
        full = _contents(_rebuilt(rig, p, from_snapshot=False))
        assert _contents(_rebuilt(rig, p, from_snapshot=True)) == full
        held += len(full["entries"])
    assert held == 28, "every trigger but the deleted one is held"  # deleted: held, not due
    assert any(_contents(_rebuilt(rig, p, False))["flights"] for p in range(4)), "one in flight"


def test_a_restarted_planner_starts_from_its_snapshots_and_decides_the_same() -> None:
    """Two rigs, the same inputs; one restarts from snapshots, the other in full: the fires
    decided after the restart are the same."""
    fired = []
    for changes in (1, 0):
        rig = make_rig(snapshot_changes=changes)
        _busy(rig)
        _snapshot_all(rig)
        _later(rig)
        rig.restart()
        at = rig.clock.now()
        rig.step()
        if changes:
            assert rig.planner.snapshots is not None
            assert rig.planner.snapshots.loaded == 4, "every partition from its snapshot"
        for _ in range(5):
            rig.step(MINUTE)
        fired.append(
            sorted((f.trigger_id, f.fire_key) for f in rig.fires() if f.decided_at.timestamp() > at)
        )
    assert fired[0] == fired[1]
    assert len(fired[0]) >= 20


def test_the_latest_complete_snapshot_is_read() -> None:
    log = InMemoryLog()
    topic = snapshot_topic(PREFIX)
    log.create_topic(topic, 2)
    big = bytes(range(256)) * (CHUNK_BYTES // 128) + b"x"  # 2 chunks and a bit
    first = chunk_records(topic, 1, big, 10, 20)
    assert len(first) == 3
    second = chunk_records(topic, 1, b"small", 30, 40, previous=3)
    assert [r.value is None for r in second] == [False, True, True], "older chunk keys cleared"
    for r in first + second[:1]:
        log.produce(r.topic, r.key, r.value, r.partition)
    assert read_latest(InMemoryReader(log), topic, 1) == (b"small", 30, 40, 1)
    log.produce(topic, b"1/0", first[0].value, 1)  # an older generation's chunk, alone
    log.produce(topic, b"1/0", chunk_records(topic, 1, big, 50, 60)[0].value, 1)  # incomplete
    assert read_latest(InMemoryReader(log), topic, 1) == (b"small", 30, 40, 1)
    assert read_latest(InMemoryReader(log), topic, 0) is None


def _one_snapshot(rig: Rig) -> tuple[CompactIndex, bytes, int]:
    _busy(rig)
    p, index = next((p, i) for p, i in rig.planner.indexes.items() if len(i) > 3)
    assert isinstance(index, CompactIndex)
    return index, encode_snapshot(index, 0, 0), p


def test_a_snapshot_not_this_planners_is_refused_with_its_cause(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rig = make_rig()
    index, blob, p = _one_snapshot(rig)
    shared = rig.planner.decider.shared
    again = decode_snapshot(blob, p, shared)
    assert again.stale is None
    assert _contents(again.index) == _contents(index)
    with pytest.raises(snap.SnapshotUnusable, match="of partition"):
        decode_snapshot(blob, p + 1, shared)
    with pytest.raises(snap.SnapshotUnusable, match="not a snapshot"):
        decode_snapshot(b"junk" + blob, p, shared)
    with pytest.raises(snap.SnapshotUnusable, match="truncated"):
        decode_snapshot(blob[:-1], p, shared)
    monkeypatch.setattr(snap, "FORMAT", 99)
    with pytest.raises(snap.SnapshotUnusable, match="format"):
        decode_snapshot(blob, p, shared)


def test_a_snapshot_of_other_code_is_loaded_and_its_instants_derived_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A planner of other code (an upgrade) trusts a snapshot's state (what a full rebuild
    trusts of the planner-state records) but derives every next instant and due time again."""
    rig = make_rig(snapshot_changes=1)
    _busy(rig)
    _snapshot_all(rig)
    _later(rig)
    planner = rig.planner
    assert planner.snapshots is not None
    monkeypatch.setattr(snap, "CODE", "another")
    for p in range(4):
        index = _rebuilt(rig, p, from_snapshot=False)
        base = planner.snapshots.load(p, planner.decider.shared)
        assert base is not None and base.stale == "written by other planner code"
        for key in base.index.trigger_keys():  # as if the old code had computed them otherwise
            entry = base.index.get(key)
            assert entry is not None
            if entry.due_ts is not None:
                entry.due_ts += 7
                base.index.put(key, entry)
        base.index.settle()
        rebuilt, _ = rebuild_partition(
            planner.reader,
            p,
            accepted_topic=rig.name(Topic.ACCEPTED),
            state_topic=rig.name(Topic.PLANNER_STATE),
            decider=planner.decider,
            now=rig.clock.now(),
            base=base,
        )
        assert _contents(rebuilt) == _contents(index)


def test_a_snapshot_past_the_changelog_is_not_used(caplog: pytest.LogCaptureFixture) -> None:
    rig = make_rig(snapshot_changes=1)
    _busy(rig)
    _snapshot_all(rig)
    planner = rig.planner
    assert planner.snapshots is not None
    p = next(p for p in range(4) if planner.snapshots.load(p, planner.decider.shared))
    # the changelog recreated under the same name: shorter than the snapshot says
    rig.log.partitions[rig.name(Topic.PLANNER_STATE)][p] = []
    fresh = Snapshots(
        planner.reader,
        snapshot_topic(PREFIX),
        rig.name(Topic.PLANNER_STATE),
        rig.name(Topic.ACCEPTED),
    )
    with caplog.at_level(logging.WARNING):
        assert fresh.load(p, planner.decider.shared) is None
    assert f"snapshot of partition {p} not used" in caplog.text


def test_a_snapshot_of_other_tzdata_is_loaded_stale() -> None:
    rig = make_rig()
    _, blob, p = _one_snapshot(rig)
    parts = snap._split(blob)
    header = json.loads(bytes(parts[0]))
    header["tzdata"] = ["1999z"]
    forged = snap._sections([json.dumps(header).encode(), *map(bytes, parts[1:])])
    loaded = decode_snapshot(forged, p, rig.planner.decider.shared)
    assert loaded.tzdata == "1999z"
    assert loaded.stale is not None and "tzdata ['1999z']" in loaded.stale


def test_each_snapshot_handed_out_is_committed_and_holds_the_partition() -> None:
    rig = make_rig(snapshot_changes=1)
    _busy(rig)
    _snapshot_all(rig)
    rig.step()  # commits a snapshot handed out by the last step, if any
    planner = rig.planner
    assert planner.snapshots is not None
    topic = snapshot_topic(PREFIX)
    chunks = rig.log.records(topic)
    assert len(chunks) == planner.snapshots.written, "one chunk per (small) snapshot, committed"
    assert all(r.key() == f"{r.partition()}/0".encode() for r in chunks)
    for p in {r.partition() or 0 for r in chunks}:
        found = read_latest(InMemoryReader(rig.log), topic, p)
        assert found is not None
        loaded = decode_snapshot(found[0], p, planner.decider.shared)
        assert _contents(loaded.index) == _contents(planner.indexes[p])


def test_a_snapshot_serves_another_process(tmp_path: Path) -> None:
    """Nothing in a snapshot depends on the process that wrote it (string hashes differ between
    processes: the slot table probes by CRC-32)."""
    rig = make_rig()
    index, blob, p = _one_snapshot(rig)
    (tmp_path / "snapshot").write_bytes(blob)
    keys = sorted(index.trigger_keys())
    script = (
        "import sys, json\n"
        "from pathlib import Path\n"
        "from horae.streams.planner.sharing import SharedValues\n"
        "from horae.streams.planner.snapshot import decode_snapshot\n"
        "blob = Path(sys.argv[1]).read_bytes()\n"
        "index = decode_snapshot(blob, int(sys.argv[2]), SharedValues()).index\n"
        "print(json.dumps(sorted(k for k in index.trigger_keys() if index.get(k) is not None)))\n"
    )
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(REPO_ROOT)}
        run = subprocess.run(
            [sys.executable, "-c", script, str(tmp_path / "snapshot"), str(p)],
            capture_output=True, text=True, env=env, timeout=60, check=True,
        )  # fmt: skip
        assert json.loads(run.stdout) == keys, f"every key found under PYTHONHASHSEED={seed}"


def test_a_damaged_snapshot_is_not_loaded(caplog: pytest.LogCaptureFixture) -> None:
    rig = make_rig(snapshot_changes=1)
    _busy(rig)
    topic = snapshot_topic(PREFIX)
    _, blob, p = _one_snapshot(make_rig())
    damaged = blob[:100] + bytes(len(blob) - 100)  # the header's JSON and the rest zeroed
    for r in chunk_records(topic, p, damaged, 10**6, 10**6):  # the latest
        rig.log.produce(r.topic, r.key, r.value, r.partition)
    planner = rig.planner
    assert planner.snapshots is not None
    with caplog.at_level(logging.WARNING):
        assert planner.snapshots.load(p, planner.decider.shared) is None
    assert f"snapshot of partition {p} not" in caplog.text


def test_a_partition_kept_through_a_rebalance_is_still_snapshotted() -> None:
    rig = make_rig(snapshot_changes=1)
    _busy(rig)
    _snapshot_all(rig)
    planner = rig.planner
    assert planner.snapshots is not None
    owned = [(rig.name(Topic.DEFINITIONS), p) for p in sorted(planner.indexes)]
    planner._on_revoke(owned)  # an eager rebalance: everything revoked, then given back
    planner._on_assign(owned)
    written = planner.snapshots.written
    rig.step(MINUTE)  # fires: changes on every partition holding a minutely trigger
    for _ in range(8):
        rig.step()
    assert planner.snapshots.written > written, "the kept indexes are snapshotted again"
