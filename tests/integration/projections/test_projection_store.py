"""The batch transaction on the real database, without Kafka: replays are no-ops, a second
decision under a fire key is kept aside and counted, arrival order does not matter, and a batch
that fails half-way leaves nothing."""

from __future__ import annotations

import dataclasses
import random
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from horae.contracts import events as ev
from horae.contracts.codec import default_codec
from horae.contracts.routing import Router
from horae.contracts.topics import Topic, topic_name
from horae.ports import Emit
from horae.projections import store as store_mod
from horae.projections.rows import PROJECTED, Batch, RecordMapper, Stage
from horae.projections.store import ProjectionStore
from horae.projections.synthetic import START, history
from horae.projections.synthetic import fire as make_fire

PREFIX = "p."
ROUTER = Router(PREFIX)
TOPICS = {topic_name(t, PREFIX): t for t in PROJECTED}
# as the projector's: schedule events come from every tenant's own topic, so their rows are not
# dropped by one topic's offsets — a replayed event merges by its id (a no-op)
STAGE_TOPICS = {
    stage: topic_name(t, PREFIX)
    for t, (_, stage) in PROJECTED.items()
    if t is not Topic.SCHEDULE_EVENTS
}
TABLES = ("fires", "attempts", "work_outcomes", "triggers", "trigger_versions",
          "schedule_events", "audit_entries", "fire_duplicates", "projection_errors")  # fmt: skip


class Log:
    """An in-memory stand-in for the topics: assigns offsets per (topic, partition 0)."""

    def __init__(self) -> None:
        self.records: list[tuple[str, int, int, Emit]] = []
        self.next: dict[str, int] = {}

    def append(self, out: Emit) -> tuple[str, int, int, Emit]:
        name = out.topic
        off = self.next.get(name, 0)
        self.next[name] = off + 1
        rec = (name, 0, off, out)
        self.records.append(rec)
        return rec


def batch_of(recs: list[tuple[str, int, int, Emit]]) -> Batch:
    mapper = RecordMapper(default_codec(), TOPICS)
    batch = Batch()
    for topic, part, off, out in recs:
        mapper.add(batch, topic, part, off, out.key, out.value, 0)
    return batch


def snapshot(db: psycopg.Connection[Any], schema: str) -> dict[str, list[tuple[Any, ...]]]:
    return {t: db.execute(f'SELECT * FROM "{schema}".{t} ORDER BY 1, 2').fetchall() for t in TABLES}


@pytest.fixture
def store(database_url: str, schema: str) -> Any:
    s = ProjectionStore(database_url, schema)
    s.connect()
    yield s
    s.close()


def test_replaying_a_batch_changes_nothing(store: ProjectionStore, db: Any, schema: str) -> None:
    log = Log()
    recs = [log.append(o) for o in history(300, 2, 2, prefix=PREFIX, partitions=1)]
    store.apply(batch_of(recs), STAGE_TOPICS)
    before = snapshot(db, schema)
    # the same records again (a crash after COMMIT but before the consumer knew): dropped
    result = store.apply(batch_of(recs), STAGE_TOPICS)
    events = [r for r in recs if r[0].startswith(f"{PREFIX}events.")]
    assert events and result.dropped == len(recs) - len(events)
    assert result.total_rows == len(events)  # staged again, merged by event id: nothing new
    assert snapshot(db, schema) == before
    # even with the offsets forgotten, the merge rules make the replay a no-op
    db.execute(f'DELETE FROM "{schema}".projection_offsets')
    result = store.apply(batch_of(recs), STAGE_TOPICS)
    assert result.dropped == 0 and result.duplicates_different == 0
    assert snapshot(db, schema) == before


