"""The breaker's ``schedule.failed`` names the tzdata release of the fire that tripped it, as
every other schedule event names its fire's (pure)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from horae.contracts import events as ev
from horae.domain.keys import FireKey
from horae.streams.dispatcher.breaker import trip_outputs
from tests.unit.dispatcher.builders import fire_record


def test_the_breakers_event_carries_the_fires_release() -> None:
    fire = replace(fire_record(FireKey("acme", "h", 1_800_000_000), ev.Lane.ON_TIME),
                   tzdata_version="2099z")  # fmt: skip
    now = datetime.fromtimestamp(1_800_000_100, UTC)
    for key in (b"platform-secret", None):  # with a pause command, and without a platform key
        out = trip_outputs(
            fire, "breaker: 5 consecutive failed fires", platform_key_id="platform",
            platform_key=key, command_ttl_s=3600, now=now,
        )  # fmt: skip
        (event,) = [e for e in out if isinstance(e, ev.ScheduleEvent)]
        assert event.type == "schedule.failed" and event.tzdata_version == "2099z"
