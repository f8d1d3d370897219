"""The console's plain words for Quartz's L W # day terms and the bounded-age and completion
policies (anything it cannot say simply stays "custom schedule")."""

from __future__ import annotations

import pytest

from horae.console.words import cron_words, policy_words


@pytest.mark.parametrize(
    ("expr", "words"),
    [
        ("0 9 L * *", "at 09:00 on the last day of the month"),
        ("0 9 LW * *", "at 09:00 on the last weekday of the month"),
        ("0 9 15W * *", "at 09:00 on the weekday nearest day 15 of the month"),
        ("0 9 L-3 * *", "at 09:00 3 days before the last day of the month"),
        ("0 9 * * 6#3", "at 09:00 on the third Saturday of the month"),
        ("0 9 * * FRIL", "at 09:00 on the last Friday of the month"),
        ("0 9 L 3 *", "at 09:00 on the last day of the month in March"),
        ("0 9 1,L * *", "custom schedule"),
        ("0 9 L * MON", "custom schedule"),  # the Vixie OR of two day fields
        ("0 9 * * 5#9", "custom schedule"),
    ],
)
def test_quartz_day_terms_in_words(expr: str, words: str) -> None:
    assert cron_words(expr) == words


def test_bounded_age_and_completion_policies_in_words() -> None:
    trigger = {
        "policies": {
            "retry": {"max_event_age_s": 300, "max_retry_duration_s": 3600},
            "action_after_completion": "delete",
        }
    }
    rows = {name: (value, meaning) for name, value, meaning in policy_words(trigger)}
    assert rows["max_event_age_s"][0] == "300" and "5 minutes old" in rows["max_event_age_s"][1]
    assert "1 hour after the first attempt" in rows["max_retry_duration_s"][1]
    assert rows["action_after_completion"][0] == "delete"
    plain = {name for name, _, _ in policy_words({"policies": {}})}
    assert not plain & {"max_event_age_s", "max_retry_duration_s", "action_after_completion"}