def test_second_decision_is_kept_aside_and_counted(
    store: ProjectionStore, db: Any, schema: str
) -> None:
    log = Log()
    first = make_fire("acme", "nightly", START)
    other = dataclasses.replace(first, state=ev.FireState.SKIPPED, cause="skipped: overlap")
    resent = first
    recs = [log.append(ROUTER.emit(f, 0)) for f in (first, other)]
    result = store.apply(batch_of(recs), STAGE_TOPICS)
    assert (result.duplicates_different, result.duplicates_identical) == (1, 0)
    again = [log.append(ROUTER.emit(resent, 0))]
    result = store.apply(batch_of(again), STAGE_TOPICS)
    assert (result.duplicates_different, result.duplicates_identical) == (0, 1)
    fires = db.execute(f'SELECT state, src_offset FROM "{schema}".fires').fetchall()
    assert fires == [("fired", 0)]
    dups = db.execute(
        f'SELECT src_offset, identical, state FROM "{schema}".fire_duplicates ORDER BY 1'
    ).fetchall()
    assert dups == [(1, False, "skipped"), (2, True, "fired")]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_arrival_order_does_not_matter(database_url: str, schema: str, db: Any, seed: int) -> None:
    """Live consumption and a rebuild interleave topics differently: same rows either way."""
    log = Log()
    recs = [
        log.append(o) for o in history(200, 2, 2, dispatch_share=0.6, prefix=PREFIX, partitions=1)
    ]
    in_order = ProjectionStore(database_url, schema)
    in_order.connect()
    in_order.apply(batch_of(recs), STAGE_TOPICS)
    in_order.close()
    shuffled_schema = f"{schema}_shadow"
    other = ProjectionStore(database_url, shuffled_schema)
    other.connect()
    # per-topic order is kept (Kafka guarantees it per partition); topics interleave at random
    by_topic: dict[str, list[tuple[str, int, int, Emit]]] = {}
    for rec in recs:
        by_topic.setdefault(rec[0], []).append(rec)
    rng = random.Random(seed)
    queues = [list(reversed(q)) for q in by_topic.values()]
    while any(queues):
        chunk = []
        for _ in range(rng.randint(1, 40)):
            live = [q for q in queues if q]
            if not live:
                break
            chunk.append(rng.choice(live).pop())
        other.apply(batch_of(chunk), STAGE_TOPICS)
    other.close()
    assert snapshot(db, shuffled_schema) == snapshot(db, schema)


