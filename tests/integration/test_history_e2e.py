"""One trigger's story from the real planner through the real dispatcher and projector to the
history queries, on the running dev stack and one virtual clock: a fired instant with its
attempts and its callback's outcome, a jittered one, a paused stretch, expired instants, an
overlap skip (after an amendment), a manual run and a backfill — each with its cause and tzdata
version.

The story is told in :data:`CHAPTERS`, in order: each chapter acts (moves the virtual clock,
sends commands, answers calls) until the history shows its effect, and returns the check of what
the history must show for it at the end. A new kind of instant is a new chapter in the tuple.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from aiohttp import web

from horae.contracts import events as ev
from horae.contracts.topics import Topic
from horae.domain.jitter import jitter_offset
from horae.domain.keys import FireKey
from horae.domain.tzdb import tzdata_version
from horae.ports import WallClock
from horae.projections import schema as pschema
from horae.projections.projector import Projector, ProjectorConfig
from horae.projections.queries import FireDetail, HistoryQueries
from horae.streams.dispatcher.worker import Dispatcher
from tests.integration.dispatcher.support import DispatchEnv, Receiver, dispatching
from tests.integration.planner.harness import (
    HOOK_REF,
    TENANT,
    PlannerEnv,
    command,
    consumed,
    definition,
)
from tests.integration.projections.projection_support import running
from tests.waiting import wait_until

HOUR = 3600
JITTER_S = 300
HORIZON_S = 5400  # an instant missed by more than 1.5 h is expired
TRIGGER = "story"
KEY = ev.trigger_key(TENANT, TRIGGER)
TZ = tzdata_version("UTC")
Check = Callable[[], None]


@dataclass
class Story:
    """What the chapters share: the virtual clock, the receiver and the history queries."""

    env: PlannerEnv
    virtual: list[float]
    hour: int  # the hour the story starts in
    receiver: Receiver
    queries: HistoryQueries
    callback_port: int
    policies: ev.Policies
    target: ev.Target
    flaky: list[bool] = field(default_factory=lambda: [False])  # answer 503 to a first call

    def instant(self, n: int) -> int:
        """The n-th hourly instant of the story (1: the first after it starts)."""
        return self.hour + n * HOUR

    def set_clock(self, at: float) -> None:
        self.virtual[0] = at

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.virtual[0], UTC)

    def send(self, kind: ev.CommandKind, **fields: Any) -> None:
        at = self.now()
        self.env.send(
            command(TRIGGER, kind, requested_at=at, expires_at=at + timedelta(minutes=10), **fields)
        )

    def fire(self, key: str) -> FireDetail | None:
        return self.queries.fire(TENANT, key)

    def fires(self) -> list[dict[str, Any]]:
        far = timedelta(days=2)
        page = self.queries.fires(TENANT, TRIGGER, self.now() - far, self.now() + far, limit=1000)
        return page.items

    def events(self) -> list[dict[str, Any]]:
        far = timedelta(days=2)
        page = self.queries.events(TENANT, TRIGGER, self.now() - far, self.now() + far, limit=1000)
        return page.items

    def event(self, kind: ev.ScheduleEventType) -> list[dict[str, Any]]:
        return [e for e in self.events() if e["type"] == kind.value]

    def settled(self, key: str, source: str = "dispatcher") -> FireDetail:
        """The fire once the history shows an outcome of ``source`` for it."""

        def done() -> FireDetail | None:
            detail = self.fire(key)
            if detail is None or not any(o["source"] == source for o in detail.outcomes):
                return None
            return detail

        detail = wait_until(done, 30, 0.1, f"an outcome of {source} for {key}")
        assert detail is not None
        # the planner has read it too (an overlap trigger's next instant depends on it)
        wait_until(lambda: consumed(self.env, Topic.OUTCOMES), 30, 0.1, "outcomes consumed")
        return detail

    def callback(self, token: str, body: dict[str, str]) -> int:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.callback_port}/v1/outcomes",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json", "Horae-Callback-Token": token},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return int(response.status)
        except urllib.error.HTTPError as exc:
            with exc:
                return int(exc.code)


def scheduled_key(instant: int) -> str:
    return FireKey(TENANT, TRIGGER, instant).canonical()


def due(instant: int) -> float:
    return instant + jitter_offset(KEY, instant, JITTER_S * 1000, instant + HOUR) / 1000


def _tz_everywhere(detail: FireDetail) -> None:
    assert detail.fire["tzdata_version"] == TZ
    assert {a["tzdata_version"] for a in detail.attempts} == {TZ}
    assert {o["tzdata_version"] for o in detail.outcomes} == {TZ}


# --- chapters ----------------------------------------------------------------------------------


def fired_with_callback(s: Story) -> Check:
    """Instant 1 fires on time: a 503, then a 200 after the retry; then the target's callback
    reports the work failed — the callback's outcome is the one shown, both are kept."""
    t = s.instant(1)
    key = scheduled_key(t)
    s.flaky[0] = True
    s.set_clock(due(t) + 20)
    wait_until(lambda: (d := s.fire(key)) and d.attempts, 30, 0.1, "the first attempt")
    s.set_clock(s.virtual[0] + 5)  # past the retry's backoff (1 s), planned from the old time
    s.settled(key)
    s.flaky[0] = False
    token = [h for h in s.receiver.hits if h.key == key][-1].attempt_token
    assert s.callback(token, {"state": "failed", "error": "the job failed"}) == 202
    s.settled(key, "callback")

    def check() -> None:
        detail = s.fire(key)
        assert detail is not None and detail.outcome is not None
        f = detail.fire
        assert (f["state"], f["lane"], f["cause"], f["status"]) == (
            "fired", "on_time", None, "failed",
        )  # fmt: skip
        assert [(a["n"], a["transport_result"], a["http_status"]) for a in detail.attempts] == [
            (1, "http_error", 503),
            (2, "ok", 200),
        ]
        assert [(o["source"], o["state"]) for o in detail.outcomes] == [
            ("dispatcher", "succeeded"),
            ("callback", "failed"),
        ]
        assert (detail.outcome["source"], detail.outcome["error"]) == (
            "callback", "the job failed",
        )  # fmt: skip
        _tz_everywhere(detail)

    return check


