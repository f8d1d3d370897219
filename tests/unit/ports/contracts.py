"""One contract suite per port, written once and run over every adapter (APScheduler's pattern):
a backend subclasses the suite and provides its fixture (``rig``, ``clock``, ``resolver``,
``sender_rig``, ``zones``). The in-memory adapters run in
``tests/unit/ports``, the Kafka and PostgreSQL ones in ``tests/integration/ports``."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

import pytest

from horae.contracts import events as ev
from horae.contracts.codec import default_codec, encode
from horae.contracts.topics import Topic
from horae.domain.recurrence import CronSpec
from horae.domain.trigger import TriggerSpec
from horae.outbound.results import Outcome, SendResult
from horae.ports import (
    Clock,
    ConsumedRecord,
    Emit,
    Fenced,
    HttpSender,
    InputRecord,
    PartitionReader,
    ReadModelStore,
    RecordConsumer,
    Resolver,
    TopicPartitionKey,
    TransactionalLog,
    TransactionFailed,
    ZoneSource,
)
from horae.projections.rows import Batch, RecordMapper, Stage
from tests.waiting import wait_until

IN, OUT = "in", "out"  # suffixes of the two topics a log rig creates (2 partitions each)


def visible(rig: LogRig, topic: str, partition: int, n: int) -> list[Any]:
    """The committed records of ``topic[partition]`` once at least ``n`` are visible: on Kafka a
    commit's (or an abort's) markers reach the partition shortly after the call returns."""
    return wait_until(
        lambda: got if len(got := list(rig.reader.read(topic, partition))) >= n else None,
        timeout_s=30,
        message=f"fewer than {n} committed records on {topic}[{partition}]",
    )


@dataclass
class LogRig:
    """A log adapter under test: ``member(on_rewind, slot)`` builds a group member (``slot``
    names its static membership and transactional id: a member of a slot taken before fences the
    earlier one), ``produce`` writes input outside any transaction, ``abort`` writes one record
    in a transaction another producer then aborts; ``take`` calls ``consume`` until ``n`` records
    came (bounded)."""

    topics: dict[str, str]
    member: Callable[[Callable[[], None], str], TransactionalLog]
    reader: PartitionReader
    produce: Callable[[str, bytes, bytes, int], None]
    abort: Callable[[str, bytes, bytes, int], None]
    rewinds: list[int] = field(default_factory=list)
    revoked: list[TopicPartitionKey] = field(default_factory=list)

    def join(self, slot: str = "a", topic: str = IN) -> TransactionalLog:
        log = self.member(lambda: self.rewinds.append(1), slot)
        log.subscribe([self.topics[topic]], lambda _: None, self.revoked.extend)
        return log

    @staticmethod
    def take(log: TransactionalLog, n: int, attempts: int = 60) -> list[InputRecord]:
        got: list[InputRecord] = []
        for _ in range(attempts):
            got += log.consume(n - len(got), 0.5)
            if len(got) >= n:
                break
        return got


class TransactionalLogContract:
    """:class:`horae.ports.TransactionalLog` and :class:`horae.ports.PartitionReader`."""

    def test_records_and_offsets_commit_together_and_a_new_member_resumes_after_them(
        self, rig: LogRig
    ) -> None:
        for i in range(3):
            rig.produce(rig.topics[IN], b"k%d" % i, b"v%d" % i, 0)
        log = rig.join()
        got = rig.take(log, 3)
        assert [r.value() for r in got] == [b"v0", b"v1", b"v2"]
        assert [r.offset() for r in got] == [0, 1, 2]
        positions = log.positions()
        assert positions[(rig.topics[IN], 0)] == 3
        log.commit([Emit(rig.topics[OUT], b"k", b"out", 1)], positions)
        out = visible(rig, rig.topics[OUT], 1, 1)
        assert [(r.key(), r.value(), r.offset()) for r in out] == [(b"k", b"out", 0)]
        log.close()
        rig.produce(rig.topics[IN], b"k3", b"v3", 0)
        again = rig.join()
        try:
            assert [r.value() for r in rig.take(again, 1)] == [b"v3"], "resumes after the commit"
        finally:
            again.close()

    def test_a_failed_commit_leaves_nothing_rewinds_and_notifies(self, rig: LogRig) -> None:
        rig.produce(rig.topics[IN], b"a", b"1", 0)
        rig.produce(rig.topics[IN], b"b", b"2", 0)
        log = rig.join()
        try:
            assert len(rig.take(log, 2)) == 2
            good = Emit(rig.topics[OUT], b"k", b"lost", 0)
            misplaced = Emit(rig.topics[OUT], b"k", b"x", 99)  # no such partition
            with pytest.raises(TransactionFailed):
                log.commit([good, misplaced], log.positions())
            assert rig.rewinds == [1], "the owner was told to rebuild"
            assert list(rig.reader.read(rig.topics[OUT], 0)) == [], "nothing became visible"
            again = rig.take(log, 2)
            assert [r.value() for r in again] == [b"1", b"2"], "rewound to the last commit"
            log.commit([good], log.positions())
            assert [r.value() for r in visible(rig, rig.topics[OUT], 0, 1)] == [b"lost"]
        finally:
            log.close()

    def test_a_partition_revoked_mid_batch_is_read_again_from_its_commit_by_its_new_owner(
        self, rig: LogRig
    ) -> None:
        topic = rig.topics[IN]
        for p in (0, 1):
            for i in range(2):
                rig.produce(topic, b"k", b"p%d-%d" % (p, i), p)
        first = rig.join("a")
        assert len(rig.take(first, 4)) == 4, "the whole batch read, nothing committed"
        second = rig.join("b")
        try:
            by_first: list[InputRecord] = []
            by_second: list[InputRecord] = []
            for _ in range(120):  # both poll: a rebalance ends once every member rejoined
                by_first += first.consume(10, 0.25)
                by_second += second.consume(10, 0.25)
                owners = len(first.assignment()) == len(second.assignment()) == 1
                if owners and len(by_first) >= 2 and len(by_second) >= 2:
                    break
            [kept], [moved] = first.assignment(), second.assignment()
            assert moved in rig.revoked, "the owner was told"
            assert moved not in first.positions(), "a revoked partition is not committed"
            assert [(r.partition(), r.offset()) for r in by_second] == [
                (moved[1], 0),
                (moved[1], 1),
            ], "the new owner reads what the first read of it, from the committed offset"
            assert first.positions()[kept] == 2
            assert [r.offset() for r in by_first] == [0, 1], "the kept partition is read again"
            first.commit([Emit(rig.topics[OUT], b"k", b"first", 0)], first.positions())
            second.commit([], {moved: 1})
        finally:
            first.close()
            second.close()
        rig.produce(topic, b"k", b"later", moved[1])
        again = rig.join("a")
        try:
            got = rig.take(again, 2)
            assert sorted((r.partition(), r.offset()) for r in got) == sorted(
                [(moved[1], 1), (moved[1], 2)]
            ), "each partition resumes after its own owner's commit"
        finally:
            again.close()

    def test_a_member_fenced_by_a_newer_one_of_its_slot_can_no_longer_commit(
        self, rig: LogRig
    ) -> None:
        rig.produce(rig.topics[IN], b"k", b"v", 0)
        zombie = rig.join("a")
        assert len(rig.take(zombie, 1)) == 1
        newer = rig.join("a")  # the slot restarted: its transactional id fences the zombie
        try:
            zombie_out = Emit(rig.topics[OUT], b"k", b"zombie", 0)
            with pytest.raises(Fenced):
                zombie.commit([zombie_out], zombie.positions())
            with pytest.raises(Fenced):
                zombie.commit([zombie_out], {})
            assert rig.rewinds == [], "a fenced member is not rewound"
            assert [r.value() for r in rig.take(newer, 1)] == [b"v"]
            newer.commit([Emit(rig.topics[OUT], b"k", b"newer", 0)], newer.positions())
            assert [r.value() for r in visible(rig, rig.topics[OUT], 0, 1)] == [b"newer"]
        finally:
            zombie.close()
            newer.close()

    def test_aborted_records_stay_invisible_and_keep_their_offsets(self, rig: LogRig) -> None:
        out = rig.topics[OUT]
        rig.abort(out, b"k", b"aborted", 0)
        after_abort = rig.reader.end(out, 0)
        assert after_abort > 0, "an aborted record keeps its offset"
        assert list(rig.reader.read(out, 0)) == []
        rig.produce(out, b"k", b"kept", 0)
        rig.abort(out, b"k", b"aborted again", 0)
        read = visible(rig, out, 0, 1)
        assert [r.value() for r in read] == [b"kept"]
        assert (read[0].offset() or 0) >= after_abort
        assert rig.reader.end(out, 0) > (read[0].offset() or 0) + 1
        member = rig.join(topic=OUT)
        try:
            consumed = rig.take(member, 1)
            assert [r.value() for r in consumed] == [b"kept"], "read_committed"
            assert member.consume(10, 0.5) == []
            assert member.positions()[(out, 0)] > (consumed[0].offset() or 0)
        finally:
            member.close()

    def test_the_reader_reads_a_range_and_nothing_of_a_missing_partition(self, rig: LogRig) -> None:
        for i in range(5):
            rig.produce(rig.topics[IN], b"k", b"%d" % i, 1)
        values = [r.value() for r in rig.reader.read(rig.topics[IN], 1, start=1, stop=4)]
        assert values == [b"1", b"2", b"3"]
        assert [r.value() for r in rig.reader.read(rig.topics[IN], 1, start=3)] == [b"3", b"4"]
        assert list(rig.reader.read(rig.topics[IN], 0)) == []

    def test_the_reader_tells_where_a_partition_ends(self, rig: LogRig) -> None:
        assert rig.reader.end(rig.topics[IN], 0) == 0, "an empty partition ends at 0"
        for i in range(3):
            rig.produce(rig.topics[IN], b"k", b"%d" % i, 0)
        end = rig.reader.end(rig.topics[IN], 0)
        assert end >= 3
        assert list(rig.reader.read(rig.topics[IN], 0, start=end)) == []
        rig.produce(rig.topics[IN], b"k", b"later", 0)
        assert [r.value() for r in rig.reader.read(rig.topics[IN], 0, start=end)] == [b"later"]


@dataclass
class ConsumerRig:
    """A consumer adapter under test: ``consumer()`` builds one (closed by the rig at the end),
    ``produce`` writes outside any transaction, ``create_topic`` makes a topic of one partition
    (named under ``prefix``), ``commit_group`` commits an offset for the group of the next
    consumer made; ``member(group)`` builds a consumer of group ``group`` (closed by the rig),
    ``committer(consumer, slot)`` the transactional log that commits for that consumer's group,
    with the group metadata the consumer has when it is made (as the dispatcher's pump commits
    for its consumer), its transactional id ``slot``'s: a committer of a slot made later fences
    the earlier one (closed by the rig)."""

    topics: dict[str, str]
    consumer: Callable[[], RecordConsumer]
    produce: Callable[[str, bytes, bytes, int], None]
    create_topic: Callable[[str], None]
    prefix: str
    commit_group: Callable[[str, int, int], None]  # the consumers' group commits an offset
    member: Callable[[str], RecordConsumer]
    committer: Callable[[RecordConsumer, str], TransactionalLog]

    @staticmethod
    def take(c: RecordConsumer, n: int, attempts: int = 60) -> list[ConsumedRecord]:
        got: list[ConsumedRecord] = []
        for _ in range(attempts):
            got += c.consume(n - len(got), 0.5)
            if len(got) >= n:
                break
        return got

    @staticmethod
    def until_end(c: RecordConsumer, tp: TopicPartitionKey, attempts: int = 60) -> int:
        for _ in range(attempts):
            if tp in c.ends_reached():
                break
            assert c.consume(10, 0.2) == [], "nothing is left before the end"
        return c.ends_reached()[tp]


def _where(records: list[ConsumedRecord]) -> list[tuple[int | None, int | None]]:
    return [(r.partition(), r.offset()) for r in records]


class RecordConsumerContract:
    """:class:`horae.ports.RecordConsumer`."""

    def test_a_subscribed_consumer_starts_each_partition_where_its_owner_says(
        self, consumer_rig: ConsumerRig
    ) -> None:
        rig, topic = consumer_rig, consumer_rig.topics[IN]
        for p, n in ((0, 3), (1, 2)):
            for i in range(n):
                rig.produce(topic, b"k", b"%d-%d" % (p, i), p)
        assigned: list[TopicPartitionKey] = []

        def on_assign(parts: Sequence[TopicPartitionKey]) -> dict[TopicPartitionKey, int]:
            assigned.extend(parts)
            return {(topic, 0): 1}  # partition 1 is not named: its beginning

        c = rig.consumer()
        c.subscribe([topic], on_assign, lambda _: None)
        got = rig.take(c, 4)
        assert sorted(assigned) == [(topic, 0), (topic, 1)]
        assert sorted(_where(got)) == [(0, 1), (0, 2), (1, 0), (1, 1)]
        assert [r.value() for r in got if r.partition() == 0] == [b"0-1", b"0-2"], "in order"
        assert c.positions() == {(topic, 0): 3, (topic, 1): 2}
        assert sorted(c.assignment()) == [(topic, 0), (topic, 1)]
        assert all(isinstance(r.timestamp()[1], int) for r in got)
        c.close()
        c.close()

    def test_a_partition_not_named_starts_at_the_groups_commit(
        self, consumer_rig: ConsumerRig
    ) -> None:
        rig, topic = consumer_rig, consumer_rig.topics[IN]
        for i in range(3):
            rig.produce(topic, b"k", b"%d" % i, 0)
        rig.commit_group(topic, 0, 2)  # what a transactional member of its group committed
        c = rig.consumer()
        c.subscribe([topic], lambda _: None, lambda _: None)
        assert _where(rig.take(c, 1)) == [(0, 2)], "from the committed offset"
        assert c.group_metadata() is not None
        assert c.partitions(topic) == 2 and c.partitions(f"{rig.prefix}missing") is None
        c.seek_committed()
        assert _where(rig.take(c, 1)) == [(0, 2)], "back to the committed offset"

    def test_an_assigned_consumer_reads_the_partitions_named_to_their_end(
        self, consumer_rig: ConsumerRig
    ) -> None:
        rig, topic = consumer_rig, consumer_rig.topics[IN]
        for i in range(3):
            rig.produce(topic, b"k", b"%d" % i, 0)
        rig.produce(topic, b"k", b"other", 1)
        c = rig.consumer()
        c.assign({(topic, 0): None})
        assert _where(rig.take(c, 3)) == [(0, 0), (0, 1), (0, 2)]
        assert rig.until_end(c, (topic, 0)) == 3
        assert c.end(topic, 0) == 3
        assert c.assignment() == [(topic, 0)]

    def test_a_seek_reads_again_and_forgets_the_end(self, consumer_rig: ConsumerRig) -> None:
        rig, topic = consumer_rig, consumer_rig.topics[IN]
        for i in range(3):
            rig.produce(topic, b"k", b"%d" % i, 0)
        c = rig.consumer()
        c.assign({(topic, 0): 0})
        assert len(rig.take(c, 3)) == 3
        rig.until_end(c, (topic, 0))
        c.seek({(topic, 0): 1})
        assert (topic, 0) not in c.ends_reached()
        assert _where(rig.take(c, 2)) == [(0, 1), (0, 2)]

    def test_a_paused_partition_returns_nothing_until_resumed(
        self, consumer_rig: ConsumerRig
    ) -> None:
        rig, topic = consumer_rig, consumer_rig.topics[IN]
        for p in (0, 1):
            for i in range(2):
                rig.produce(topic, b"k", b"%d-%d" % (p, i), p)
        c = rig.consumer()
        c.assign({(topic, 0): 0, (topic, 1): 0})
        c.pause([(topic, 1)])
        assert _where(rig.take(c, 2)) == [(0, 0), (0, 1)]
        assert rig.until_end(c, (topic, 0)) == 2
        assert all(r.partition() == 0 for r in c.consume(10, 0.5)), "paused"
        c.resume([(topic, 1)])
        assert _where(rig.take(c, 2)) == [(1, 0), (1, 1)]

    def test_a_fenced_members_records_are_not_committed(self, consumer_rig: ConsumerRig) -> None:
        """A member whose slot restarted while it read (the newer member's committer fences
        its own) commits nothing of what it read: its commit raises ``Fenced``, no record it
        wrote is visible, the group's offsets stay at its last commit, and the group's next
        member reads those records again from there."""
        rig, topic, out = consumer_rig, consumer_rig.topics[IN], consumer_rig.topics[OUT]
        for i in range(3):
            rig.produce(topic, b"k", b"%d" % i, 0)
        zombie = rig.member("fenced")
        zombie.subscribe([topic], lambda _: None, lambda _: None)
        assert _where(rig.take(zombie, 1)) == [(0, 0)]
        old = rig.committer(zombie, "a")
        old.commit([], {(topic, 0): 1})  # committed for the group, through the log
        assert _where(rig.take(zombie, 2)) == [(0, 1), (0, 2)]
        rig.committer(zombie, "a")  # the slot restarted: its committer fences the zombie's
        with pytest.raises(Fenced):
            old.commit([Emit(out, b"k", b"zombie", 0)], {(topic, 0): 3})
        zombie.close()
        again = rig.member("fenced")
        again.subscribe([topic], lambda _: None, lambda _: None)
        assert _where(rig.take(again, 2)) == [(0, 1), (0, 2)], "from the group's last commit"
        assert again.consume(10, 0.5) == []
        written = rig.consumer()
        written.assign({(out, 0): 0})
        rig.until_end(written, (out, 0))  # fails on any record before the end: none is the zombie's

    def test_a_pattern_takes_topics_created_later(self, consumer_rig: ConsumerRig) -> None:
        rig = consumer_rig
        late = f"{rig.prefix}ev.late"
        c = rig.consumer()
        assigned: list[TopicPartitionKey] = []
        c.subscribe(
            [f"^{re.escape(rig.prefix)}ev\\..*"], lambda ps: assigned.extend(ps), lambda _: None
        )
        c.consume(10, 0.2)
        rig.create_topic(late)
        rig.produce(late, b"k", b"late", 0)
        got = rig.take(c, 1, attempts=120)
        assert [(r.topic(), r.value()) for r in got] == [(late, b"late")]
        assert (late, 0) in assigned


STORE_TOPIC = "t.audit"


def audit_batch(offsets: range, partition: int = 0) -> Batch:
    """A batch of audit entries read at ``offsets`` of ``STORE_TOPIC[partition]``."""
    mapper = RecordMapper(default_codec(), {STORE_TOPIC: Topic.AUDIT})
    batch = Batch()
    for o in offsets:
        entry = ev.AuditEntry(
            audit_id=f"a{partition}-{o}",
            tenant="acme",
            principal="tester",
            role=ev.Role.AUTHOR,
            action="backfill.request",
            at=datetime(2026, 1, 1, tzinfo=UTC),
            allowed=True,
        )
        mapper.add(batch, STORE_TOPIC, partition, o, b"acme", encode(entry), 0)
    return batch


class ReadModelStoreContract:
    """:class:`horae.ports.ReadModelStore`; the rig is the store (stage topic: ``STORE_TOPIC``)."""

    def test_rows_and_offsets_commit_together(self, rig: ReadModelStore) -> None:
        result = rig.apply(audit_batch(range(3)))
        assert result.rows == {Stage.AUDIT: 3} and result.dropped == 0
        assert rig.stored_offsets() == {(STORE_TOPIC, 0): 3}

    def test_a_replay_is_dropped_and_offsets_never_move_back(self, rig: ReadModelStore) -> None:
        rig.apply(audit_batch(range(4)))
        replay = rig.apply(audit_batch(range(2, 5)))
        assert replay.dropped == 2 and replay.rows == {Stage.AUDIT: 1}
        assert rig.stored_offsets() == {(STORE_TOPIC, 0): 5}
        rig.apply(audit_batch(range(1)))
        assert rig.stored_offsets() == {(STORE_TOPIC, 0): 5}

    def test_a_batch_without_offsets_writes_nothing(self, rig: ReadModelStore) -> None:
        assert rig.apply(Batch()).rows == {}
        assert rig.stored_offsets() == {}


# --- Clock ---------------------------------------------------------------------------------------
class ClockContract:
    """What every :class:`~horae.ports.Clock` keeps: wall time in epoch seconds, monotonic time
    that never goes back while time passes. The adapter's test class provides the fixtures
    ``clock`` and ``let_time_pass`` (moves that clock on by a little)."""

    def test_wall_time_is_epoch_seconds(self, clock: Clock) -> None:
        assert 1_500_000_000.0 < clock.now() < 4_200_000_000.0  # 2017 .. 2103

    def test_monotonic_time_never_goes_back(
        self, clock: Clock, let_time_pass: Callable[[], None]
    ) -> None:
        readings = []
        for _ in range(200):
            readings.append(clock.monotonic())
            let_time_pass()
        assert readings == sorted(readings)
        assert readings[-1] > readings[0]


# --- Resolver ------------------------------------------------------------------------------------
class ResolverContract:
    """What every :class:`~horae.ports.Resolver` keeps: a known name gives its TCP addresses as
    strings; a name that does not resolve raises ``OSError`` (never returns nothing). The
    adapter's ``resolver`` knows ``localhost`` as 127.0.0.1."""

    def test_a_known_name_gives_its_addresses(self, resolver: Resolver) -> None:
        addresses = asyncio.run(_resolve(resolver, "localhost"))
        assert "127.0.0.1" in addresses and all(isinstance(a, str) for a in addresses)

    def test_a_name_that_does_not_resolve_raises_oserror(self, resolver: Resolver) -> None:
        with pytest.raises(OSError):
            asyncio.run(_resolve(resolver, "no-such-host.invalid"))


