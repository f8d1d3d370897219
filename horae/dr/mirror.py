"""MirrorMaker 2 between the regions: Kafka's own replication tool, as a dedicated process
(``org.apache.kafka.connect.mirror.MirrorMaker``, the main class of ``connect-mirror-maker.sh``),
configured by Horae (:meth:`MirrorMaker.properties`), from the writing region to the standby.

Jars: the packaged ``horae/dr/mirror_files/pom.xml`` (``connect-mirror``,
``connect-mirror-client``, ``connect-runtime`` and their closure at the broker's Kafka version),
copied once by ``mvn dependency:copy-dependencies`` into ``<cache>/kafka/<version>/mirror/lib``, as
the broker's are (:meth:`horae.devstack.kafka.KafkaNode.fetch_jars`).

What it replicates, under the deployment's prefix (:func:`topics_pattern`): the definitions, the
accepted copy, the commands, the ledger (``fires``), the planner-state changelog, the lanes, the
attempts and outcomes, the dead letters, quarantine, audit, and the events topics of the tenants
``HORAE_DR_TENANT_EVENTS`` names (default ``*``: every tenant's). Not
the planner's snapshots (a cache whose header names offsets of the source's partitions, which are
not the standby's: the standby's planners rebuild from the changelog instead) and not its clock
probe topic. Names are kept (``IdentityReplicationPolicy``): the standby's processes run with the
very settings of the writing region's, prefix included. Consumer offsets of the planner's, the
dispatcher's and the tenants' groups are translated and written into the standby (checkpoints,
``sync.group.offsets.enabled``) every second. Records of aborted transactions stay behind (the
source consumer reads ``read_committed``); with ``eos`` the writes into the standby are
transactional with MM2's own source offsets (exactly-once source, Kafka >= 3.5). Topic configs
and ACLs are not synced by MM2: the standby gets the same catalogue, users and ACLs from Horae's
own code (:func:`horae.dr.regions.provision`).

Lag (:meth:`MirrorMaker.lag`) is measured exactly: MM2's source offsets (the Connect offsets
topic in the standby, written with the records they cover) against the source's committed
records after them.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, TopicPartition

from horae.contracts.topics import Topic, tenant_token
from horae.devstack.kafka import FILES as KAFKA_FILES
from horae.devstack.kafka import fetch_closure
from horae.devstack.private import free_ports
from horae.devstack.procs import read_pid, tail, terminate, wait_until
from horae.dr import DrError
from horae.dr.regions import Region, on

FILES: Traversable = files("horae.dr") / "mirror_files"
MAIN = "org.apache.kafka.connect.mirror.MirrorMaker"
IDENTITY = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"
READY_TIMEOUT_S = 120.0
STOP_GRACE_S = 30.0
#: counted one by one up to this many records per partition; more reads as "at least"
LAG_COUNT_CAP = 10_000


def _tenants(tenants: tuple[str, ...] | None) -> str:
    """The regex of the tenant tokens ``tenants`` names (None: every tenant's) and what follows
    them in a topic or group name (a token holds no ``.``, so ``acme`` is not ``acme2``)."""
    if tenants is None:
        return ".+"
    tokens = "|".join(re.escape(tenant_token(t)) for t in tenants) or "(?!)"
    return f"({tokens})(\\..+)?"


def topics_pattern(prefix: str, tenants: tuple[str, ...] | None = None) -> str:
    """The Java regex of the replicated topics (MM2 matches whole names): the catalogue's, and
    the events topics of ``tenants`` (None: every tenant's; ``()``: nobody's)."""
    fixed = "|".join(re.escape(t.value) for t in Topic if t is not Topic.SCHEDULE_EVENTS)
    events = re.escape(f"{Topic.SCHEDULE_EVENTS.value}.") + _tenants(tenants)
    return f"{re.escape(prefix)}({fixed}|{events})"


def groups_pattern(prefix: str, tenants: tuple[str, ...] | None = None) -> str:
    """The consumer groups whose offsets are translated: the planner's, the dispatcher's and
    the own groups of ``tenants`` (None: every tenant's; the projector keeps its offsets in
    PostgreSQL, with its rows)."""
    return f"{re.escape(prefix)}(planner|dispatcher|tenant\\.{_tenants(tenants)})"


def mirrored(name: str, prefix: str, tenants: tuple[str, ...] | None = None) -> bool:
    """Whether topic ``name`` is one MM2 replicates (:func:`topics_pattern`, in Python)."""
    return re.fullmatch(topics_pattern(prefix, tenants), name) is not None


def _escape(value: str) -> str:
    """``value`` as a Java properties file reads it back (a backslash is its escape)."""
    return value.replace("\\", "\\\\")


def _jaas(username: str, password: str) -> str:
    quoted = password.replace("\\", "\\\\").replace('"', '\\"')
    return (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{username}" password="{quoted}";'
    )


@dataclass(frozen=True)
class MirrorMaker:
    """One replication flow ``source -> target``, its process living in ``home``."""

    source: Region
    target: Region
    home: Path
    cache: Path  # <cache>/kafka/<version>/mirror
    version: str
    rest_port: int
    eos: bool = True
    heap: str = "256m"
    tenants: tuple[str, ...] | None = None  # whose events topics go (None: every tenant's)

    @property
    def lib(self) -> Path:
        return self.cache / "lib"

    @property
    def config(self) -> Path:
        return self.home / "mm2.properties"

    @property
    def pid_file(self) -> Path:
        return self.home / "mirror.pid"

    @property
    def log_file(self) -> Path:
        return self.home / "logs" / "server.log"

    @property
    def offsets_topic(self) -> str:
        """The Connect offsets topic of the flow, in the target: MM2's source offsets."""
        return f"mm2-offsets.{self.source.name}.internal"

    @property
    def prefix(self) -> str:
        return self.source.settings.topic_prefix

    # ------------------------------------------------------------------------------------
    def properties(self) -> str:
        """The MM2 configuration of this flow (it holds both admins' passwords)."""
        s, t = self.source.name, self.target.name
        lines = [
            "# MirrorMaker 2 of Horae (horae.dr.mirror): written at each start; do not edit",
            f"clusters = {s}, {t}",
        ]
        for r in (self.source, self.target):
            admin = r.admin
            lines += [
                f"{r.name}.bootstrap.servers = {r.bootstrap}",
                f"{r.name}.security.protocol = SASL_PLAINTEXT",
                f"{r.name}.sasl.mechanism = SCRAM-SHA-512",
                f"{r.name}.sasl.jaas.config = " + _escape(_jaas(admin.username, admin.password)),
            ]
        rf = "1"  # a local region is one broker
        lines += [
            f"{s}->{t}.enabled = true",
            f"{t}->{s}.enabled = false",
            f"{s}->{t}.topics = {_escape(topics_pattern(self.prefix, self.tenants))}",
            f"{s}->{t}.groups = {_escape(groups_pattern(self.prefix, self.tenants))}",
            f"replication.policy.class = {IDENTITY}",
            f"{s}.consumer.isolation.level = read_committed",
            "sync.topic.configs.enabled = false",
            "sync.topic.acls.enabled = false",
            "emit.heartbeats.enabled = false",
            "emit.checkpoints.enabled = true",
            "emit.checkpoints.interval.seconds = 1",
            "sync.group.offsets.enabled = true",
            "sync.group.offsets.interval.seconds = 1",
            "refresh.topics.interval.seconds = 5",
            "refresh.groups.interval.seconds = 5",
            "offset.lag.max = 0",
            "offset.flush.interval.ms = 1000",
            "tasks.max = 1",
            f"replication.factor = {rf}",
            f"offset-syncs.topic.replication.factor = {rf}",
            f"checkpoints.topic.replication.factor = {rf}",
            f"heartbeats.topic.replication.factor = {rf}",
            f"offset.storage.replication.factor = {rf}",
            f"config.storage.replication.factor = {rf}",
            f"status.storage.replication.factor = {rf}",
            f"{t}.offset.storage.topic = {self.offsets_topic}",
            f"{t}.config.storage.topic = mm2-configs.{s}.internal",
            f"{t}.status.storage.topic = mm2-status.{s}.internal",
        ]
        if self.eos:
            lines += [
                f"{t}.exactly.once.source.support = enabled",
                # a transaction MM2 leaves open (killed) holds back read_committed readers of
                # the standby until it times out: keep that short
                f"{t}.producer.transaction.timeout.ms = 10000",
                "dedicated.mode.enable.internal.rest = true",
                f"listeners = http://127.0.0.1:{self.rest_port}",
            ]
        return "\n".join(lines) + "\n"

    def fetch_jars(self) -> None:
        """Copy MM2's closure at ``version`` from Maven Central (once)."""
        fetch_closure(
            FILES / "pom.xml",
            self.cache,
            self.lib,
            self.version,
            witness="connect-mirror-[0-9]*.jar",
            what="MirrorMaker 2's jars",
        )

    def running_pid(self) -> int | None:
        return read_pid(self.pid_file)

    def start(self) -> None:
        """Start the flow unless it runs; return once MM2 says it started (or raise)."""
        if self.running_pid() is not None:
            return
        java = shutil.which("java")
        if java is None:
            raise DrError("Java is not installed; MirrorMaker 2 needs Java 17+")
        self.fetch_jars()
        (self.home / "logs").mkdir(parents=True, exist_ok=True)
        self.config.write_text(self.properties())
        self.config.chmod(0o600)
        log4j = self.home / "log4j2.properties"
        log4j.write_text((KAFKA_FILES / "log4j2.properties").read_text())
        self.log_file.unlink(missing_ok=True)
        command = [
            java, f"-Xms{self.heap}", f"-Xmx{self.heap}", "-XX:+UseG1GC",
            "-Djava.awt.headless=true", f"-Dlog4j2.configurationFile={log4j}",
            f"-Dkafka.logs.dir={self.home / 'logs'}", "-cp", f"{self.lib}/*", MAIN,
            str(self.config), "--clusters", self.target.name,
        ]  # fmt: skip
        with (self.home / "logs" / "stdout.log").open("ab") as out:
            proc = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True, cwd=self.home,
            )  # fmt: skip
        self.pid_file.write_text(f"{proc.pid}\n")
        _CHILDREN[proc.pid] = proc

        def started() -> bool:
            return proc.poll() is not None or "Kafka MirrorMaker started" in self._log()

        if not wait_until(started, READY_TIMEOUT_S) or proc.poll() is not None:
            self.stop()
            raise DrError(
                f"MirrorMaker 2 did not start ({self.source.name} -> {self.target.name}); last "
                f"log lines:\n{tail(self.log_file)}\n{tail(self.home / 'logs' / 'stdout.log')}"
            )

    def _log(self) -> str:
        try:
            return self.log_file.read_text(errors="replace")
        except OSError:
            return ""

    def stop(self) -> None:
        pid = self.running_pid()
        if pid is not None:
            terminate(pid, grace_s=STOP_GRACE_S)
            child = _CHILDREN.pop(pid, None)
            if child is not None:
                child.wait()
        self.pid_file.unlink(missing_ok=True)

    # --- what it replicated -----------------------------------------------------------------
    def replicated(self) -> dict[tuple[str, int], int]:
        """Per source (topic, partition): the offset the next record replicated would have in
        the source (MM2's committed source offsets, read from the target)."""
        out: dict[tuple[str, int], int] = {}
        with on(self.target):
            consumer = Consumer(
                self.target.client(
                    {"group.id": "horae-dr-status", "enable.auto.commit": False,
                     "isolation.level": "read_committed", "enable.partition.eof": True,
                     "log_level": 3}
                )
            )  # fmt: skip
            try:
                meta = consumer.list_topics(self.offsets_topic, timeout=10)
                topic = meta.topics.get(self.offsets_topic)
                if topic is None or topic.error is not None:
                    return out
                parts = [TopicPartition(self.offsets_topic, p, 0) for p in topic.partitions]
                consumer.assign(parts)
                left = {p.partition for p in parts}
                deadline = time.monotonic() + 30
                while left and time.monotonic() < deadline:
                    msg = consumer.poll(1.0)
                    if msg is None:
                        continue
                    err = msg.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            left.discard(msg.partition() or 0)
                        continue
                    _take(out, msg.key(), msg.value(), self.source.name)
            finally:
                consumer.close()
        return out

    def lag(self, replicated: dict[tuple[str, int], int] | None = None) -> dict[str, int]:
        """Committed records of each replicated source topic not yet in the target, as of the
        call: the source's ends are taken first, then MM2's offsets, and the records between
        are counted (summed over a topic's partitions; a partition counted up to
        :data:`LAG_COUNT_CAP`). Raises when the source does not answer."""
        with on(self.source):
            consumer = Consumer(
                self.source.client(
                    {"group.id": "horae-dr-status", "enable.auto.commit": False,
                     "isolation.level": "read_committed", "enable.partition.eof": True,
                     "log_level": 3}
                )
            )  # fmt: skip
            try:
                meta = consumer.list_topics(timeout=10).topics
                ends: dict[tuple[str, int], tuple[int, int]] = {}
                for name in sorted(n for n in meta if mirrored(n, self.prefix, self.tenants)):
                    for p in meta[name].partitions:
                        tp = TopicPartition(name, p)
                        low, high = consumer.get_watermark_offsets(tp, timeout=10, cached=False)
                        ends[(name, p)] = (int(low), int(high))
                done = self.replicated() if replicated is None else replicated
                lag: dict[str, int] = {}
                for (name, p), (low, high) in ends.items():
                    start = max(low, done.get((name, p), 0))
                    lag[name] = lag.get(name, 0) + _count(consumer, name, p, start, high)
                return lag
            finally:
                consumer.close()