def jittered(s: Story) -> Check:
    """Instant 2 fires at its jittered due time, on time."""
    t = s.instant(2)
    key = scheduled_key(t)
    s.set_clock(due(t) + 20)
    s.settled(key)

    def check() -> None:
        detail = s.fire(key)
        assert detail is not None
        f = detail.fire
        offset = jitter_offset(KEY, t, JITTER_S * 1000, t + HOUR)
        assert offset != 0 and f["jitter_ms"] == offset
        assert f["due_at"] == datetime.fromtimestamp(t + offset / 1000, UTC)
        assert (f["state"], f["lane"], f["status"]) == ("fired", "on_time", "succeeded")
        _tz_everywhere(detail)

    return check


def paused_stretch(s: Story) -> Check:
    """Paused after instant 2, resumed 20 minutes after instant 4: instant 3 is skipped (an
    event), instant 4 fires once on the catch-up lane (misfire fire_once)."""
    s.send(ev.CommandKind.PAUSE)
    wait_until(lambda: s.event(ev.ScheduleEventType.PAUSED), 30, 0.1, "schedule.paused")
    s.set_clock(s.instant(4) + 1200)
    s.send(ev.CommandKind.RESUME)
    caught_up = scheduled_key(s.instant(4))
    s.settled(caught_up)

    def check() -> None:
        [paused] = s.event(ev.ScheduleEventType.PAUSED)
        [resumed] = s.event(ev.ScheduleEventType.RESUMED)
        assert paused["cause"] == "paused" and resumed["cause"].startswith("paused: from ")
        skipped = [
            e for e in s.event(ev.ScheduleEventType.SKIPPED)
            if " from " in e["cause"] and s.instant(3) == int(datetime.fromisoformat(
                e["cause"].split(" from ")[1].split(" to ")[0]).timestamp())
        ]  # fmt: skip
        assert skipped, s.event(ev.ScheduleEventType.SKIPPED)
        assert {e["tzdata_version"] for e in (paused, resumed, *skipped)} == {TZ}
        assert s.fire(scheduled_key(s.instant(3))) is None, "never decided on its own"
        detail = s.fire(caught_up)
        assert detail is not None
        assert (detail.fire["state"], detail.fire["lane"]) == ("fired", "catch_up")
        _tz_everywhere(detail)

    return check


