"""A schedule's version history: every version, who wrote it, when, and what changed."""

from __future__ import annotations

import html
import re

from horae.console.versions import changes, versions
from tests.unit.api.support import cron
from tests.unit.console.test_console import seeded, signed_in


def test_changes_name_each_field_that_changed() -> None:
    before = {"recurrence": {"expr": "0 9 * * *", "zone": "UTC"}, "labels": {"team": "ops"}}
    after = {"recurrence": {"expr": "0 10 * * *", "zone": "UTC"}, "labels": {"tier": "1"}}
    assert changes(before, after) == [
        'labels.team: "ops" -> none',
        'labels.tier: none -> "1"',
        'recurrence.expr: "0 9 * * *" -> "0 10 * * *"',
    ]
    assert changes(after, after) == []


def test_every_version_with_its_author_and_changes() -> None:
    api = seeded()
    body = cron(expr="0 10 * * *", policies={"misfire_grace_s": 5})
    amended = api.client.put(
        "/v1/schedules/nightly",
        json=body,
        headers=api.headers("acme", "author", **{"If-Match": '"1"'}),
    )
    assert amended.status_code == 200, amended.text
    kept = versions(api.backend, "acme", "nightly")
    assert kept is not None and [v.version for v in kept] == [2, 1]
    assert "alice" in kept[0].author and kept[0].role == "author"
    assert 'recurrence.expr: "0 9 * * *" -> "0 10 * * *"' in kept[0].changes
    assert "policies.misfire_grace_s: 60 -> 5" in kept[0].changes
    assert kept[1].changes == []
    assert versions(api.backend, "globex", "nightly") == []  # another tenant's: none

    signed_in(api, "acme", "read")
    page = api.client.get("/console/schedules/nightly")
    rows = re.findall(r'<tr data-version="(\d+)">', page.text)
    assert rows == ["2", "1"]
    shown = html.unescape(page.text)
    assert 'recurrence.expr: "0 9 * * *" -> "0 10 * * *"' in shown
    assert "created" in shown and "role author" in shown