#: MM2 processes started by this process, kept referenced and reaped at stop
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


def _take(
    out: dict[tuple[str, int], int], key: bytes | None, value: bytes | None, cluster: str
) -> None:
    """One Connect offsets record: ``["<connector>", {"cluster", "topic", "partition"}]`` ->
    ``{"offset": <last replicated source offset>}`` (a tombstone: forgotten)."""
    if key is None:
        return
    try:
        connector, part = json.loads(key)
    except (ValueError, TypeError):
        return
    if connector != "MirrorSourceConnector" or not isinstance(part, dict):
        return
    if part.get("cluster") != cluster:
        return
    where = (str(part["topic"]), int(part["partition"]))
    if value is None:
        out.pop(where, None)
        return
    out[where] = int(json.loads(value)["offset"]) + 1


def _count(consumer: Consumer, topic: str, partition: int, start: int, end: int) -> int:
    """Committed records of ``topic[partition]`` in offsets ``[start, end)`` (capped)."""
    if start >= end:
        return 0
    consumer.assign([TopicPartition(topic, partition, start)])
    count = 0
    deadline = time.monotonic() + 30
    try:
        while count < LAG_COUNT_CAP and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    break
                continue
            if (msg.offset() or 0) >= end:
                break
            count += 1
    finally:
        consumer.unassign()
    return count


def flow(
    source: Region, target: Region, home: Path, cache_dir: Path, eos: bool = True
) -> MirrorMaker:
    """The flow ``source -> target`` living in ``<home>/mirror-<source>-<target>`` (its REST
    port, for exactly-once's intra-cluster calls, chosen once and kept there), its jars under
    ``<cache_dir>/kafka/<version>/mirror``."""
    where = home / f"mirror-{source.name}-{target.name}"
    path = where / "port"
    if not path.exists():
        where.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{free_ports(1)[0]}\n")
    version = source.settings.dev.kafka_version
    cache = cache_dir / "kafka" / version / "mirror"
    tenants = source.settings.dr.events_tenants()
    return MirrorMaker(
        source, target, where, cache, version, int(path.read_text()), eos, tenants=tenants
    )