def expired(s: Story) -> Check:
    """Four hours pass without a decision: instants 5 and 6 are past the horizon (expired), 7 is
    skipped and 8 fires (fire_once)."""
    s.set_clock(s.instant(8) + 1200)
    s.settled(scheduled_key(s.instant(8)))

    def check() -> None:
        for n in (5, 6):
            detail = s.fire(scheduled_key(s.instant(n)))
            assert detail is not None
            f = detail.fire
            assert (f["state"], f["status"], f["cause"], f["lane"]) == (
                "expired", "expired", "expired: past horizon", None,
            )  # fmt: skip
            assert f["tzdata_version"] == TZ and detail.attempts == detail.outcomes == []
        seven = s.fire(scheduled_key(s.instant(7)))
        assert seven is not None
        assert (seven.fire["state"], seven.fire["cause"]) == ("skipped", "skipped: misfire policy")
        assert seven.fire["cause_detail"].startswith("fire_once: coalesced into ")
        assert seven.fire["tzdata_version"] == TZ
        eight = s.fire(scheduled_key(s.instant(8)))
        assert eight is not None and eight.fire["lane"] == "catch_up"

    return check


def overlap_skip(s: Story) -> Check:
    """Amended to version 2 (overlap ``skip``, no jitter): instant 9's call is still running when
    instant 10 is due, so instant 10 is recorded ``skipped: overlap`` and never sent."""
    policies = replace(s.policies, jitter_s=0, overlap=ev.Overlap.SKIP)
    s.env.put(definition(TRIGGER, "0 * * * *", version=2, policies=policies, target=s.target))
    wait_until(lambda: consumed(s.env, Topic.DEFINITIONS), 30, 0.1, "version 2 applied")
    nine, ten = scheduled_key(s.instant(9)), scheduled_key(s.instant(10))
    s.receiver.delay_s = 4.0  # real seconds: the call outlasts the next decision
    s.set_clock(s.instant(9) + 20)
    wait_until(lambda: s.receiver.active, 30, 0.05, "instant 9's call in progress")
    s.set_clock(s.instant(10) + 20)  # before instant 9's deadline (10) + the attempt's 30 s
    wait_until(lambda: s.fire(ten), 30, 0.1, "instant 10 decided")
    s.receiver.delay_s = 0.0
    s.settled(nine)

    def check() -> None:
        detail = s.fire(ten)
        assert detail is not None
        f = detail.fire
        assert (f["state"], f["cause"], f["lane"]) == ("skipped", "skipped: overlap", None)
        assert f["tzdata_version"] == TZ and detail.attempts == []
        assert not [h for h in s.receiver.hits if h.key == ten], "an overlap skip is never sent"
        [event] = [e for e in s.event(ev.ScheduleEventType.SKIPPED) if e["fire_key"] == ten]
        assert event["cause"] == "skipped: overlap"
        running = s.fire(nine)
        assert running is not None and running.fire["status"] == "succeeded"
        assert running.fire["trigger_version"] == 2

    return check


def manual_run(s: Story) -> Check:
    """A manual run now: its own fire key (origin manual), the manual lane, its command."""
    s.set_clock(s.virtual[0] + 60)
    at = int(s.virtual[0])
    s.send(ev.CommandKind.MANUAL_RUN)
    key = FireKey(TENANT, TRIGGER, at, 0, ev.Origin.MANUAL).canonical()
    s.settled(key)

    def check() -> None:
        detail = s.fire(key)
        assert detail is not None
        f = detail.fire
        assert (f["origin"], f["lane"], f["state"], f["status"]) == (
            "manual", "manual", "fired", "succeeded",
        )  # fmt: skip
        assert f["command_id"] is not None and f["cause"] is None
        _tz_everywhere(detail)

    return check


