"""The dispatcher process: an asyncio loop that sends, fed and committed by the Kafka thread.

``Dispatcher.run(stop)`` (blocking; ``stop`` is a :class:`threading.Event`):

1. the :class:`~.pump.Pump` thread consumes lane orders and hands them to the loop, which holds
   them in :class:`~.admission.Admission` (delayed until ``not_before``; priorities, quotas and
   shedding order there), which applies this process's share of each tenant's limits (the
   share of lane partitions it owns, handed over by the pump on every rebalance);
2. whenever a send slot is free, the next order is sent (:func:`~.deliver.attempt_once`),
   concluded (:func:`~.conclude.conclude`) and handed back to the pump, which commits its records
   with the lane offset in one transaction. Sends start at once: when orders arrive and when a
   send ends (its slot goes to the next ready order); the loop's timer only wakes for orders
   that become ready with time (``not_before``, a tenant's rate tokens). An order older than its
   ``policies.retry.max_event_age_s`` when its send would start is not sent: it is concluded
   ``expired`` (:func:`~.conclude.expired`), committed the same way;
3. an order whose partition was rewound or revoked meanwhile is dropped unsent (it is consumed
   again); a concluded attempt of such an order is discarded by the pump;
4. a cancel marker (:mod:`horae.domain.cancel`): for overlap ``replace``, the fire's first
   attempt, if still held (waiting for ``not_before`` or for a slot), is dropped unsent and
   concluded ``cancelled`` (:func:`~.conclude.cancelled`), and a fire already sent, or retrying,
   runs to its end; for a tenant's cancel, every attempt of the fire held is dropped the same
   way, and the fire key is remembered (:class:`~.cancels.Cancels`): an order of it read later is
   concluded ``cancelled`` unsent, and an attempt in flight finishes, its result kept, but is
   concluded ``cancelled`` where it would have retried;
5. an attempt that crashes inside the dispatcher (an exception out of the send path that is no
   delivery failure: a bug, an odd order) is tried again ``RETRY_INTERNAL_S`` later, the same
   order; after ``INTERNAL_TRIES`` crashes of one fire key its fire fails as an unsendable
   order does (:func:`~.deliver.crashed`): an attempt record (``not_sent`` ``unsendable``, the
   cause naming the exception), a ``failed`` outcome, ``schedule.failed`` and a DLQ entry,
   committed with the lane offset, so the lane partition moves on;
6. optional: the outcome-callback server (:mod:`.callback`) on ``callback_port``; its Kafka
   writer is built off the loop before the server starts.

Guarantee: at-least-once. A fire whose order is committed on a lane is sent until it is terminal,
and every attempt carries the same fire key; a crash at any point re-sends, never loses.
On stop: no new sends, in-flight sends finish (up to the attempt deadline), a last commit.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from typing import Protocol

from horae.contracts import events as ev
from horae.contracts.routing import Router
from horae.contracts.topics import Topic, topic_name
from horae.domain.cancel import stops_retries
from horae.outbound import AddressPolicy, HttpSender, ReplayGuard, SenderConfig
from horae.outbound.lean_http import LeanHttpSender
from horae.ports import SYSTEM_CLOCK, Clock, Resolver
from horae.ports import HttpSender as HttpSenderPort
from horae.streams.dispatcher.admission import Admission, lane_class
from horae.streams.dispatcher.callback import CallbackHandler, OutcomeWriter, start_callback_server
from horae.streams.dispatcher.cancels import Cancels
from horae.streams.dispatcher.conclude import (
    H_DLQ_CAUSE,
    Conclusion,
    cancelled,
    conclude,
    expired,
)
from horae.streams.dispatcher.config import DispatcherConfig
from horae.streams.dispatcher.deliver import attempt_once, crashed
from horae.streams.dispatcher.metrics import GAUGE_EVERY_S, DispatcherMetrics, target_class
from horae.streams.dispatcher.pump import Finished, Item, Pump
from horae.streams.dispatcher.records import Verdict

log = logging.getLogger(__name__)
_RETRY = ev.Lane.RETRY
RETRY_INTERNAL_S = 5.0  # an attempt that crashed inside the dispatcher is tried again after this
INTERNAL_TRIES = 3  # crashes of one fire key after which its fire fails (see the docstring)


def loop_factory(name: str) -> Callable[[], asyncio.AbstractEventLoop]:
    """The event loop the dispatcher sends on: ``"uvloop"`` (libuv's, docs/performance.md) unless
    it is not installed, else asyncio's own selector loop, whatever loop policy the process has
    set. The same code runs on both; ``HORAE_DISPATCHER_EVENT_LOOP=asyncio`` switches uvloop off."""
    if name == "uvloop":
        try:
            import uvloop
        except ImportError:
            log.warning("uvloop is not installed: sending on asyncio's event loop")
        else:
            factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
            return factory
    return asyncio.SelectorEventLoop


class Sender(HttpSenderPort, Protocol):
    """An HTTP sender the dispatcher opens and closes on its loop."""

    async def start(self) -> None: ...

    async def close(self) -> None: ...


def make_sender(
    name: str, policy: AddressPolicy, config: SenderConfig, clock: Callable[[], float]
) -> Sender:
    """The sender ``name`` says: ``"lean"`` (:class:`~horae.outbound.lean_http.LeanHttpSender`,
    docs/performance.md) or ``"aiohttp"`` (:class:`~horae.outbound.http_sender.HttpSender`);
    the same contract, the same tests. ``HORAE_DISPATCHER_HTTP_CLIENT=aiohttp`` switches the lean
    client off."""
    if name == "aiohttp":
        return HttpSender(policy, config, clock=clock)
    if name != "lean":
        raise ValueError(f"unknown HTTP client {name!r}: lean or aiohttp")
    return LeanHttpSender(policy, config, clock=clock)


class Dispatcher:
    """One dispatcher worker (see the module docstring)."""

    def __init__(
        self,
        config: DispatcherConfig,
        *,
        metrics: DispatcherMetrics | None = None,
        clock: Clock = SYSTEM_CLOCK,
        resolver: Resolver | None = None,
        callback_port: int | None = None,
        callback_host: str = "127.0.0.1",
    ) -> None:
        self.config = config
        self.metrics = metrics or DispatcherMetrics()
        self.clock = clock
        self.admission: Admission[Item] = Admission(config.limits, max_inflight=config.max_inflight)
        self.policy = AddressPolicy(config.allow, resolver)
        self.sender = make_sender(config.http_client, self.policy, config.sender, clock.now)
        self.replay = ReplayGuard()
        self.callback_port = callback_port
        self.callback_host = callback_host
        self.callback_bound: int | None = None  # the port actually bound (0 picks one)
        self.ready = threading.Event()  # set once the loop, sender and callback server are up
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._sending = False  # True while the loop starts sends (False again on stop)
        self._gauges_at = 0.0  # monotonic time of the next gauge refresh
        self._crashes: dict[str, int] = {}  # fire key -> attempts that crashed in a row
        self.cancels = Cancels()  # the fires a tenant cancelled (read on this loop only)
        self.router = Router(config.prefix)
        self.pump = Pump(
            config,
            self.metrics,
            self._items_from_thread,
            self._reset_from_thread,
            clock=clock,
            share=self._share_from_thread,
        )

    # --- called on the Kafka thread ------------------------------------------------------------
    def _items_from_thread(self, items: list[Item]) -> None:
        assert self._loop is not None
        self._loop.call_soon_threadsafe(self._hold, items)

    def _reset_from_thread(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._purge)

    def _share_from_thread(self, share: float) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._set_share, share)

    def _set_share(self, share: float) -> None:
        self.admission.set_share(share, self.clock.now())

    # --- the loop -------------------------------------------------------------------------------
    def run(self, stop: threading.Event) -> None:
        """Run until ``stop`` is set (blocking), on the loop ``config.event_loop`` names."""
        with asyncio.Runner(loop_factory=loop_factory(self.config.event_loop)) as runner:
            runner.run(self._main(stop))

    async def _main(self, stop: threading.Event) -> None:
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        await self.sender.start()
        runner, writer = None, None
        if self.callback_port is not None:
            topic = topic_name(Topic.OUTCOMES, self.config.prefix)
            writer = await asyncio.to_thread(OutcomeWriter, self.config.bootstrap, topic)
            handler = CallbackHandler(
                secret=self.config.callback_secret,
                clock=self.clock.now,
                replay=self.replay,
                metrics=self.metrics,
                sink=writer,
            )
            runner, self.callback_bound = await start_callback_server(
                handler, self.callback_host, self.callback_port
            )
        self.pump.start()
        self.ready.set()
        self._sending = True
        try:
            while not stop.is_set() and not self.pump.stop.is_set():
                self._fill()
                await self._sleep()
        finally:
            self._sending = False
            await self._drain()
            self.pump.stop.set()
            await asyncio.to_thread(self.pump.join)
            await self.sender.close()
            if runner is not None:
                await runner.cleanup()
            if writer is not None:
                await asyncio.to_thread(writer.close)
        if self.pump.failed is not None:  # the process exits; its supervisor restarts it
            raise self.pump.failed

    async def _sleep(self) -> None:
        assert self._wake is not None and self._loop is not None
        wait = self.admission.wake_in(self.clock.now())
        if self.admission.inflight >= self.admission.max_inflight or wait is None:
            wait = 0.1
        wait = min(max(wait, 0.001), 0.1)
        if not self._wake.is_set():
            timer = self._loop.call_later(wait, self._wake.set)
            await self._wake.wait()
            timer.cancel()
        self._wake.clear()
        now = self.clock.monotonic()
        if now >= self._gauges_at:
            self._gauges_at = now + GAUGE_EVERY_S
            self.metrics.inflight.set(self.admission.inflight)
            for klass, n in self.admission.held.items():
                self.metrics.set_held(klass.value, n)

    async def _drain(self) -> None:
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=self.config.sender.deadline_s + 1)

    def _hold(self, items: list[Item]) -> None:
        now = self.clock.now()
        for item in items:
            order = item.order
            if order.cancel is not None:
                self._cancel(item, order.cancel, now)
                continue
            if self.cancels and (cause := self.cancels.cause(order.fire.fire_key, now)):
                self._conclude_cancelled(item, cause, now)  # read after its fire's marker
                continue
            self.admission.add(
                item, order.fire.tenant, lane_class(order), order.not_before.timestamp(), now
            )
        self._fill()
        assert self._wake is not None
        self._wake.set()  # the loop's timer, for orders not ready yet

    def _cancel(self, marker: Item, cause: str, now: float) -> None:
        """Drop what the marker cancels of its fire, if held, and conclude it: a replaced fire's
        first attempt; for a tenant's cancel every attempt held, and the fire key remembered
        (:class:`~.cancels.Cancels`) so that no later attempt is sent."""
        if not self.pump.is_current(marker):
            return
        key = marker.order.fire.fire_key
        every = stops_retries(cause)
        if every:
            self.cancels.add(key, cause, now)

        def cancels(item: Item) -> bool:
            order = item.order
            if order.fire.fire_key != key:
                return False
            return every or (order.attempt == 1 and order.lane is not _RETRY)

        for item in self.admission.take(cancels, marker.order.fire.tenant):
            self._conclude_cancelled(item, cause, now)

    def _conclude_cancelled(self, item: Item, cause: str, now: float) -> None:
        """Conclude ``item`` ``cancelled``, never sent (:func:`~.conclude.cancelled`)."""
        conclusion = cancelled(
            item.order, item.carried, cause, self.router, item.partition, int(now * 1000)
        )
        self.pump.finish(Finished(item, conclusion))
        log.info("cancelled %s before sending it: %s", item.order.fire.fire_key, cause)

    def _purge(self) -> None:
        dropped = self.admission.purge(self.pump.is_current)
        if dropped:
            log.info("dropped %d held orders of rewound or revoked partitions", dropped)

    def _fill(self) -> None:
        """Start a send for every ready order a free slot admits (none once stopping)."""
        if not self._sending:
            return
        assert self._loop is not None
        now = self.clock.now()
        while (got := self.admission.pop(now)) is not None:
            item, tenant, _tier = got
            if not self.pump.is_current(item):
                self.admission.release(tenant)
                continue
            task = self._loop.create_task(self._send(item, tenant))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _send(self, item: Item, tenant: str) -> None:
        sending = True
        started_ms = int(self.clock.now() * 1000)
        try:
            order = item.order
            key = order.fire.fire_key
            if self.cancels and (cause := self.cancels.cause(key, started_ms / 1000)):
                self._conclude_cancelled(item, cause, started_ms / 1000)  # since it was popped
                return
            stale = expired(order, item.carried, self.router, item.partition, started_ms)
            if stale is not None:  # older than its max event age: concluded, never sent
                log.info("not sending %s: %s", order.fire.fire_key, stale.cause)
                self.pump.finish(Finished(item, stale))
                return
            sent = await attempt_once(order, self.config, self.sender, self.clock)
            sending = False
            self._sent(tenant)
            await asyncio.sleep(0)  # the sends it started go out before this one is concluded
            cancel = self.cancels.cause(key, self.clock.now()) if self.cancels else None
            conclusion = conclude(order, item.carried, sent, self.router, item.partition, cancel)
            result = sent.result
            self.metrics.attempt(
                result.send_result.value if result else "not_sent",
                target_class(result.status if result else None),
            )
            if order.attempt == 1 and item.carried.budget_base == 0:
                scheduled = order.fire.scheduled_at.timestamp()
                self.metrics.lateness.observe(max(0.0, sent.started_ms / 1000 - scheduled))
            if self._crashes:
                self._crashes.pop(order.fire.fire_key, None)
            self.pump.finish(Finished(item, conclusion))
        except Exception as exc:  # a bug, not a delivery failure: never lose the order
            self._crashed(item, exc, started_ms)
        finally:
            if sending:
                self._sent(tenant)

    def _crashed(self, item: Item, exc: Exception, started_ms: int) -> None:
        """An attempt of ``item`` crashed: tried again later, or, the ``INTERNAL_TRIES``-th time
        for its fire key, its fire failed with the cause (see the module docstring)."""
        order = item.order
        key = order.fire.fire_key
        tries = self._crashes.get(key, 0) + 1
        if tries < INTERNAL_TRIES:
            self._crashes[key] = tries
            log.exception("attempt of %s crashed (%d of %d); trying again in %.0f s",
                          key, tries, INTERNAL_TRIES, RETRY_INTERNAL_S)  # fmt: skip
            self._hold_later(item)
            return
        self._crashes.pop(key, None)
        log.exception("attempt of %s crashed %d times; failing its fire", key, tries)
        sent = crashed(exc, tries, started_ms, int(self.clock.now() * 1000))
        assert sent.error is not None
        try:
            conclusion = conclude(order, item.carried, sent, self.router, item.partition)
        except Exception:  # the conclusion itself fails on this order: its dead letter alone
            log.exception("the records of %s cannot be built; only its order is dead-lettered", key)
            conclusion = self._dead_letter(item, sent.error)
        self.metrics.attempt("not_sent", target_class(None))
        self.pump.finish(Finished(item, conclusion))

    def _dead_letter(self, item: Item, cause: str) -> Conclusion:
        """The last resort for an order no record can be built of: the order on the DLQ (with
        the cause) if even that can be built, else nothing; either way its offset is committed."""
        headers = [*item.carried.to_headers(), (H_DLQ_CAUSE, f"failed: {cause}"[:500].encode())]
        try:
            emit = self.router.emit(item.order, item.partition, topic=Topic.DLQ, headers=headers)
        except Exception:
            log.exception(
                "%s cannot be dead-lettered either; its offset moves on", item.order.fire.fire_key
            )
            return Conclusion(Verdict.FAILED, [], cause)
        return Conclusion(Verdict.FAILED, [emit], cause)

    def _sent(self, tenant: str) -> None:
        """A send of ``tenant`` ended: its slot goes to the next ready order."""
        self.admission.release(tenant)
        self._fill()

    def _hold_later(self, item: Item) -> None:
        order = item.order
        now = self.clock.now()
        self.admission.add(item, order.fire.tenant, lane_class(order), now + RETRY_INTERNAL_S, now)
