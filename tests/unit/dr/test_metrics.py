"""The DR metrics, pure: the standby's oldest instant due from a changelog's records (the latest
state per trigger, tombstones, paused and deleted triggers), and the exposition of the figures."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from prometheus_client.parser import text_string_to_metric_families

from horae.contracts import events as ev
from horae.dr.metrics import Due, Figures, exposition, oldest_due

T0 = datetime(2026, 12, 2, 6, 0, tzinfo=UTC)


def _state(
    trigger: str, next_instant: datetime | None, state: ev.DefinitionState = ev.DefinitionState.LIVE
) -> ev.PlannerState:
    return ev.PlannerState(
        tenant="acme", trigger_id=trigger, trigger_version=1, state=state, updated_at=T0,
        next_instant=next_instant,
    )  # fmt: skip


def test_the_oldest_due_is_the_earliest_next_instant_of_the_latest_live_states() -> None:
    records: list[tuple[bytes | None, ev.PlannerState | None]] = [
        (b"acme/old", _state("old", T0 - timedelta(hours=1))),
        (b"acme/old", _state("old", T0 + timedelta(seconds=30))),  # decided since: moved on
        (b"acme/gone", _state("gone", T0 - timedelta(hours=2))),
        (b"acme/gone", None),  # a tombstone
        (b"acme/paused", _state("paused", T0 - timedelta(hours=3), ev.DefinitionState.PAUSED)),
        (b"acme/deleted", _state("deleted", T0 - timedelta(hours=4), ev.DefinitionState.DELETED)),
        (b"acme/done", _state("done", None)),  # no instant left
        (b"acme/due", _state("due", T0 - timedelta(seconds=12))),
        (None, _state("keyless", T0 - timedelta(days=1))),  # not a changelog record
    ]
    due = oldest_due(records)
    assert due == Due("acme", "due", T0 - timedelta(seconds=12))
    assert due.late_by(T0.timestamp()) == 12.0
    assert due.late_by((T0 - timedelta(minutes=1)).timestamp()) == 0.0  # not due yet
    assert oldest_due([(b"acme/gone", _state("gone", T0)), (b"acme/gone", None)]) is None


def _families(text: bytes) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text.decode()):
        out[family.name] = [(dict(s.labels), s.value) for s in family.samples]
    return out


def test_the_exposition_gives_the_lag_per_topic_and_how_late_the_standby_would_be() -> None:
    figures = Figures(
        active="a",
        regions={"a": True, "b": True},
        mirror_running=True,
        lag={"horae.fires": 3, "horae.planner-state": 0},
        last_decided_at=T0 - timedelta(seconds=4),
        due=Due("acme", "t1", T0 - timedelta(seconds=7)),
        promotions=1,
    )
    m = _families(exposition(figures, T0.timestamp()))
    assert m["horae_dr_replication_lag_records"] == [
        ({"topic": "horae.fires"}, 3.0),
        ({"topic": "horae.planner-state"}, 0.0),
    ]
    assert m["horae_dr_replication_lag_known"] == [({}, 1.0)]
    assert m["horae_dr_standby_would_be_late_by_seconds"] == [({}, 7.0)]
    assert m["horae_dr_standby_last_decision_age_seconds"] == [({}, 4.0)]
    assert m["horae_dr_region_up"] == [
        ({"region": "a", "role": "writer"}, 1.0),
        ({"region": "b", "role": "standby"}, 1.0),
    ]
    assert m["horae_dr_writer"] == [({"region": "a"}, 1.0), ({"region": "b"}, 0.0)]
    assert m["horae_dr_mirror_running"] == [({}, 1.0)]
    assert m["horae_dr_promotions"] == [({}, 1.0)]


def test_what_cannot_be_measured_is_absent_not_zero() -> None:
    writer_lost = Figures("a", {"a": False, "b": True}, False, None, None, None, 1)
    m = _families(exposition(writer_lost, T0.timestamp()))
    assert m["horae_dr_replication_lag_known"] == [({}, 0.0)]
    assert m["horae_dr_replication_lag_records"] == []
    assert m["horae_dr_region_up"][0] == ({"region": "a", "role": "writer"}, 0.0)
    assert m["horae_dr_standby_would_be_late_by_seconds"] == [({}, 0.0)]  # nothing due in b
    assert "horae_dr_standby_last_decision_age_seconds" not in m
    standby_lost = Figures("a", {"a": True, "b": False}, True, None, None, None, 0)
    m = _families(exposition(standby_lost, T0.timestamp()))
    assert "horae_dr_standby_would_be_late_by_seconds" not in m  # unknown, not 0