def test_a_batch_failing_half_way_leaves_nothing(
    store: ProjectionStore, db: Any, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = Log()
    recs = [
        log.append(o) for o in history(100, 1, 2, dispatch_share=0.5, prefix=PREFIX, partitions=1)
    ]
    before = snapshot(db, schema)
    monkeypatch.setitem(store_mod.MERGES, Stage.OUTCOMES, ("merge/outcomes", "merge/no_such"))
    with pytest.raises(FileNotFoundError):
        store.apply(batch_of(recs), STAGE_TOPICS)
    assert snapshot(db, schema) == before
    assert db.execute(f'SELECT count(*) FROM "{schema}".projection_offsets').fetchone() == (0,)
    monkeypatch.undo()
    store.apply(batch_of(recs), STAGE_TOPICS)
    assert db.execute(f'SELECT count(*) FROM "{schema}".fires').fetchone() == (100,)


def test_attempts_before_their_fire_make_a_placeholder(
    store: ProjectionStore, db: Any, schema: str
) -> None:
    from horae.projections.synthetic import attempt, outcome

    log = Log()
    f = make_fire("acme", "t", START)
    a = attempt(f, 1, timedelta(milliseconds=250))
    early = [
        log.append(ROUTER.emit(a, 0)),
        log.append(ROUTER.emit(outcome(f, [a]), 0)),
    ]
    store.apply(batch_of(early), STAGE_TOPICS)
    row = db.execute(f'SELECT status, decided_at FROM "{schema}".fires').fetchone()
    assert row == ("succeeded", None)
    store.apply(batch_of([log.append(ROUTER.emit(f, 0))]), STAGE_TOPICS)
    row = db.execute(
        f'SELECT status, state, lateness_ms, terminal_at = outcome_at FROM "{schema}".fires'
    ).fetchone()
    assert row == ("succeeded", "fired", 250.0, True)
    assert db.execute(f'SELECT count(*) FROM "{schema}".fire_duplicates').fetchone() == (0,)


@pytest.mark.parametrize("split", [False, True])
def test_overlap_rows_project_skipped_replaced_and_cancelled(
    store: ProjectionStore, db: Any, schema: str, split: bool
) -> None:
    """An overlap skip is a decision like any; a ``replaced`` record moves the fired row's state
    (no duplicate), in the same batch or a later one; a ``cancelled`` outcome shows as status."""
    log = Log()
    first = make_fire("acme", "job", START)
    skipped = make_fire(
        "acme", "job", START + timedelta(minutes=1), ev.FireState.SKIPPED, cause="skipped: overlap"
    )
    replaced = dataclasses.replace(
        first,
        state=ev.FireState.REPLACED,
        lane=None,
        cause="cancelled: replaced",
        cause_detail="replaced by the next",
        decided_at=first.decided_at + timedelta(minutes=2),
    )
    cancelled = ev.WorkOutcome(
        fire_key=first.fire_key,
        key_hash=first.key_hash,
        tenant="acme",
        trigger_id="job",
        state=ev.OutcomeState.CANCELLED,
        attempts=0,
        decided_at=replaced.decided_at,
        error="cancelled: replaced",
    )
    recs = [log.append(ROUTER.emit(e, 0)) for e in (first, skipped, replaced)]
    batches = [recs[:2], recs[2:]] if split else [recs]
    for b in batches:
        result = store.apply(batch_of(b), STAGE_TOPICS)
        assert (result.duplicates_different, result.duplicates_identical) == (0, 0)
    store.apply(batch_of(recs), STAGE_TOPICS)  # a replay changes nothing
    rows = db.execute(
        f'SELECT scheduled_at, state, status, cause, decided_at FROM "{schema}".fires ORDER BY 1'
    ).fetchall()
    assert [r[1:4] for r in rows] == [
        ("replaced", "replaced", "cancelled: replaced"),
        ("skipped", "skipped", "skipped: overlap"),
    ]
    assert rows[0][4] == first.decided_at, "the decision's time stays"
    store.apply(batch_of([log.append(ROUTER.emit(cancelled, 0))]), STAGE_TOPICS)
    status = db.execute(
        f'SELECT status, outcome FROM "{schema}".fires WHERE fire_key = %s', (first.fire_key,)
    ).fetchone()
    assert status == ("cancelled", "cancelled")
    assert db.execute(f'SELECT count(*) FROM "{schema}".fire_duplicates').fetchone() == (0,)


def test_the_planners_overlap_records_project(store: ProjectionStore, db: Any, schema: str) -> None:
    """What the planner (in memory, virtual clock) writes for ``skip`` and ``replace``, and the
    dispatcher's ``cancelled`` conclusion, through the store: the rows the history reads."""
    from horae.contracts.codec import decode
    from horae.streams.dispatcher.conclude import cancelled
    from horae.streams.dispatcher.records import OrderHeaders
    from tests.unit.planner.builders import definition
    from tests.unit.planner.rig import make_rig

    rig = make_rig()
    for trigger_id, overlap in (("skipper", ev.Overlap.SKIP), ("replacer", ev.Overlap.REPLACE)):
        policies = ev.Policies(overlap=overlap)
        rig.put(definition(trigger_id, "* * * * *", policies=policies))
    rig.step()
    rig.step(60)
    rig.step(60)  # the second instant of each: skipped, and replacing the first
    log = Log()
    recs = []
    for topic in (Topic.FIRES, Topic.SCHEDULE_EVENTS):
        for r in rig.log.records(rig.name(topic)):
            recs.append(log.append(ROUTER.emit(decode(r.value() or b""), 0)))
    [replaced] = [o for o in rig.read(Topic.LANE_ON_TIME, ev.DispatchOrder) if o.cancel]
    [first] = [
        o
        for o in rig.read(Topic.LANE_ON_TIME, ev.DispatchOrder)
        if o.fire.fire_key == replaced.fire.fire_key and not o.cancel
    ]
    concluded = cancelled(first, OrderHeaders(), replaced.cancel or "", ROUTER, 0, 0)
    recs += [log.append(e) for e in concluded.emits]
    result = store.apply(batch_of(recs), STAGE_TOPICS)
    assert (result.duplicates_different, result.duplicates_identical) == (0, 0)
    rows = db.execute(
        f'SELECT trigger_id, state, status, cause FROM "{schema}".fires ORDER BY 1, scheduled_at'
    ).fetchall()
    assert rows == [
        ("replacer", "replaced", "cancelled", "cancelled: replaced"),
        ("replacer", "fired", "fired", None),
        ("skipper", "fired", "fired", None),
        ("skipper", "skipped", "skipped", "skipped: overlap"),
    ]
    events = db.execute(
        f'SELECT type, fire_key IS NOT NULL FROM "{schema}".schedule_events ORDER BY 1'
    ).fetchall()
    assert events == [("schedule.replaced", True), ("schedule.skipped", True)]