async def _resolve(resolver: Resolver, host: str) -> list[str]:
    return list(await resolver(host, 80))


# --- ZoneSource ----------------------------------------------------------------------------------
class ZoneSourceContract:
    """What every :class:`~horae.ports.ZoneSource` keeps: the schedule of a spec names its tzdata
    release (a non-empty string, the same for every spec of one source) and gives instants
    strictly after the time asked, in order. The adapter's test class provides ``zones``."""

    def test_a_schedule_names_its_release_and_moves_forward(self, zones: ZoneSource) -> None:
        hourly = TriggerSpec(recurrence=CronSpec("0 * * * *"), zone="Europe/Paris")
        daily = TriggerSpec(recurrence=CronSpec("30 9 * * *"), zone="America/New_York")
        first, second = zones.schedule(hourly), zones.schedule(daily)
        assert isinstance(first.tzdata, str) and first.tzdata
        assert first.tzdata == second.tzdata
        t, seen = 1_800_000_000, []
        for _ in range(30):
            nxt = first.next_after(t)
            assert nxt is not None and nxt > t
            seen.append(nxt)
            t = nxt
        assert seen == sorted(set(seen))


# --- HttpSender ----------------------------------------------------------------------------------
class SenderSession(Protocol):
    """One test's sender and targets, inside the event loop that sends."""

    sender: HttpSender

    def target(self, status: int) -> str:
        """A URL whose server answers ``status``."""

    def unreachable(self) -> str:
        """A URL nothing listens at."""

    def received(self) -> list[tuple[bytes, dict[str, str]]]:
        """(body, headers) of every request the targets got, in order."""


