"""The contract of :meth:`horae.api.ports.HistorySource.search_fires` (issue 29 item 4), written
once and run over the in-memory twin (``tests/unit/api/test_fire_search.py``) and the real
read models (``tests/integration/api/test_fire_search_postgres.py``). A backend subclasses
:class:`FireSearchContract` and provides the fixture ``searched``: a history source holding
:data:`FIRES` and :data:`LABELS`, however it stores them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from horae.api.ports import BadCursor, HistorySource

START = datetime(2026, 3, 1, tzinfo=UTC)
END = START + timedelta(days=1)


@dataclass(frozen=True)
class Seeded:
    """A fire the suite expects: its tenant, trigger, scheduled instant and shown state."""

    tenant: str
    trigger_id: str
    at: datetime
    status: str


def _acme_nightly(i: int) -> str:
    return ("exhausted", "succeeded", "fired")[i % 3]


#: (tenant, trigger) -> labels of its latest version
LABELS: dict[tuple[str, str], dict[str, str]] = {
    ("acme", "nightly"): {"team": "ops"},
    ("acme", "hourly"): {"team": "web"},
    ("globex", "nightly"): {"team": "ops"},
}
FIRES: list[Seeded] = [
    *(Seeded("acme", "nightly", START + timedelta(minutes=i), _acme_nightly(i)) for i in range(10)),
    *(Seeded("acme", "hourly", START + timedelta(minutes=i), "skipped") for i in range(5)),
    *(Seeded("globex", "nightly", START + timedelta(minutes=i), "exhausted") for i in range(5)),
]


def everything(
    history: HistorySource,
    tenant: str = "acme",
    states: list[str] | None = None,
    label: tuple[str, str] | None = None,
    since: datetime = START,
    until: datetime = END,
    limit: int = 4,
) -> list[dict[str, Any]]:
    """Every page of a search, followed by its cursors, concatenated."""
    rows: list[dict[str, Any]] = []
    cursor = None
    for _ in range(100):
        page = history.search_fires(tenant, since, until, states, label, limit, cursor)
        assert len(page.items) <= limit
        rows += page.items
        if page.next_cursor is None:
            return rows
        cursor = page.next_cursor
    raise AssertionError("the pages never end")


def expected(
    tenant: str = "acme",
    states: set[str] | None = None,
    triggers: set[str] | None = None,
    since: datetime = START,
    until: datetime = END,
) -> list[tuple[str, datetime, str]]:
    """(trigger, instant, state) of the seeded fires a search must find, in instant order (the
    fire keys of one instant order by trigger id here: ``<tenant>/<trigger>/...``)."""
    return sorted(
        (f.trigger_id, f.at, f.status)
        for f in FIRES
        if f.tenant == tenant
        and (states is None or f.status in states)
        and (triggers is None or f.trigger_id in triggers)
        and since <= f.at < until
    )


def seen(rows: list[dict[str, Any]]) -> list[tuple[str, datetime, str]]:
    return [(r["trigger_id"], r["scheduled_at"], r["status"]) for r in rows]


class FireSearchContract:
    """What every :class:`HistorySource` keeps for the tenant-wide fire search."""

    def test_pages_cover_the_tenants_fires_once_in_order(self, searched: HistorySource) -> None:
        rows = everything(searched)
        keys = [(r["scheduled_at"], r["fire_key"]) for r in rows]
        assert keys == sorted(keys) and len(set(keys)) == len(keys)
        assert sorted(seen(rows)) == expected()
        assert {r["tenant"] for r in rows} == {"acme"}
        assert sorted(seen(everything(searched, "globex"))) == expected("globex")

    def test_states_filter_on_the_shown_state(self, searched: HistorySource) -> None:
        rows = everything(searched, states=["exhausted"])
        assert seen(rows) == expected(states={"exhausted"})
        both = everything(searched, states=["skipped", "exhausted"], limit=3)
        keys = [(r["scheduled_at"], r["fire_key"]) for r in both]
        assert keys == sorted(keys)
        assert sorted(seen(both)) == expected(states={"skipped", "exhausted"})
        assert everything(searched, states=["cancelled"]) == []

    def test_a_label_selects_its_triggers_fires(self, searched: HistorySource) -> None:
        web = everything(searched, label=("team", "web"))
        assert sorted(seen(web)) == expected(triggers={"hourly"})
        ops = everything(searched, label=("team", "ops"), states=["fired"])
        assert seen(ops) == expected(states={"fired"}, triggers={"nightly"})
        assert everything(searched, label=("team", "nobody")) == []
        assert everything(searched, "globex", label=("team", "web")) == []

    def test_the_window_is_half_open(self, searched: HistorySource) -> None:
        since, until = START + timedelta(minutes=2), START + timedelta(minutes=4)
        rows = everything(searched, since=since, until=until)
        assert sorted(seen(rows)) == expected(since=since, until=until)
        assert {r["scheduled_at"] for r in rows} == {since, since + timedelta(minutes=1)}

    def test_a_foreign_cursor_is_refused(self, searched: HistorySource) -> None:
        with pytest.raises(BadCursor):
            searched.search_fires("acme", START, END, None, None, 10, "bm90IGEgY3Vyc29y")
