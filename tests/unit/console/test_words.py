"""The schedule and policies in plain words."""

from __future__ import annotations

import pytest

from horae.console.words import backfill_cost, cron_words, policy_words, schedule_words


@pytest.mark.parametrize(
    ("expr", "said"),
    [
        ("0 9 * * 1-5", "at 09:00 on weekdays"),
        ("*/2 * * * * *", "every 2 seconds"),
        ("*/15 * * * *", "every 15 minutes"),
        ("30 * * * *", "every hour at minute 30"),
        ("0 9,17 * * *", "at 09:00, 17:00"),
        ("0 0 1 * *", "at 00:00 on day 1 of the month"),
        ("@daily", "at 00:00"),
        ("0 8 * * sun", "at 08:00 on Sunday"),
        ("0 8 L * *", "at 08:00 on the last day of the month"),
        ("nonsense", "custom schedule"),
    ],
)
def test_cron_words(expr: str, said: str) -> None:
    assert cron_words(expr) == said


def test_schedule_and_policy_words() -> None:
    assert schedule_words({"kind": "every", "interval_s": 3600}) == "every hour"
    assert schedule_words({"kind": "cron", "expr": "0 9 * * *", "zone": "Europe/Berlin"}) == (
        "at 09:00 (Europe/Berlin)"
    )
    rows = dict((name, meaning) for name, _, meaning in policy_words({"policies": {}}))
    assert "latest missed instant" in rows["misfire"] and "1 day" in rows["horizon_s"]


def test_backfill_cost_at_the_tenants_dispatch_rate() -> None:
    said = backfill_cost(1440, 2.0)
    assert (said["fires"], said["time"], said["rate"]) == ("1,440", "12 min", "2/s")
    assert backfill_cost(7, 10.0)["time"] == "1 s"
    assert backfill_cost(36_000, 2.5)["time"] == "4 h"
    assert backfill_cost(100, 0.3)["rate"] == "0.3/s"
    assert backfill_cost(0, 10.0)["time"] is None  # "nothing to send"
    assert backfill_cost(5, 0.0)["rate"] is None  # no dispatch rate granted: no time said
