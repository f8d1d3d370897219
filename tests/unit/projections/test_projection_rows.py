"""Mapping consumed records to staging rows (pure): every projected event type, errors kept with
their coordinates, tombstones skipped, offsets and timestamps tracked; the Python column lists
agree with sql/stage.sql."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from horae.contracts import events as ev
from horae.contracts.codec import default_codec, encode
from horae.contracts.topics import Topic, topic_name
from horae.projections.rows import (
    PROJECTED,
    STAGE_COLUMNS,
    STAGE_TYPES,
    Batch,
    RecordMapper,
    Stage,
    to_json,
)
from horae.projections.sqlfiles import sql
from horae.projections.synthetic import START, attempt, audit, definition, fire, outcome
from horae.projections.synthetic import schedule_event as make_schedule_event

PREFIX = "u."
PG_NAMES = {
    "integer": "int4",
    "bigint": "int8",
    "double precision": "float8",
    "boolean": "bool",
    "timestamptz": "timestamptz",
    "text": "text",
    "bytea": "bytea",
}


def mapper() -> RecordMapper:
    return RecordMapper(default_codec(), {topic_name(t, PREFIX): t for t in PROJECTED})


def add(batch: Batch, topic: Topic, value: bytes | None, offset: int = 0, ts: int = 1000) -> None:
    mapper().add(batch, topic_name(topic, PREFIX), 2, offset, b"k", value, ts)


def test_stage_columns_and_types_match_stage_sql() -> None:
    text = sql("stage")
    for stage in Stage:
        body = re.search(rf"{stage.value} \((.*?)\) ON COMMIT", text, re.S)
        assert body is not None, stage
        cols = [c.strip() for c in body.group(1).split(",")]
        parsed = []
        for c in cols:
            name, _, typ = c.partition(" ")
            parsed.append((name.strip('"'), PG_NAMES[typ.strip()]))
        assert tuple(n for n, _ in parsed) == STAGE_COLUMNS[stage]
        assert tuple(t for _, t in parsed) == STAGE_TYPES[stage]


def test_every_projected_type_maps_to_a_full_row() -> None:
    f = fire("acme", "t", START)
    a = attempt(f, 1, timedelta(milliseconds=5))
    events: dict[Topic, ev.Event] = {
        Topic.ACCEPTED: definition("acme", "t"),
        Topic.FIRES: f,
        Topic.ATTEMPTS: a,
        Topic.OUTCOMES: outcome(f, [a]),
        Topic.SCHEDULE_EVENTS: make_schedule_event(f, 1),
        Topic.AUDIT: audit("acme", 1),
        Topic.DLQ: ev.DispatchOrder(
            fire=f,
            target=ev.Target(kind=ev.TargetKind.WEBHOOK, url="https://hooks.acme.example/x"),
            lane=ev.Lane.ON_TIME,
            attempt=5,
            not_before=START,
        ),
    }
    batch = Batch()
    for i, (topic, event) in enumerate(events.items()):
        add(batch, topic, encode(event), offset=i)
    for topic, (_, stage) in PROJECTED.items():
        (row,) = batch.rows[stage]
        assert len(row) == len(STAGE_COLUMNS[stage])
        assert row[-1] == list(events).index(topic) and row[-2] == 2
    assert batch.errors == 0 and batch.records == 7
    definition_row = batch.rows[Stage.DEFINITIONS][0]
    assert (
        '"expr":"* * * * *"' in definition_row[STAGE_COLUMNS[Stage.DEFINITIONS].index("recurrence")]
    )


def test_bad_records_become_error_rows_and_do_not_stop() -> None:
    batch = Batch()
    add(batch, Topic.FIRES, b"\x00\x00\x00\x00\x01junk", offset=7)
    add(batch, Topic.FIRES, b"no framing", offset=8)
    add(batch, Topic.ATTEMPTS, encode(fire("acme", "t", START)), offset=9)  # wrong type
    add(batch, Topic.FIRES, None, offset=10)  # tombstone
    add(batch, Topic.FIRES, encode(fire("acme", "t", START)), offset=11)
    errors = batch.rows[Stage.ERRORS]
    assert [(r[2], r[3]) for r in errors] == [(7, "avro"), (8, "framing"), (9, "type")]
    assert all(r[6] is not None for r in errors)  # the bytes are kept
    assert batch.tombstones == 1 and batch.errors == 3 and len(batch.rows[Stage.FIRES]) == 1
    assert batch.next_offsets == {
        (topic_name(Topic.FIRES, PREFIX), 2): 12,
        (topic_name(Topic.ATTEMPTS, PREFIX), 2): 10,
    }


def test_unknown_topic_is_an_error_row() -> None:
    batch = Batch()
    mapper().add(batch, "elsewhere", 0, 3, None, b"x", None)
    assert batch.rows[Stage.ERRORS][0][3] == "topic"
    assert batch.next_offsets == {("elsewhere", 0): 4}


@given(
    st.lists(st.integers(min_value=0, max_value=2**40), min_size=1, max_size=20),
    st.integers(min_value=0, max_value=1000),
)
def test_offsets_and_timestamps_track_the_batch(timestamps: list[int], start: int) -> None:
    batch = Batch()
    f = encode(fire("acme", "t", START))
    for i, ts in enumerate(timestamps):
        add(batch, Topic.FIRES, f, offset=start + i, ts=ts)
    tp = (topic_name(Topic.FIRES, PREFIX), 2)
    assert batch.next_offsets[tp] == start + len(timestamps)
    assert batch.min_timestamp_ms == min(timestamps)
    assert batch.last_timestamp_ms[tp] == timestamps[-1]
    assert batch.records == len(timestamps) == batch.count(Stage.FIRES)


@given(
    st.datetimes(
        min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
    ),
    st.sampled_from(list(ev.FireState)),
)
def test_fire_rows_carry_the_decision(scheduled: datetime, state: ev.FireState) -> None:
    scheduled = scheduled.replace(microsecond=0)
    f = fire("acme", "nightly", scheduled, state)
    batch = Batch()
    add(batch, Topic.FIRES, encode(f))
    row = dict(zip(STAGE_COLUMNS[Stage.FIRES], batch.rows[Stage.FIRES][0], strict=True))
    assert row["fire_key"] == f.fire_key and row["state"] == state.value
    assert row["scheduled_at"] == scheduled and row["src_topic"] == topic_name(Topic.FIRES, PREFIX)


def test_rows_hold_the_avro_datum_of_every_column() -> None:
    """Rows are built from decoded events; each column is what the record's Avro datum holds
    (enum symbols, instants, JSON of the nested records), for every projected type."""
    from tests.unit.contracts.samples import all_samples

    codec = default_codec()
    mapper = RecordMapper(codec, {topic_name(t, PREFIX): t for t in PROJECTED})
    by_type = {event_type: (topic, stage) for topic, (event_type, stage) in PROJECTED.items()}
    checked = set()
    for sample in all_samples():
        if type(sample) not in by_type:
            continue
        topic, stage = by_type[type(sample)]
        value = encode(sample)
        batch = Batch()
        mapper.add(batch, topic_name(topic, PREFIX), 0, 7, b"k", value)
        (row,) = batch.rows[stage]
        _, datum = codec.decode_datum(value)
        for column, cell in zip(STAGE_COLUMNS[stage], row, strict=True):
            if column in datum and (type(sample), column) not in DERIVED:
                expected = datum[column]
                if isinstance(expected, dict | list):
                    expected = to_json(expected)
                assert cell == expected, (type(sample).__name__, column)
                assert type(cell) in (type(expected), *ENUM_TYPES) or cell is None, column
        checked.add(type(sample))
    assert checked == set(by_type)


#: columns the mapper derives rather than copies (tested in test_outcome_rows_*)
DERIVED = {(ev.WorkOutcome, "source")}
ENUM_TYPES = tuple(v for v in vars(ev).values() if isinstance(v, type) and issubclass(v, str))


def _outcome_row(outcome: ev.WorkOutcome) -> dict[str, object]:
    mapper = RecordMapper(default_codec(), {topic_name(Topic.OUTCOMES, PREFIX): Topic.OUTCOMES})
    batch = Batch()
    mapper.add(batch, topic_name(Topic.OUTCOMES, PREFIX), 2, 9, b"k", encode(outcome))
    (row,) = batch.rows[Stage.OUTCOMES]
    return dict(zip(STAGE_COLUMNS[Stage.OUTCOMES], row, strict=True))


def test_outcome_rows_show_unknown_and_their_source() -> None:
    from tests.unit.contracts.samples import all_samples

    (sample,) = [s for s in all_samples() if isinstance(s, ev.WorkOutcome)]
    unknown = replace(
        sample,
        state=ev.OutcomeState.EXHAUSTED,
        unknown=True,
        source="dispatcher",
        tzdata_version="2025b",
    )
    row = _outcome_row(unknown)
    assert row["state"] == "unknown" and row["source"] == "dispatcher"
    assert row["tzdata_version"] == "2025b"
    assert (row["src_partition"], row["src_offset"]) == (2, 9)
    assert _outcome_row(replace(sample, unknown=False))["state"] == "succeeded"
    callback = replace(sample, source="callback")
    assert _outcome_row(callback)["source"] == "callback"
    # written before WorkOutcome v4 (no source): only a callback's has no attempt times
    assert _outcome_row(sample)["source"] == "dispatcher"
    old_callback = replace(sample, first_attempt_at=None, last_attempt_at=None)
    assert _outcome_row(old_callback)["source"] == "callback"