SenderRig = Callable[[], AbstractAsyncContextManager[SenderSession]]


class HttpSenderContract:
    """What the dispatcher relies on from every :class:`~horae.ports.HttpSender`: the body and
    headers arrive as given; a 2xx is delivered, any other answer rejected with its status; a
    target that cannot be reached is a result (not sent), never an exception."""

    def test_a_2xx_is_delivered_with_the_body_and_headers(self, sender_rig: SenderRig) -> None:
        async def go() -> None:
            async with sender_rig() as s:
                headers = {"webhook-id": "k1", "content-type": "application/json"}
                result = await s.sender.send(s.target(204), b'{"n":1}', headers)
                assert result.outcome is Outcome.DELIVERED and result.status == 204
                [(body, got)] = s.received()
                assert body == b'{"n":1}'
                assert {k.lower(): v for k, v in got.items()}.items() >= headers.items()

        asyncio.run(go())

    def test_any_other_answer_is_rejected_with_its_status(self, sender_rig: SenderRig) -> None:
        async def go() -> None:
            async with sender_rig() as s:
                result = await s.sender.send(s.target(503), b"x", {})
                assert result.outcome is Outcome.REJECTED and result.status == 503
                assert result.send_result is SendResult.HTTP_ERROR

        asyncio.run(go())

    def test_an_unreachable_target_is_a_result_not_an_exception(
        self, sender_rig: SenderRig
    ) -> None:
        async def go() -> None:
            async with sender_rig() as s:
                result = await s.sender.send(s.unreachable(), b"x", {})
                assert result.outcome is Outcome.NOT_SENT and result.status is None
                assert s.received() == []

        asyncio.run(go())
