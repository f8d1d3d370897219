"""The planner's shared values (bounded by two generations, with stats), the GC policies around a
rebuild, and their metrics."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from dataclasses import replace

import pytest

from horae.contracts import events as ev
from horae.streams.planner.metrics import PlannerMetrics
from horae.streams.planner.rebuild import FreezeAfterRebuild, KeepGc
from horae.streams.planner.sharing import Generations, SharedValues
from tests.unit.contracts.samples import definition


def _copy(d: ev.TriggerDefinition, trigger_id: str) -> ev.TriggerDefinition:
    """An equal definition of other objects (nothing shared with ``d`` but strings)."""
    return replace(
        d,
        trigger_id=trigger_id,
        recurrence=replace(d.recurrence),
        policies=replace(d.policies),
        quotas=replace(d.quotas),
        target=replace(d.target, headers=dict(d.target.headers)),
    )


def test_equal_values_are_held_once_and_counted() -> None:
    shared = SharedValues()
    d = definition()
    one, two = shared.index_copy(d), shared.index_copy(_copy(d, "other"))
    for name in ("recurrence", "policies", "quotas", "target"):
        assert getattr(one, name) is getattr(two, name), name
    assert one == replace(d, signature=None) and two.trigger_id == "other"
    stats = shared.stats()
    assert (stats.misses, stats.hits, stats.evictions) == (7, 7, 0)
    assert stats.size == 7  # tenant, author, content type, recurrence, policies, quotas, target


def test_a_target_at_the_same_url_with_other_headers_is_not_shared() -> None:
    shared = SharedValues()
    d = definition()
    other = replace(d, target=replace(d.target, headers={"x": "y"}))
    assert shared.index_copy(other).target is not shared.index_copy(d).target
    assert shared.index_copy(_copy(other, "again")).target is shared.index_copy(other).target


def test_compiled_schedules_are_computed_once_per_recurrence_and_policies() -> None:
    shared = SharedValues()
    d = definition()
    spec, schedule = shared.compiled(d)
    assert shared.compiled(_copy(d, "other")) == (spec, schedule)
    assert shared.compiled(_copy(d, "other"))[1] is schedule
    hourly = replace(d, recurrence=replace(d.recurrence, expr="0 * * * *"))
    assert shared.compiled(hourly)[1] is not schedule


def test_generations_keep_what_was_used_since_the_last_turn() -> None:
    table: Generations[str, int] = Generations(2)
    table.put("a", 1)
    table.put("b", 2)
    table.put("c", 3)  # young was full: a, b turn old
    assert table.get("a") == 1  # back to young (which is full again: b turns old, c... )
    table.put("d", 4)  # the turn drops b (not used since)
    assert table.get("b") is None
    assert table.get("a") == 1 and table.get("c") == 3 and table.get("d") == 4
    assert table.evictions >= 1 and len(table) <= 4
    with pytest.raises(ValueError):
        Generations(0)


def test_shared_values_stay_bounded_and_still_share_after_evictions() -> None:
    shared = SharedValues(limit=10)
    d = definition()
    held = [
        shared.index_copy(replace(d, recurrence=replace(d.recurrence, expr=f"{m} * * * *")))
        for m in range(40)
    ]
    stats = shared.stats()
    assert stats.size <= 2 * 10 * 3 and stats.evictions > 0
    assert len({id(h.recurrence) for h in held}) == 40
    again = shared.index_copy(_copy(held[-1], "again"))
    assert again.recurrence is held[-1].recurrence  # recent: still shared


@pytest.fixture
def unfrozen() -> Iterator[None]:
    """Leaves the test process as it found it (FreezeAfterRebuild freezes everything alive)."""
    assert gc.get_freeze_count() == 0
    enabled = gc.isenabled()
    try:
        yield
    finally:
        gc.unfreeze()
        if enabled:
            gc.enable()


@pytest.mark.usefixtures("unfrozen")
def test_freeze_after_rebuild_freezes_once_and_unfreezes_before_a_later_rebuild() -> None:
    policy, was = FreezeAfterRebuild(), gc.isenabled()
    with policy.rebuilding():
        assert not gc.isenabled()
    assert gc.get_freeze_count() > 0 and gc.isenabled() == was
    with policy.rebuilding():
        assert gc.get_freeze_count() == 0  # unfrozen first
        assert not gc.isenabled()
    assert gc.get_freeze_count() > 0


@pytest.mark.usefixtures("unfrozen")
def test_keep_gc_leaves_the_collector_alone() -> None:
    was = gc.isenabled()
    with KeepGc().rebuilding():
        assert gc.isenabled() == was
    assert gc.get_freeze_count() == 0


@pytest.mark.usefixtures("unfrozen")
def test_metrics_export_the_frozen_count_and_the_sharing_stats() -> None:
    metrics, shared = PlannerMetrics(), SharedValues()
    metrics.watch_sharing(shared)
    d = definition()
    shared.index_copy(d)
    shared.index_copy(_copy(d, "other"))
    sample = metrics.registry.get_sample_value
    assert sample("horae_planner_shared_values_misses_total") == 7
    assert sample("horae_planner_shared_values_hits_total") == 7
    assert sample("horae_planner_shared_values_size") == 7
    assert sample("horae_planner_gc_frozen_objects") == 0
    with FreezeAfterRebuild().rebuilding():
        pass
    # the gauge reads gc.get_freeze_count() when scraped (a value, not the same instant's: a
    # planner thread another test left running may freeze or unfreeze in between)
    assert sample("horae_planner_gc_frozen_objects") > 0
    assert sample("horae_codec_interned_size", {"type": "Recurrence"}) is not None
