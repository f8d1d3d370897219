"""The projector's loop on the twins: it reads through the consumer port
(:class:`~horae.testing.InMemoryConsumer`) into :class:`~horae.testing.InMemoryStore`, in
milliseconds. A replay ends at the end offsets (a trailing aborted transaction included: its end
is reached though no record lies there); a member resumes after the offsets its store holds."""

from __future__ import annotations

import threading

from horae.contracts.codec import encode
from horae.contracts.topics import Topic, topic_name
from horae.projections import synthetic
from horae.projections.projector import Projector, ProjectorConfig
from horae.projections.rows import PROJECTED, ApplyResult, Batch, Stage
from horae.testing import InMemoryConsumer, InMemoryLog, InMemoryStore

PREFIX = "t."
AUDIT = topic_name(Topic.AUDIT, PREFIX)


def _store() -> InMemoryStore:
    return InMemoryStore(
        {
            stage: topic_name(t, PREFIX)
            for t, (_, stage) in PROJECTED.items()
            if t is not Topic.SCHEDULE_EVENTS
        }
    )


def _log() -> InMemoryLog:
    log = InMemoryLog()
    for t in PROJECTED:
        if t is not Topic.SCHEDULE_EVENTS:
            log.create_topic(topic_name(t, PREFIX), 2)
    return log


def _audit(log: InMemoryLog, n: int, partition: int) -> None:
    entry = synthetic.audit("acme", 1000 * partition + n)  # an id of its own per partition
    log.produce(AUDIT, b"acme", encode(entry), partition)


def _config(stop_at: dict[tuple[str, int], int] | None = None) -> ProjectorConfig:
    return ProjectorConfig("unused:9092", "unused", topic_prefix=PREFIX, stop_at=stop_at)


def test_a_replay_projects_to_the_end_offsets_and_stops() -> None:
    log, store = _log(), _store()
    for i in range(3):
        _audit(log, i, 0)
    _audit(log, 0, 1)
    log.produce_aborted(AUDIT, b"acme", b"aborted", 0)  # the end lies past the last record
    ends = {(AUDIT, 0): 5, (AUDIT, 1): 1}
    projector = Projector(_config(ends), consumer=InMemoryConsumer(log), store=store)
    projector.run()
    assert len(store.rows[Stage.AUDIT]) == 4
    assert store.stored_offsets() == {(AUDIT, 0): 3, (AUDIT, 1): 1}
    assert projector.stats.records == 4


def test_a_member_resumes_after_the_offsets_its_store_holds() -> None:
    log, store = _log(), _store()
    for i in range(2):
        _audit(log, i, 0)

    def project_until(records: int) -> Projector[InMemoryStore]:
        stop = threading.Event()

        def on_batch(_: Batch, __: ApplyResult) -> None:
            if sum(store.stored_offsets().values()) >= records:
                stop.set()

        projector = Projector(
            _config(), consumer=InMemoryConsumer(log), store=store, on_batch=on_batch
        )
        bound = threading.Timer(10.0, stop.set)  # never for ever, whatever happens
        bound.start()
        try:
            projector.run(stop)
        finally:
            bound.cancel()
        assert sum(store.stored_offsets().values()) >= records
        return projector

    project_until(2)
    _audit(log, 2, 0)
    again = project_until(3)
    assert again.stats.records == 1, "only what came after the stored offsets"
    assert len(store.rows[Stage.AUDIT]) == 3
