"""A fire's page: each attempt with its result, HTTP status and class, lane, start, duration."""

from __future__ import annotations

import html
import re
from datetime import timedelta

from tests.unit.api.support import NOW
from tests.unit.api.test_api import _fire
from tests.unit.console.test_console import seeded, signed_in


def test_a_fire_shows_each_attempt() -> None:
    api = seeded()
    at = NOW - timedelta(hours=1)
    api.backend.fire_rows.append(_fire("k1", at, attempt_count=2, outcome="failed"))
    api.backend.attempt_rows += [
        {"fire_key": "k1", "n": 1, "lane": "ontime", "started_at": at, "ended_at": at,
         "transport_result": "http_error", "not_sent": False, "duration_ms": 1250,
         "http_status": 503, "error": "upstream busy", "retry_after_s": None,
         "next_attempt_at": at + timedelta(seconds=1)},
        {"fire_key": "k1", "n": 2, "lane": "ontime", "started_at": at, "ended_at": at,
         "transport_result": "timeout", "not_sent": False, "duration_ms": 5000,
         "http_status": None, "error": "read timed out", "retry_after_s": None,
         "next_attempt_at": None},
    ]  # fmt: skip
    signed_in(api, "acme", "read")
    page = api.client.get("/console/fires/k1")
    assert page.status_code == 200, page.text
    rows = [
        " ".join(html.unescape(re.sub(r"<[^>]+>", " ", row)).split())
        for row in re.findall(r"<tr><td class=\"num\">.*?</tr>", page.text)
    ]
    assert rows[0].startswith("1 http_error 503 5xx ontime") and "1.25 s" in rows[0]
    assert "upstream busy" in rows[0]
    assert rows[1].startswith("2 timeout — no response ontime") and "5.00 s" in rows[1]
