"""The contract suites over the in-memory adapters of :mod:`horae.testing`."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import pytest

from horae.domain.recurrence import CronSpec
from horae.domain.trigger import TriggerSpec
from horae.outbound.results import AttemptResult, SendResult
from horae.ports import SYSTEM_ZONES, RecordConsumer, ZoneSource
from horae.projections.rows import Stage
from horae.testing import (
    InMemoryConsumer,
    InMemoryLog,
    InMemoryReader,
    InMemoryStore,
    RecordingSender,
    ShiftedZones,
    StaticResolver,
    VirtualClock,
)
from tests.unit.ports.contracts import (
    IN,
    OUT,
    STORE_TOPIC,
    ClockContract,
    ConsumerRig,
    HttpSenderContract,
    LogRig,
    ReadModelStoreContract,
    RecordConsumerContract,
    ResolverContract,
    SenderRig,
    SenderSession,
    TransactionalLogContract,
    ZoneSourceContract,
)


class TestInMemoryLog(TransactionalLogContract):
    @pytest.fixture
    def rig(self) -> LogRig:
        shared = InMemoryLog()
        topics = {IN: "t.in", OUT: "t.out"}
        for name in topics.values():
            shared.create_topic(name, 2)

        def member(on_rewind: Callable[[], None], slot: str) -> InMemoryLog:
            return shared.member(on_rewind, transactional_id=slot)

        def produce(topic: str, key: bytes, value: bytes, partition: int) -> None:
            shared.produce(topic, key, value, partition)

        def abort(topic: str, key: bytes, value: bytes, partition: int) -> None:
            shared.produce_aborted(topic, key, value, partition)

        return LogRig(topics, member, InMemoryReader(shared), produce, abort)


class TestInMemoryConsumer(RecordConsumerContract):
    @pytest.fixture
    def consumer_rig(self) -> ConsumerRig:
        shared = InMemoryLog()
        topics = {IN: "t.in", OUT: "t.out"}
        for name in topics.values():
            shared.create_topic(name, 2)

        def produce(topic: str, key: bytes, value: bytes, partition: int) -> None:
            shared.produce(topic, key, value, partition)

        def committer(consumer: RecordConsumer, slot: str) -> InMemoryLog:
            """A member of the log's one group (every consumer's) that only commits."""
            return shared.member(transactional_id=slot)

        return ConsumerRig(
            topics, lambda: InMemoryConsumer(shared), produce,
            lambda name: shared.create_topic(name, 1), "t.",
            lambda topic, p, offset: shared.committed.__setitem__((topic, p), offset),
            lambda group: InMemoryConsumer(shared), committer,
        )  # fmt: skip


class TestInMemoryStore(ReadModelStoreContract):
    @pytest.fixture
    def rig(self) -> InMemoryStore:
        return InMemoryStore({Stage.AUDIT: STORE_TOPIC})


def test_the_in_memory_store_fails_whole() -> None:
    from tests.unit.ports.contracts import audit_batch

    store = InMemoryStore({Stage.AUDIT: STORE_TOPIC})
    store.fail_next_apply()
    with pytest.raises(RuntimeError):
        store.apply(audit_batch(range(2)))
    assert store.rows == {} and store.stored_offsets() == {}


def test_the_virtual_clock_moves_only_when_told() -> None:
    clock = VirtualClock(100.0)
    clock.advance(2.5)
    clock.jump(-10.0)
    assert (clock.now(), clock.monotonic()) == (92.5, 2.5)
    with pytest.raises(ValueError):
        clock.advance(-1.0)


def test_the_http_edge_adapters_satisfy_their_ports() -> None:
    """The real sender and resolver are the ports' adapters (checked by mypy here); the
    recording sender and static resolver answer as their ports say."""
    import asyncio

    from horae.outbound.http_sender import HttpSender as AiohttpSender
    from horae.outbound.ssrf import AddressPolicy, system_resolver
    from horae.ports import HttpSender, Resolver
    from horae.testing import RecordingSender, StaticResolver

    real: HttpSender = AiohttpSender(AddressPolicy())
    resolve: Resolver = system_resolver
    sender: HttpSender = RecordingSender()
    resolver = StaticResolver({"hooks.example": ["93.184.216.34"]})
    result = asyncio.run(sender.send("https://hooks.example/x", b"{}", {"a": "b"}))
    assert result.status == 200 and real is not None and resolve is not None
    assert asyncio.run(resolver("HOOKS.example", 443)) == ["93.184.216.34"]
    with pytest.raises(OSError):
        asyncio.run(resolver("nowhere.example", 443))


class TestVirtualClock(ClockContract):
    @pytest.fixture
    def clock(self) -> VirtualClock:
        return VirtualClock()

    @pytest.fixture
    def let_time_pass(self, clock: VirtualClock) -> Callable[[], None]:
        return lambda: clock.advance(0.001)


class TestStaticResolver(ResolverContract):
    @pytest.fixture
    def resolver(self) -> StaticResolver:
        return StaticResolver({"localhost": ["127.0.0.1"]})


UNREACHABLE = "http://unreachable.example/"


class _RecordingSession:
    """The recording sender's targets: a URL names the answer it is scripted to give."""

    def __init__(self) -> None:
        self.sender = RecordingSender(results=[])

    def target(self, status: int) -> str:
        result = SendResult.OK if 200 <= status < 300 else SendResult.HTTP_ERROR
        self.sender.results = [AttemptResult(result, status=status)]
        return f"http://target.example/{status}"

    def unreachable(self) -> str:
        self.sender.results = [AttemptResult(SendResult.CONNECTION_ERROR, detail="refused")]
        return UNREACHABLE

    def received(self) -> list[tuple[bytes, dict[str, str]]]:
        return [(r.body, r.headers) for r in self.sender.sent if r.url != UNREACHABLE]


class TestRecordingSender(HttpSenderContract):
    @pytest.fixture
    def sender_rig(self) -> SenderRig:
        @asynccontextmanager
        async def session() -> AsyncIterator[SenderSession]:
            yield _RecordingSession()

        return session


class TestSystemZones(ZoneSourceContract):
    @pytest.fixture
    def zones(self) -> ZoneSource:
        return SYSTEM_ZONES


class TestShiftedZones(ZoneSourceContract):
    @pytest.fixture
    def zones(self) -> ZoneSource:
        return ShiftedZones("2099z", 1800)


def test_shifted_zones_move_every_instant_and_name_their_release() -> None:
    spec = TriggerSpec(recurrence=CronSpec("0 * * * *"), zone="UTC")
    system, shifted = SYSTEM_ZONES.schedule(spec), ShiftedZones("2099z", 1800).schedule(spec)
    assert shifted.tzdata == "2099z" != system.tzdata
    t = 1_800_000_000  # on the hour
    assert system.next_after(t) == t + 3600 and shifted.next_after(t) == t + 1800
    assert shifted.next_after(t + 1800) == t + 5400
