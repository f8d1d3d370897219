"""The contract suites over the real adapters: Kafka (``TransactionalProcessor``,
``KafkaPartitionReader``), PostgreSQL (``ProjectionStore``), both senders (aiohttp's, lean)
against a loopback server, the system resolver and the system clock. Topics live under the test's
prefix and are deleted at the end (``topic_prefix``); the schema is dropped."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager

import psycopg
import pytest
from aiohttp import web
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from horae.kafka.config import client_config
from horae.kafka.consumer import KafkaConsumer
from horae.kafka.reader import KafkaPartitionReader
from horae.kafka.txn import TransactionalProcessor, member_configs
from horae.outbound.http_sender import HttpSender as AiohttpSender
from horae.outbound.http_sender import SenderConfig
from horae.outbound.lean_http import LeanHttpSender
from horae.outbound.ssrf import AddressPolicy, system_resolver
from horae.ports import SYSTEM_CLOCK, HttpSender, RecordConsumer, Resolver, SystemClock
from horae.projections.rows import Stage
from horae.projections.store import ProjectionStore
from horae.streams.dispatcher.pump import CommitterView
from tests.net import free_ports
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
)


class TestKafkaLog(TransactionalLogContract):
    @pytest.fixture
    def rig(self, kafka_bootstrap: str, topic_prefix: str) -> Iterator[LogRig]:
        topics = {IN: f"{topic_prefix}in", OUT: f"{topic_prefix}out"}
        admin = AdminClient(client_config(kafka_bootstrap))
        for future in admin.create_topics([NewTopic(t, 2, 1) for t in topics.values()]).values():
            future.result(timeout=30)
        producer = Producer(client_config(kafka_bootstrap, {"enable.idempotence": True}))

        aborter = Producer(
            client_config(kafka_bootstrap, {"transactional.id": f"{topic_prefix}aborter"})
        )
        aborter.init_transactions(30)

        def member(on_rewind: Callable[[], None], slot: str) -> TransactionalProcessor:
            consumer_config, producer_config = member_configs(
                kafka_bootstrap, f"{topic_prefix}group", slot, 6000,
                min_poll_interval_ms=30_000, linger_ms=5,
            )  # fmt: skip
            return TransactionalProcessor(Consumer(consumer_config), producer_config, on_rewind)

        def produce(topic: str, key: bytes, value: bytes, partition: int) -> None:
            producer.produce(topic, value, key, partition)
            producer.flush(30)

        def abort(topic: str, key: bytes, value: bytes, partition: int) -> None:
            aborter.begin_transaction()
            aborter.produce(topic, value, key, partition)
            aborter.flush(30)
            aborter.abort_transaction(30)

        yield LogRig(topics, member, KafkaPartitionReader(kafka_bootstrap), produce, abort)


class TestKafkaConsumer(RecordConsumerContract):
    @pytest.fixture
    def consumer_rig(self, kafka_bootstrap: str, topic_prefix: str) -> Iterator[ConsumerRig]:
        topics = {IN: f"{topic_prefix}in", OUT: f"{topic_prefix}out"}
        admin = AdminClient(client_config(kafka_bootstrap))

        def create(names: list[str], partitions: int) -> None:
            for future in admin.create_topics([NewTopic(t, partitions, 1) for t in names]).values():
                future.result(timeout=30)

        create(list(topics.values()), 2)
        producer = Producer(client_config(kafka_bootstrap, {"enable.idempotence": True}))
        made: list[KafkaConsumer] = []
        committers: list[TransactionalProcessor] = []

        def consumer(group: str | None = None) -> KafkaConsumer:
            made.append(
                KafkaConsumer(
                    client_config(
                        kafka_bootstrap,
                        {
                            "group.id": f"{topic_prefix}{group or f'consumer-{len(made)}'}",
                            "enable.auto.commit": False,
                            "isolation.level": "read_committed",
                            "auto.offset.reset": "earliest",
                            "session.timeout.ms": 6000,
                            "fetch.wait.max.ms": 50,
                            "topic.metadata.refresh.interval.ms": 1000,
                            "log_level": 3,
                        },
                    )
                )
            )
            return made[-1]

        def produce(topic: str, key: bytes, value: bytes, partition: int) -> None:
            producer.produce(topic, value, key, partition)
            producer.flush(30)

        def commit_group(topic: str, partition: int, offset: int) -> None:
            committer = Consumer(
                client_config(kafka_bootstrap, {"group.id": f"{topic_prefix}consumer-{len(made)}"})
            )
            try:
                committer.commit(
                    offsets=[TopicPartition(topic, partition, offset)], asynchronous=False
                )
            finally:
                committer.close()

        def committer(member: RecordConsumer, slot: str) -> TransactionalProcessor:
            _, producer_config = member_configs(
                kafka_bootstrap, f"{topic_prefix}committer", slot, 6000,
                min_poll_interval_ms=30_000, linger_ms=5,
            )  # fmt: skip
            view = CommitterView(member.group_metadata())  # as the dispatcher's pump keeps it
            committers.append(TransactionalProcessor(view, producer_config))
            return committers[-1]

        try:
            yield ConsumerRig(
                topics, consumer, produce, lambda name: create([name], 1), topic_prefix,
                commit_group, consumer, committer,
            )  # fmt: skip
        finally:
            for t in committers:
                t.close()
            for c in made:
                c.close()


class TestPostgresStore(ReadModelStoreContract):
    @pytest.fixture
    def rig(self, database_url: str, unique: str) -> Iterator[ProjectionStore]:
        schema = f"ports_{unique}"
        store = ProjectionStore(database_url, schema, stage_topics={Stage.AUDIT: STORE_TOPIC})
        store.connect()
        try:
            yield store
        finally:
            store.close()
            with psycopg.connect(database_url, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


class TestSystemClock(ClockContract):
    @pytest.fixture
    def clock(self) -> SystemClock:
        return SYSTEM_CLOCK

    @pytest.fixture
    def let_time_pass(self, clock: SystemClock) -> Callable[[], None]:
        def next_tick() -> None:  # the next tick of the clock, not a sleep
            start = clock.monotonic()
            while clock.monotonic() == start:
                pass

        return next_tick


class TestSystemResolver(ResolverContract):
    @pytest.fixture
    def resolver(self) -> Resolver:
        return system_resolver


class _LocalTargets:
    """An aiohttp server on a free loopback port answering ``/<status>`` with that status; the
    real sender reaches it through an address policy that allows loopback."""

    def __init__(self, sender: HttpSender, port: int, closed_port: int) -> None:
        self.sender = sender
        self.port = port
        self.closed_port = closed_port
        self.requests: list[tuple[bytes, dict[str, str]]] = []

    def target(self, status: int) -> str:
        return f"http://127.0.0.1:{self.port}/{status}"

    def unreachable(self) -> str:
        return f"http://127.0.0.1:{self.closed_port}/"

    def received(self) -> list[tuple[bytes, dict[str, str]]]:
        return list(self.requests)


class TestAiohttpSender(HttpSenderContract):
    make: type[AiohttpSender] | type[LeanHttpSender] = AiohttpSender

    @pytest.fixture
    def sender_rig(self) -> SenderRig:
        make = self.make

        @asynccontextmanager
        async def session() -> AsyncIterator[SenderSession]:
            port, closed_port = free_ports(2)
            holder: list[_LocalTargets] = []

            async def answer(request: web.Request) -> web.Response:
                holder[0].requests.append((await request.read(), dict(request.headers)))
                return web.Response(status=int(request.match_info["status"]))

            app = web.Application()
            app.router.add_route("*", "/{status}", answer)
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", port).start()
            policy = AddressPolicy(allow=["127.0.0.1/32"])
            try:
                async with make(policy, SenderConfig(connect_timeout_s=2.0)) as sender:
                    holder.append(_LocalTargets(sender, port, closed_port))
                    yield holder[0]
            finally:
                await runner.cleanup()

        return session


class TestLeanSender(TestAiohttpSender):
    make = LeanHttpSender
