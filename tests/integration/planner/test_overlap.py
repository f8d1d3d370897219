"""Overlap on the real broker: a planner and a dispatcher on virtual clocks, the dispatcher really
sending to a loopback receiver that holds each call until the test lets it go. The planner learns
that a fire ended from the outcomes topic the dispatcher writes (same partition as the trigger).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

import pytest
from aiohttp import web

from horae.contracts import events as ev
from horae.contracts.codec import decode
from horae.contracts.topics import Topic
from horae.domain.keys import canonical_text
from horae.domain.overlap import CAUSE_BUFFER_FULL, CAUSE_BUFFERED, CAUSE_OVERLAP, CAUSE_REPLACED
from horae.outbound.http_sender import SenderConfig
from horae.ports import WallClock
from horae.streams.dispatcher.worker import Dispatcher
from tests.integration.dispatcher.support import DispatchEnv, Receiver
from tests.integration.planner.harness import (
    HOOK_REF,
    TENANT,
    PlannerEnv,
    consumed,
    definition,
    ledger,
    read_all,
)
from tests.waiting import wait_until

ID = "slow"
LONG = SenderConfig(read_timeout_s=120.0, deadline_s=120.0)  # held calls are not cut short


@dataclass
class HoldingReceiver(Receiver):
    """Notes each call's arrival (its fire key), then holds it until :meth:`release` lets that
    key go; then answers 200."""

    arrived: list[str] = field(default_factory=list)
    _gates: dict[str, asyncio.Event] = field(default_factory=dict)

    async def _handle(self, request: web.Request) -> web.Response:
        key = request.headers.get("Idempotency-Key", "")
        with self._lock:
            self.arrived.append(key)
        await self._gates.setdefault(key, asyncio.Event()).wait()
        return await super()._handle(request)

    def release(self, key: str) -> None:
        assert self._loop is not None
        self._loop.call_soon_threadsafe(lambda: self._gates.setdefault(key, asyncio.Event()).set())

    def got(self) -> list[str]:
        with self._lock:
            return list(self.arrived)


@dataclass
class Rig:
    env: PlannerEnv
    receiver: HoldingReceiver
    planner_time: list[float]
    dispatcher_time: list[float]
    dispatchers: list[tuple[Dispatcher, threading.Event, threading.Thread]]

    def key(self, instant: int) -> str:
        return canonical_text(TENANT, ID, instant, 0, ev.Origin.SCHEDULED)

    def start(self, overlap: ev.Overlap, **planner: object) -> None:
        target = ev.Target(
            kind=ev.TargetKind.WEBHOOK, url=self.receiver.url(), secret_refs=(HOOK_REF,)
        )
        d = definition(ID, "* * * * *", policies=ev.Policies(overlap=overlap), target=target)
        self.env.put(d)
        clock: Callable[[], float] = lambda: self.planner_time[0]  # noqa: E731
        self.env.start_thread("a", clock=clock, max_skew_s=1e9, **planner)
        wait_until(lambda: consumed(self.env, Topic.DEFINITIONS), 60, 0.2, "definition applied")
        config = replace(DispatchEnv(self.env.bootstrap, self.env.prefix).config("a"), sender=LONG)
        dispatcher = Dispatcher(config, clock=WallClock(lambda: self.dispatcher_time[0]))
        stop = threading.Event()
        thread = threading.Thread(target=dispatcher.run, args=(stop,), daemon=True)
        thread.start()
        assert dispatcher.ready.wait(60)
        self.dispatchers.append((dispatcher, stop, thread))

    def at(self, t: float, dispatcher_too: bool = True) -> None:
        self.planner_time[0] = t
        if dispatcher_too:
            self.dispatcher_time[0] = t

    def fire(self, instant: int) -> list[ev.FireRecord]:
        return [f for f in ledger(self.env) if f.fire_key == self.key(instant)]

    def outcomes(self, instant: int) -> list[ev.WorkOutcome]:
        records = read_all(self.env.bootstrap, self.env.topic(Topic.OUTCOMES))
        found = [decode(v, ev.WorkOutcome) for _, v in records if v]
        return [o for o in found if o.fire_key == self.key(instant)]

    def state(self) -> ev.PlannerState | None:
        records = read_all(self.env.bootstrap, self.env.topic(Topic.PLANNER_STATE))
        found = [decode(v, ev.PlannerState) for _, v in records if v]
        mine = [s for s in found if s.trigger_id == ID]
        return mine[-1] if mine else None

    def orders(self) -> list[ev.DispatchOrder]:
        records = read_all(self.env.bootstrap, self.env.topic(Topic.LANE_ON_TIME))
        return [decode(v, ev.DispatchOrder) for _, v in records if v]

    def events(self) -> list[ev.ScheduleEvent]:
        records = read_all(self.env.bootstrap, self.env.topic(Topic.SCHEDULE_EVENTS))
        return [decode(v, ev.ScheduleEvent) for _, v in records if v]

    def ended(self, instant: int) -> None:
        """Wait until the fire of ``instant`` has an outcome and the planner has read it."""
        wait_until(lambda: self.outcomes(instant), 60, 0.2, f"outcome of {instant}")
        wait_until(lambda: consumed(self.env, Topic.OUTCOMES), 60, 0.2, "outcomes read")


@pytest.fixture
def rig(planner_env: PlannerEnv) -> Iterator[Rig]:
    receiver = HoldingReceiver()
    receiver.start()
    v0 = float(int(time.time()) // 60 * 60 + 30)
    r = Rig(planner_env, receiver, [v0], [v0], [])
    try:
        yield r
    finally:
        for key in set(receiver.got()):
            receiver.release(key)
        for _, stop, _ in r.dispatchers:
            stop.set()
        for _, _, thread in r.dispatchers:
            thread.join(90)
        planner_env.stop_threads()
        receiver.stop()


def test_skip_records_skipped_overlap_while_the_slow_call_runs(rig: Rig) -> None:
    rig.start(ev.Overlap.SKIP)
    m1 = int(rig.planner_time[0]) // 60 * 60 + 60
    m2, m3 = m1 + 60, m1 + 120
    rig.at(m1 + 1)
    wait_until(lambda: rig.key(m1) in rig.receiver.got(), 60, 0.1, "first call held")
    rig.at(m2 + 1)
    wait_until(lambda: rig.fire(m2), 60, 0.2, "second instant decided")
    [skipped] = rig.fire(m2)
    assert (skipped.state, skipped.cause) == (ev.FireState.SKIPPED, CAUSE_OVERLAP)
    rig.receiver.release(rig.key(m1))
    rig.ended(m1)
    state = rig.state()
    assert state is not None and state.running_fire_key is None
    rig.at(m3 + 1)
    wait_until(lambda: rig.key(m3) in rig.receiver.got(), 60, 0.1, "third call")
    assert rig.receiver.got() == [rig.key(m1), rig.key(m3)], "the skipped instant was never sent"
    assert [f.state for f in rig.fire(m3)] == [ev.FireState.FIRED]
    skip_events = [e for e in rig.events() if e.type == ev.ScheduleEventType.SKIPPED.value]
    assert [(e.fire_key, e.cause) for e in skip_events] == [(rig.key(m2), CAUSE_OVERLAP)]


def test_buffer_one_releases_exactly_one_after_the_running_call_ends(rig: Rig) -> None:
    rig.start(ev.Overlap.BUFFER_ONE, overlap_attempt_s=600.0)  # only the outcome ends a fire
    m1 = int(rig.planner_time[0]) // 60 * 60 + 60
    m2, m3 = m1 + 60, m1 + 120
    rig.at(m1 + 1)
    wait_until(lambda: rig.key(m1) in rig.receiver.got(), 60, 0.1, "first call held")
    rig.at(m2 + 1)
    wait_until(
        lambda: (s := rig.state()) is not None and s.buffered_fire_key == rig.key(m2),
        60,
        0.2,
        "second instant buffered",
    )
    assert rig.fire(m2) == [] and len(rig.orders()) == 1, "held: not on the ledger, not ordered"
    rig.at(m3 + 1)
    wait_until(lambda: rig.fire(m3), 60, 0.2, "third instant decided")
    assert [(f.state, f.cause) for f in rig.fire(m3)] == [(ev.FireState.SKIPPED, CAUSE_BUFFER_FULL)]
    rig.receiver.release(rig.key(m2))  # the released fire's call is not held
    rig.receiver.release(rig.key(m1))
    wait_until(lambda: rig.key(m2) in rig.receiver.got(), 60, 0.1, "buffered fire sent")
    rig.ended(m2)
    [released] = rig.fire(m2)
    assert (released.state, released.cause) == (ev.FireState.FIRED, CAUSE_BUFFERED)
    assert rig.receiver.got() == [rig.key(m1), rig.key(m2)]
    assert [o.fire.fire_key for o in rig.orders()] == [rig.key(m1), rig.key(m2)]
    [done] = rig.outcomes(m2)
    assert done.state is ev.OutcomeState.SUCCEEDED
    state = rig.state()
    assert state is not None and (state.running_fire_key, state.buffered_fire_key) == (None, None)


def test_replace_cancels_a_queued_order_and_lets_a_started_call_finish(rig: Rig) -> None:
    rig.start(ev.Overlap.REPLACE)
    dispatcher = rig.dispatchers[0][0]
    m1 = int(rig.planner_time[0]) // 60 * 60 + 60
    m2, m3 = m1 + 60, m1 + 120
    rig.at(m1 + 1, dispatcher_too=False)  # the dispatcher's clock lags: it holds the order
    wait_until(lambda: len(dispatcher.admission) == 1, 60, 0.1, "first order held, unsent")
    rig.at(m2 + 1, dispatcher_too=False)  # m2 replaces m1
    wait_until(lambda: rig.outcomes(m1), 60, 0.2, "the replaced fire concluded")
    [cancelled] = rig.outcomes(m1)
    assert (cancelled.state, cancelled.attempts, cancelled.error) == (
        ev.OutcomeState.CANCELLED,
        0,
        CAUSE_REPLACED,
    )
    assert [(f.state, f.cause) for f in rig.fire(m1)] == [
        (ev.FireState.FIRED, None),
        (ev.FireState.REPLACED, CAUSE_REPLACED),
    ]
    rig.at(m2 + 1)  # the dispatcher catches up: m2 is sent, and held by the receiver
    wait_until(lambda: rig.key(m2) in rig.receiver.got(), 60, 0.1, "second call held")
    rig.at(m3 + 1)  # m3 replaces m2, whose call already started: it runs to its end
    wait_until(lambda: len(rig.fire(m2)) == 2, 60, 0.2, "m2 replaced")
    wait_until(lambda: rig.key(m3) in rig.receiver.got(), 60, 0.1, "third call")
    rig.receiver.release(rig.key(m2))
    rig.ended(m2)
    assert [o.state for o in rig.outcomes(m2)] == [ev.OutcomeState.SUCCEEDED]
    state = rig.state()
    assert state is not None and state.running_fire_key == rig.key(m3), "m2 no longer counts"
    rig.receiver.release(rig.key(m3))
    assert rig.key(m1) not in rig.receiver.got(), "a replaced fire not started is never sent"
    assert sorted(rig.receiver.got()) == sorted([rig.key(m2), rig.key(m3)])
    replaced = [e.fire_key for e in rig.events() if e.type == ev.ScheduleEventType.REPLACED.value]
    assert replaced == [rig.key(m1), rig.key(m2)]
    rig.ended(m3)
    state = rig.state()
    assert state is not None and state.running_fire_key is None
