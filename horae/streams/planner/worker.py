"""The planner process: a consumer-group member that owns partitions of the definitions and
commands topics and turns due instants into committed fire records.

Per loop iteration (about every ``tick_s``, sooner when an earlier instant becomes due):
1. consume definitions and commands (read_committed) and apply them to the owned due indexes;
2. if the clock gate is open, decide every instant due at ``now − ε``;
3. commit, in Kafka transactions, every record this produced (fire records, planner-state
   updates, accepted definitions, dispatch orders, schedule events, audit, quarantine) and the
   consumed offsets with the group metadata (KIP-447: a fenced or stale member cannot commit).
   A transaction holds at most about ``txn_max_decisions`` decisions, or what ``txn_max_s`` of
   deciding produced, so a peak streams into the ledger (its first decisions are visible, and
   handed to the dispatchers, while the rest are decided); each carries the same input offsets.

It also consumes ``outcomes`` (partition *p* of each definitions partition *p* it owns: range
assignment, co-partitioned topics) to learn when a tracked fire ended (overlap, see
:mod:`~horae.streams.planner.decide`); an outcome record that changes nothing is committed with
the next transaction, at the latest about ``tick_s`` later.

A record whose handling raises (not a Kafka error) is retried a bounded number of times, seconds
apart, then quarantined (cause ``handler-error``), while every other partition — and the held
partition's due instants — go on (:mod:`~horae.streams.planner.poison`).

State lives in Kafka only: on assignment (and after any aborted transaction) each owned partition's
index is rebuilt from the compacted planner-state changelog and the accepted definitions (both
written in the transactions that commit the input offsets), so restart, rebalance and failover
take the same path as a cold start; with snapshots on (``snapshot_changes``, the compact index) a
partition starts from its latest snapshot and replays only the changelog after it
(:mod:`~horae.streams.planner.snapshot`).

The worker does its I/O through ports (:mod:`horae.ports`): a :class:`~horae.ports.TransactionalLog`
(Kafka: :class:`~horae.kafka.txn.TransactionalProcessor`), a :class:`~horae.ports.PartitionReader`
for rebuilds, a :class:`~horae.ports.Clock` and the clock gate's
:class:`~horae.streams.planner.clock.BrokerClock`; unit tests pass the in-memory twins of
:mod:`horae.testing`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaException

from horae.contracts.grants import Grants
from horae.contracts.ingress import TenantKeys
from horae.contracts.quarantine import quarantine
from horae.contracts.routing import Router
from horae.contracts.topics import Topic
from horae.domain.trigger import Limits
from horae.failpoints import failpoint
from horae.kafka.admin import TenantTopics, admin_client
from horae.kafka.reader import KafkaPartitionReader
from horae.kafka.txn import LOOP_DEADLINE_S, HangWatch, TransactionalProcessor, member_configs
from horae.ports import (
    SYSTEM_CLOCK,
    SYSTEM_ZONES,
    Clock,
    Emit,
    Fenced,
    InputRecord,
    PartitionReader,
    TopicPartitionKey,
    TransactionalLog,
    TransactionFailed,
    ZoneSource,
)
from horae.streams.planner.clock import BrokerClock, ClockGate, KafkaBrokerClock, clock_topic
from horae.streams.planner.decide import Decider, DefinitionPending
from horae.streams.planner.index import INDEX, DueIndex
from horae.streams.planner.metrics import PlannerMetrics
from horae.streams.planner.poison import (
    ATTEMPTS,
    BACKOFF_S,
    CAUSE,
    PENDING_ATTEMPTS,
    PENDING_BACKOFF_S,
    PoisonRecords,
    failure_detail,
)
from horae.streams.planner.rebuild import GcPolicy, KeepGc, rebuild_partition
from horae.streams.planner.records import utc_datetime
from horae.streams.planner.sharing import SharedValues
from horae.streams.planner.snapshot import Snapshots, ensure_snapshot_topic, snapshot_topic

log = logging.getLogger(__name__)
#: triggers decided per call into the decider: how often a filling transaction checks its bounds
DECIDE_CHUNK = 256
#: an iteration's first transaction ends after one chunk, so a peak's first decisions are
#: visible milliseconds after its instant; each next one may be this many times larger, up to
#: ``txn_max_decisions`` / ``txn_max_s``, so a long peak pays fewer commits as it goes on
TXN_GROWTH = 2
#: the name the loop beats under (:class:`~horae.kafka.txn.HangWatch`)
LOOP = "planner loop"
#: logged when the group takes partitions away without a rebalance (session expired, fenced)
PARTITIONS_LOST = "partitions lost (session expired or fenced)"

#: makes topics exist (full names); None once they do, else why not
EnsureTopics = Callable[[Sequence[str]], str | None]


@dataclass(frozen=True)
class PlannerConfig:
    bootstrap: str
    prefix: str
    slot: str  # stable per worker slot: the transactional.id derives from it
    tick_s: float = 1.0
    epsilon_s: float = 0.0  # decide instants due at now − ε
    max_skew_s: float = 2.0
    batch_limit: int = 20_000  # most decisions per partition and iteration
    #: a transaction is committed once it holds about this many decisions, or has been filling
    #: for ``txn_max_s``, whichever first: a peak streams into the ledger (docs/performance.md)
    txn_max_decisions: int = 8_000
    txn_max_s: float = 0.2
    session_timeout_ms: int = 10_000
    tenant_keys: TenantKeys | None = None  # definition- and command-signing keys
    grants: Grants | None = None  # key roles, tenant ceilings, secret refs (None: defaults)
    min_interval_s: int = 60  # platform limit on how often a trigger may fire
    command_max_ttl_s: int = 3600  # farthest a command's expires_at may lie after it is read
    overlap_attempt_s: float = 30.0  # a running fire with no outcome counts until deadline + this
    #: snapshot a compact index after this many changelog records (see
    #: :mod:`~horae.streams.planner.snapshot`); 0: never, and every start rebuilds in full
    snapshot_changes: int = 0
    #: a record whose handling raises is tried this many times in all, the n-th retry
    #: ``record_backoff_s * 2 ** (n - 1)`` s after the failure, then quarantined ``handler-error``
    record_attempts: int = ATTEMPTS
    record_backoff_s: float = BACKOFF_S


class Planner:
    """One planner worker. ``run(stop)`` loops until ``stop`` is set. The ports default to the
    Kafka adapters built from ``config``."""

    def __init__(
        self,
        config: PlannerConfig,
        clock: Clock = SYSTEM_CLOCK,
        metrics: PlannerMetrics | None = None,
        *,
        txn: TransactionalLog | None = None,
        reader: PartitionReader | None = None,
        broker_clock: BrokerClock | None = None,
        gc: GcPolicy | None = None,
        ensure_topics: EnsureTopics | None = None,
        zones: ZoneSource = SYSTEM_ZONES,
    ) -> None:
        """``ensure_topics`` makes the events topics a newly accepted definition needs exist
        before anything is produced into them (default with Kafka:
        :class:`~horae.kafka.admin.TenantTopics`; with a given ``txn``: not checked).
        ``zones``: the time-zone database instants are computed with (default: the process's
        zoneinfo)."""
        self.config = config
        self.clock = clock
        self.metrics = metrics or PlannerMetrics()
        self.router = Router(config.prefix)
        self.decider = Decider(
            config.tenant_keys,
            Limits(min_interval_s=config.min_interval_s),
            router=self.router,
            command_max_ttl_s=config.command_max_ttl_s,
            grants=config.grants,
            shared=SharedValues(zones=zones),
            overlap_attempt_s=config.overlap_attempt_s,
        )
        self.metrics.watch_sharing(self.decider.shared)
        self.gc = gc or KeepGc()  # the planner process passes FreezeAfterRebuild
        self.indexes: dict[int, DueIndex] = {}
        self._kept: dict[int, DueIndex] = {}  # revoked, until the rebalance's assignment
        self._topics = self.router.names
        if txn is None:
            consumer_config, producer_config = member_configs(
                config.bootstrap,
                f"{config.prefix}planner",
                config.slot,
                config.session_timeout_ms,
                min_poll_interval_ms=30_000,
                linger_ms=5,
            )
            txn = TransactionalProcessor(Consumer(consumer_config), producer_config)
            admin = admin_client(config.bootstrap)
            ensure_topics = (
                ensure_topics or TenantTopics(admin, self._topics[Topic.DEFINITIONS]).ensure
            )
        self.txn = txn
        if ensure_topics is not None:
            ensure = ensure_topics
            self.decider.topics_ready = lambda d: ensure(self.router.topics_of(d))
        self.reader = reader or KafkaPartitionReader(config.bootstrap)
        self.snapshots: Snapshots | None = None
        if config.snapshot_changes > 0:
            prefix = config.prefix
            self.snapshots = Snapshots(
                self.reader,
                snapshot_topic(prefix),
                self._topics[Topic.PLANNER_STATE],
                self._topics[Topic.ACCEPTED],
                config.snapshot_changes,
                ensure_snapshot_topic(config.bootstrap, prefix) if reader is None else None,
            )
        self._snapshot_out: list[Emit] = []  # a snapshot's records, for the next transaction
        broker = broker_clock or KafkaBrokerClock(config.bootstrap, clock_topic(config.prefix))
        self.gate = ClockGate(broker, clock, config.max_skew_s)
        self._subscribed = False
        self._running = False  # inside run(): its loop is watched
        self._owed_since: float | None = None  # outcome positions not committed since then
        self.watch = HangWatch(LOOP_DEADLINE_S)  # the loop beats (a rebuild: per partition)
        self.poison = PoisonRecords(config.record_attempts, config.record_backoff_s)

    # --- group membership ----------------------------------------------------------------
    def _subscribe(self) -> None:
        self.txn.subscribe(
            [
                self._topics[Topic.DEFINITIONS],
                self._topics[Topic.COMMANDS],
                self._topics[Topic.OUTCOMES],
            ],
            on_assign=self._on_assign,
            on_revoke=self._on_revoke,
            on_lost=self._on_lost,
        )
        self._subscribed = True

    def _release(self) -> None:
        self.txn.unsubscribe()
        self._drop_snapshots(set(self.indexes))
        self.indexes.clear()
        self._kept.clear()
        self.poison.held.clear()
        self._subscribed = False
        self.metrics.partitions_owned.set(0)

    def _on_assign(self, partitions: Sequence[TopicPartitionKey]) -> None:
        numbers = sorted({p for _, p in partitions})
        kept, self._kept = self._kept, {}
        started = self.clock.monotonic()
        with self.gc.rebuilding():
            for p in numbers:
                index = kept.get(p)
                self.indexes[p] = index if index is not None else self._rebuild(p)
        self.metrics.partitions_owned.set(len(self.indexes))
        log.info(
            "assigned partitions %s: %d triggers indexed in %.2f s",
            numbers,
            sum(len(self.indexes[p]) for p in numbers),
            self.clock.monotonic() - started,
        )

    def _on_revoke(self, partitions: Sequence[TopicPartitionKey]) -> None:
        """Every batch is committed before the next poll, so a revoked index is exactly the
        committed state (nothing is pending but the positions of outcome records that changed
        nothing, read again by the next owner). It is kept until the rebalance's assignment: a
        partition this member gets straight back (no one else owned it meanwhile) is not
        rebuilt, so a member leaving costs the others only the rebuild of its own partitions."""
        for _, p in partitions:
            index = self.indexes.pop(p, None)
            if index is not None:
                self._kept[p] = index
        self._drop_snapshots({p for _, p in partitions})
        self.poison.forget({p for _, p in partitions})
        self.metrics.partitions_owned.set(len(self.indexes))

    def _on_lost(self, partitions: Sequence[TopicPartitionKey]) -> None:
        """Lost without a rebalance (session expired, fenced): others may have decided since,
        so nothing is kept."""
        for _, p in partitions:
            self.indexes.pop(p, None)
        self._kept.clear()
        self._drop_snapshots({p for _, p in partitions})
        self.poison.forget({p for _, p in partitions})
        self.metrics.partitions_owned.set(len(self.indexes))
        numbers = sorted({p for _, p in partitions})
        log.warning("%s %s: their indexes dropped", PARTITIONS_LOST, numbers)

    def _drop_snapshots(self, partitions: set[int]) -> None:
        """Partitions given up: no snapshot of theirs goes out from here (their change counts
        stay: an index kept through a rebalance goes on counting, a rebuilt one starts anew)."""
        self._snapshot_out = [e for e in self._snapshot_out if e.partition not in partitions]

    def _rebuild(self, p: int) -> DueIndex:
        if self._running:
            self.watch.beat(LOOP)
        snapshots = self.snapshots
        base = None
        if snapshots is not None and INDEX.kind == "compact":
            base = snapshots.load(p, self.decider.shared)
        index, read = rebuild_partition(
            self.reader,
            p,
            accepted_topic=self._topics[Topic.ACCEPTED],
            state_topic=self._topics[Topic.PLANNER_STATE],
            decider=self.decider,
            now=self.clock.now(),
            base=base,
        )
        if snapshots is not None:
            snapshots.rebuilt(p, read)
        if base is not None:
            log.info("partition %d: from its snapshot and %d changelog records after it", p, read)
        return index

    def _rebuild_all(self) -> None:
        with self.gc.rebuilding():
            for p in list(self.indexes):
                self.indexes[p] = self._rebuild(p)

    # --- the loop -----------------------------------------------------------------------
    def run(self, stop: threading.Event) -> None:
        self.gate.wait_first_reading()
        self._running = True
        try:
            while not stop.is_set():
                self.watch.beat(LOOP)
                self.step(stop)
        finally:
            self._running = False
            self.watch.done(LOOP)
            self.close()

    def close(self) -> None:
        self.gate.close()
        self.txn.close()

    def step(self, stop: threading.Event | None = None) -> None:
        """One iteration (see the module docstring). With the gate closed it releases the
        partitions and waits up to half a second (on ``stop``, when given)."""
        self.gate.poll()
        self.metrics.clock_offset.set(self.gate.reading.offset_s if self.gate.reading else 0.0)
        if not self.gate.open:
            if self._subscribed:
                log.error("clock gate closed (reading %s): releasing partitions", self.gate.reading)
                self.metrics.clock_gate_closed.inc()
                self._release()
            if stop is not None:
                stop.wait(min(self.config.tick_s, 0.5))
            return
        if not self._subscribed:
            self._subscribe()
        if self.poison.rewind_due(self.clock.monotonic()):
            self.txn.rewind()  # a held record's retry: it and the ones after it are read again
        records = self.txn.consume(1000, self._wait_s())
        now = self.clock.now()
        outputs: list[Emit] = self._snapshot_out
        self._snapshot_out = []
        for index in self.indexes.values():
            if index.pending:  # what a rebuild owes the log (see rebuild_partition)
                outputs.extend(index.pending)
                index.pending = []
        left: dict[TopicPartitionKey, int] = {}  # the first offset left unapplied, per partition
        spoilt: set[int] = set()  # partitions whose index a failed record may have half changed
        for record in records:
            outputs.extend(self._guarded(record, now, left, spoilt))
        decided = self._decide(now, outputs, left, spoilt)
        if decided is None:
            return  # a transaction aborted: every index was rebuilt, the iteration ends here
        outputs, total = decided
        if outputs or spoilt or self._owes_commit(records):
            self._commit_step(outputs, now, left, spoilt)
        if self.snapshots is not None and total < self.config.batch_limit:
            # every index is the committed state here; not in a burst of decisions (a peak):
            # a snapshot's records would lengthen the next commit
            self._snapshot_out = self.snapshots.owed(self.indexes)
        earliest = [d for i in self.indexes.values() if (d := i.earliest_due()) is not None]
        self.metrics.oldest_due_age.set(max(0.0, now - min(earliest)) if earliest else 0.0)

    def _decide(
        self,
        now: float,
        outputs: list[Emit],
        left: dict[TopicPartitionKey, int],
        spoilt: set[int],
    ) -> tuple[list[Emit], int] | None:
        """Decide every owned partition's due instants (up to ``batch_limit`` per partition),
        appending to ``outputs``. A transaction is committed as soon as it holds
        ``txn_max_decisions`` decisions or has been filling for ``txn_max_s`` (the first after
        one chunk, each next up to ``TXN_GROWTH`` times as large, until those bounds), so a peak
        streams into the ledger instead of waiting for its last decision; what is left is
        returned for the iteration's last commit, with the number of records decided in all.
        None when a commit aborted (the indexes were rebuilt: nothing more is decided this
        iteration)."""
        cfg = self.config
        until = now - cfg.epsilon_s
        opened, in_txn, total = self.clock.monotonic(), 0, 0
        scale = min(1.0, DECIDE_CHUNK / cfg.txn_max_decisions)  # of the bounds, growing
        for p, index in list(self.indexes.items()):
            if p in spoilt:
                continue
            budget = cfg.batch_limit
            while budget > 0:
                n = min(budget, DECIDE_CHUNK)
                chunk = self.decider.decide_due(index, until, now, n)
                if not chunk:
                    break
                outputs.extend(chunk)
                total += len(chunk)
                budget -= n
                in_txn += n
                if (
                    in_txn < scale * cfg.txn_max_decisions
                    and self.clock.monotonic() - opened < scale * cfg.txn_max_s
                ):
                    continue
                scale = min(1.0, TXN_GROWTH * scale)
                index.settle()
                if not self._commit_step(outputs, now, left, spoilt):
                    return None
                failpoint("between_transactions")  # a peak half committed
                spoilt = set()  # rebuilt and rewound with the first commit
                outputs, in_txn, opened = [], 0, self.clock.monotonic()
            index.settle()  # the iteration's entries go back into the index's representation
        return outputs, total

    def _commit_step(
        self,
        outputs: Sequence[Emit],
        now: float,
        left: dict[TopicPartitionKey, int],
        spoilt: set[int],
    ) -> bool:
        """:meth:`_commit`; then the partitions a failed record spoilt go back to the committed
        state, and are read again from there (:mod:`~.poison`)."""
        committed = self._commit(outputs, now, left)
        if spoilt and committed:
            with self.gc.rebuilding():
                for p in spoilt & set(self.indexes):
                    self.indexes[p] = self._rebuild(p)
            self.txn.rewind()
        return committed

    def _wait_s(self) -> float:
        until = self.config.tick_s
        due = [d for i in self.indexes.values() if (d := i.earliest_due()) is not None]
        if due:
            until = min(until, min(due) + self.config.epsilon_s - self.clock.now())
        retry = self.poison.next_retry()  # a held record's retry
        if retry is not None:
            until = min(until, retry - self.clock.monotonic())
        return max(0.0, until)

    def _guarded(
        self,
        record: InputRecord,
        now: float,
        left: dict[TopicPartitionKey, int],
        spoilt: set[int],
    ) -> list[Emit]:
        """:meth:`_apply` under the poison-record rule (:mod:`~.poison`): a record of a held
        topic partition, or of a partition a failed record spoilt in this iteration, is left
        unapplied (its offset in ``left``); a record whose handling raises spoils its partition
        and is held for a retry, or quarantined once it failed its last attempt."""
        tp = (record.topic() or "", record.partition() or 0)
        offset = record.offset() or 0
        at = self.clock.monotonic()
        if tp in left or tp[1] in spoilt or self.poison.blocks(tp, offset, at):
            left.setdefault(tp, offset)
            return []
        try:
            final = self.poison.last_try(tp, offset, PENDING_ATTEMPTS)
            out = self._apply(record, now, final=final)
        except DefinitionPending:  # nothing changed: held a moment (not its last try), no rebuild
            self.poison.failed(tp, offset, at, PENDING_ATTEMPTS, PENDING_BACKOFF_S)
            left.setdefault(tp, offset)
            return []
        except (KafkaException, TransactionFailed):
            raise  # the log itself failing is no poison record
        except Exception as exc:
            spoilt.add(tp[1])
            self.metrics.record_failures.labels(self._kind(tp[0])).inc()
            failures = self.poison.failed(tp, offset, at)
            where = f"{tp[0]}[{tp[1]}]@{offset}"
            if failures is not None:
                log.warning("handling %s raised (attempt %d of %d), retried: %r",
                            where, failures, self.poison.attempts, exc, exc_info=exc)  # fmt: skip
                left.setdefault(tp, offset)
                return []
            detail = failure_detail(exc, self.poison.attempts)
            log.error("handling %s raised on every attempt, quarantined: %s", where, detail)
            refused = quarantine(record, CAUSE, detail, utc_datetime(now))
            return [self.router.emit(refused, tp[1])]
        if self.poison.held:
            self.poison.succeeded(tp, offset)
        return out

    def _kind(self, topic: str) -> str:
        """The input a topic carries (a metric label)."""
        if topic == self._topics[Topic.DEFINITIONS]:
            return "definitions"
        return "outcomes" if topic == self._topics[Topic.OUTCOMES] else "commands"

    def _apply(self, record: InputRecord, now: float, *, final: bool = True) -> list[Emit]:
        """``record`` applied to its partition's index; ``final``: a command naming a trigger
        the partition does not know is refused now (else :class:`DefinitionPending`)."""
        index = self.indexes.get(record.partition() or 0)
        if index is None:
            return []
        topic = record.topic()
        if topic == self._topics[Topic.DEFINITIONS]:
            return self.decider.on_definition_record(index, record, now)
        if topic == self._topics[Topic.OUTCOMES]:
            return self.decider.on_outcome_record(index, record, now)
        return self.decider.on_command_record(index, record, now, final=final)

    def _owes_commit(self, records: Sequence[InputRecord]) -> bool:
        """Whether positions moved by records that produced nothing must be committed now: yes
        for definitions and commands; outcome records (most are outcomes of fires nobody tracks)
        wait for the next transaction, at most about ``tick_s``."""
        outcomes = self._topics[Topic.OUTCOMES]
        if any(r.topic() != outcomes for r in records):
            return True
        if records and self._owed_since is None:
            self._owed_since = self.clock.monotonic()
        since = self._owed_since
        return since is not None and self.clock.monotonic() - since >= self.config.tick_s

    def _commit(
        self,
        outputs: Sequence[Emit],
        now: float,
        left: dict[TopicPartitionKey, int] | None = None,
    ) -> bool:
        """Commit ``outputs`` with the input offsets consumed, each stopping at the first record
        ``left`` unapplied and at a held record (:mod:`~.poison`); False when aborted (every
        index rebuilt)."""
        self._owed_since = None
        offsets = self.txn.positions()
        if left or self.poison.held:
            offsets = {tp: self.poison.commit_offset(tp, o) for tp, o in offsets.items()}
            for tp, offset in (left or {}).items():
                offsets[tp] = min(offsets.get(tp, offset), offset)
        try:
            self.txn.commit(outputs, offsets)
        except Fenced:
            log.error("fenced by a newer planner of this slot: stopping")
            raise  # no commit is possible any more: the process exits
        except TransactionFailed as exc:
            self.metrics.transaction_aborts.inc()
            log.warning("transaction aborted, state rebuilt from Kafka: %s", exc)
            self._rebuild_all()
            return False
        if self.snapshots is not None:
            self.snapshots.committed(outputs)
        self.metrics.observe_committed(outputs, now)
        return True