def backfill(s: Story) -> Check:
    """A backfill of the hour before the story: one instant, origin backfill, its lane."""
    start = datetime.fromtimestamp(s.hour - HOUR, UTC)
    s.send(
        ev.CommandKind.BACKFILL,
        role=ev.Role.POLICY,
        backfill_from=start,
        backfill_to=start + timedelta(minutes=30),
    )
    key = FireKey(TENANT, TRIGGER, s.hour - HOUR, 0, ev.Origin.BACKFILL).canonical()
    s.settled(key)

    def check() -> None:
        detail = s.fire(key)
        assert detail is not None
        f = detail.fire
        assert (f["origin"], f["lane"], f["state"], f["status"]) == (
            "backfill", "backfill", "fired", "succeeded",
        )  # fmt: skip
        assert f["command_id"] is not None
        _tz_everywhere(detail)

    return check


#: the story, in order (a chapter acts, then returns its check of the final history)
CHAPTERS: tuple[Callable[[Story], Check], ...] = (
    fired_with_callback,
    jittered,
    paused_stretch,
    expired,
    overlap_skip,
    manual_run,
    backfill,
)


# --- the run ------------------------------------------------------------------------------------


@pytest.fixture
def schema(database_url: str, unique: str) -> Iterator[str]:
    name = f"e2e_{unique}"
    yield name
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def test_one_triggers_history_end_to_end(
    planner_env: PlannerEnv, database_url: str, schema: str
) -> None:
    hour = int(datetime.now(UTC).timestamp()) // HOUR * HOUR
    virtual = [float(hour + 600)]
    clock = WallClock(lambda: virtual[0])
    flaky = [False]

    def answer(_path: str, n: int) -> web.Response | None:
        return web.Response(status=503) if flaky[0] and n == 1 else None

    receiver = Receiver(answer)
    receiver.start()
    retry = ev.RetryPolicy(max_attempts=3, base_s=1.0, max_s=1.0, jitter_ratio=0.0)
    policies = ev.Policies(
        jitter_s=JITTER_S, misfire=ev.Misfire.FIRE_ONCE, horizon_s=HORIZON_S, retry=retry
    )
    target = ev.Target(kind=ev.TargetKind.WEBHOOK, url=receiver.url(), secret_refs=(HOOK_REF,))
    planner_env.put(definition(TRIGGER, "0 * * * *", policies=policies, target=target))
    planner_env.start_thread("a", clock=lambda: virtual[0], max_skew_s=1e9)  # type: ignore[arg-type]
    wait_until(lambda: consumed(planner_env, Topic.DEFINITIONS), 60, 0.2, "definition")

    with psycopg.connect(database_url, autocommit=True) as conn:
        pschema.migrate(conn, schema)  # the read models exist before the first query
    config = DispatchEnv(planner_env.bootstrap, planner_env.prefix).config()
    dispatcher = Dispatcher(config, clock=clock, callback_port=0)
    projector = Projector(
        ProjectorConfig(
            bootstrap=planner_env.bootstrap,
            database_url=database_url,
            schema=schema,
            topic_prefix=planner_env.prefix,
            batch_ms=100,
            consumer_overrides={"session.timeout.ms": 6000, "heartbeat.interval.ms": 500},
        )
    )
    try:
        with (
            dispatching(dispatcher),
            running(projector),
            psycopg.connect(database_url, autocommit=True) as conn,
        ):
            assert dispatcher.callback_bound
            story = Story(
                planner_env, virtual, hour, receiver, HistoryQueries(conn, schema),
                dispatcher.callback_bound, policies, target, flaky,
            )  # fmt: skip
            checks = [chapter(story) for chapter in CHAPTERS]
            for check in checks:
                check()
            fires = story.fires()
            assert {f["tzdata_version"] for f in fires} == {TZ}
            assert {f["origin"] for f in fires} == {"scheduled", "manual", "backfill"}
    finally:
        receiver.stop()
