"""Pure parts of the projections: SQL files present, metrics, progress bar, cursors, verify report,
the stored-offset filter of a batch."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from horae.projections.metrics import ProjectionMetrics
from horae.projections.queries import BadCursor, _decode_cursor, _encode_cursor
from horae.projections.rebuild import TABLES, Progress, TableDiff, VerifyReport
from horae.projections.rows import Stage
from horae.projections.sqlfiles import migration_names, sql
from horae.projections.store import MERGES, ApplyResult, unapplied


def test_every_named_sql_file_exists() -> None:
    for names in MERGES.values():
        for name in names:
            assert sql(name).strip()
    for name in ("stage", "schema", "merge/offsets", "merge/lock_offsets"):
        assert sql(name).strip()
    assert migration_names()[0] == "0001_initial"
    assert migration_names() == sorted(migration_names())
    for table in TABLES:
        assert f"CREATE TABLE {table} (" in sql("schema")


def test_rows_per_second_is_a_sliding_window() -> None:
    m = ProjectionMetrics(CollectorRegistry())
    for i in range(10):
        m.observe_rows("s", 1000, now=100.0 + i)
    rate = {"schema": "s"}
    assert m.registry.get_sample_value("horae_projection_rows_per_second", rate) == pytest.approx(
        10_000 / 9
    )
    m.observe_rows("s", 0, now=200.0)  # idle for long: the window forgets
    assert m.registry.get_sample_value("horae_projection_rows_per_second", rate) == 0.0


def test_progress_renders_rate_and_eta() -> None:
    p = Progress(total=1000, done=250, started=0.0)
    text = p.render()
    assert "250/1000 records" in text and "25.0%" in text and "rec/s" in text and "ETA" in text
    assert Progress(total=0).render().count("#") == 30


@given(st.lists(st.text(max_size=30), min_size=1, max_size=3))
def test_cursor_round_trip(parts: list[str]) -> None:
    assert _decode_cursor(_encode_cursor(parts), len(parts)) == parts


@pytest.mark.parametrize("bad", ["", "!!!", _encode_cursor(["a"]), "eyJ4Ijoge30"])
def test_foreign_cursors_are_refused(bad: str) -> None:
    with pytest.raises(BadCursor):
        _decode_cursor(bad, 2)


def test_verify_report_counts_and_renders() -> None:
    clean = TableDiff(10, 10, 0, 0, 0, [])
    bad = TableDiff(10, 9, 1, 0, 2, ["only live: fire_key=k"])
    report = VerifyReport({"fires": bad, "attempts": clean}, offsets_equal=False)
    assert report.divergence == 3
    text = report.render()
    assert "only live: fire_key=k" in text and "divergence: 3 rows" in text and "NO" in text


def test_records_below_the_stored_offsets_are_dropped() -> None:
    result = ApplyResult()
    rows = [("k", 1, 5), ("k", 1, 6), ("k", 2, 0)]  # (..., src_partition, src_offset)
    kept = unapplied(Stage.FIRES, rows, "t", {("t", 1): 6}, result)
    assert kept == [("k", 1, 6), ("k", 2, 0)] and result.dropped == 1
    errors = [("t", 1, 5, "avro", "x", None, None, None)]
    assert unapplied(Stage.ERRORS, errors, "", {("t", 1): 6}, result) == []
