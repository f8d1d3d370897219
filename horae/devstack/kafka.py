"""Apache Kafka 4 (KRaft, broker+controller per node) on 127.0.0.1 from Maven Central jars: one
node (:class:`KafkaNode`) or a cluster of three (:class:`KafkaCluster`).

Jars: the packaged ``horae/devstack/kafka_files/pom.xml`` pins the broker's closure (its Kafka
version is overridden by ``KafkaNode.version``); ``mvn dependency:copy-dependencies`` copies it
once into ``<cache>/lib``, a per-version folder under the cache directory shared by every node.
The packaged ``server.properties.in`` and ``log4j2.properties`` are written into the node's home.
Storage is formatted once per data dir (``kafka.tools.StorageTool format --standalone``). The
broker runs detached in its own process group; its pid is in ``<home>/kafka.pid``.

Authentication and authorization are on (see ``server.properties.in``): the admin's password is
made once (``<home>/admin.password``, mode 0600); at each start the admin's SCRAM-SHA-512
credential is (re)written, so every client, the admin included, logs in with SCRAM.

On TLS (``tls``: a :class:`horae.devstack.tls.Material`), the client and inter-broker listener is
``SASL_SSL`` and the controller's too, with the local CA's server certificate given inline in PEM
(``ssl.keystore.type=PEM``); without it, ``SASL_PLAINTEXT``.

A cluster's nodes are each a broker and a controller (``process.roles=broker,controller``): three
JVMs instead of six on a small machine, and a quorum of three voters, so losing any one node
keeps both a controller majority and an in-sync majority of every partition
(``min.insync.replicas=2``). The voters are static (``controller.quorum.voters``; every node is
formatted with the same cluster id and no ``--standalone``).
"""

from __future__ import annotations

import base64
import functools
import os
import secrets
import shutil
import subprocess
import threading
import uuid
from dataclasses import dataclass, replace
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path

from pydantic import SecretStr

from horae.devstack import StackError
from horae.devstack.probe import kafka_healthy
from horae.devstack.procs import (
    port_open,
    read_pid,
    require_free,
    tail,
    terminate,
    wait_until,
    wait_while_progressing,
)
from horae.devstack.tls import Material, pem_property
from horae.kafka.config import KafkaCredentials
from horae.kafka.connection import KafkaConnection

ADMIN_USER = "admin"
FILES: Traversable = files("horae.devstack") / "kafka_files"


def fetch_closure(
    pom: Traversable,
    cache: Path,
    lib: Path,
    version: str,
    *,
    witness: str,
    what: str,
    instead: str = "",
) -> None:
    """Copy the dependency closure ``pom`` names at Kafka ``version`` from Maven Central into
    ``lib``, once (a ``.complete`` marker); raise :class:`StackError` saying what to do when
    Maven is missing or a jar matching ``witness`` did not arrive."""
    marker = lib / ".complete"
    if marker.exists():
        return
    if shutil.which("mvn") is None:
        raise StackError(
            f"Maven (`mvn`) is not installed; it fetches {what} from Maven Central. "
            f"Install it (`apt-get install -y maven`){instead}."
        )
    lib.mkdir(parents=True, exist_ok=True)
    local = cache / "pom.xml"
    local.write_text(pom.read_text())
    proc = subprocess.run(
        ["mvn", "-B", "-q", "-f", str(local), "dependency:copy-dependencies",
         f"-Dkafka.version={version}", f"-DoutputDirectory={lib}"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if proc.returncode != 0 or not any(lib.glob(witness)):
        raise StackError(
            f"could not fetch {what} from Maven Central (is it reachable? a proxy in "
            "~/.m2/settings.xml?). Maven said:\n" + (proc.stdout + proc.stderr)[-2000:]
        )
    marker.write_text("ok\n")


READY_TIMEOUT_S = 90.0  # without progress in the broker's log; see READY_CAP_S
READY_CAP_S = 900.0  # a data dir with many partitions loads for minutes after an unclean stop
STOP_GRACE_S = 120.0  # a clean shutdown (no log recovery at the next start) takes its time
# Brokers started by this process: kept referenced (a collected running Popen warns) and reaped.
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


@dataclass(frozen=True)
class KafkaNode:
    """One broker+controller. ``home``: its config, data, logs and pid file; ``cache``: the jars
    of Kafka ``version`` (``<cache>/lib``), fetched once and shared by nodes of that version."""

    home: Path
    port: int
    controller_port: int
    cache: Path
    version: str
    heap: str = "512m"
    node_id: int = 1
    #: (node id, controller port) of every voter of a cluster; empty: a standalone node
    voters: tuple[tuple[int, int], ...] = ()
    #: where the admin's password is kept (default ``<home>/admin.password``; a cluster's nodes
    #: share the first node's)
    admin_file: Path | None = None
    tls: Material | None = None

    @property
    def password_file(self) -> Path:
        return self.admin_file or self.home / "admin.password"

    @property
    def replication(self) -> int:
        return min(3, max(1, len(self.voters)))

    @property
    def listener(self) -> str:
        return "SASL_SSL" if self.tls is not None else "SASL_PLAINTEXT"

    def connection(self, bootstrap: str | None = None) -> KafkaConnection:
        """How a client reaches this node (or ``bootstrap``) as the admin over SASL/PLAIN
        (its static user, known before any SCRAM user), on the node's transport."""
        admin = self.admin
        tls = self.tls is not None
        if admin is None:  # started before authentication: a plaintext listener
            return KafkaConnection(bootstrap or self.bootstrap)
        return KafkaConnection(
            bootstrap or self.bootstrap,
            security_protocol="SASL_SSL" if tls else "SASL_PLAINTEXT",
            sasl_mechanism="PLAIN",
            username=admin.username,
            password=SecretStr(admin.password),
            ssl_ca_file=self.tls.ca if self.tls is not None else None,
        )

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def lib(self) -> Path:
        return self.cache / "lib"

    @property
    def data_dir(self) -> Path:
        return self.home / "data"

    @property
    def logs_dir(self) -> Path:
        return self.home / "logs"

    @property
    def pid_file(self) -> Path:
        return self.home / "kafka.pid"

    @property
    def config(self) -> Path:
        return self.home / "server.properties"

    @property
    def admin(self) -> KafkaCredentials | None:
        """The super user (SCRAM-SHA-512); None until :meth:`start` first wrote the config (a
        broker still running from before authentication: plaintext, no admin)."""
        path = self.password_file
        return KafkaCredentials(ADMIN_USER, path.read_text().strip()) if path.exists() else None

    def _make_admin(self) -> KafkaCredentials:
        path = self.password_file
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as out:
                out.write(secrets.token_urlsafe(24) + "\n")
        return KafkaCredentials(ADMIN_USER, path.read_text().strip())

    # ------------------------------------------------------------------------------------
    def fetch_jars(self) -> None:
        """Copy the pinned broker closure of ``version`` from Maven Central (once)."""
        fetch_closure(
            FILES / "pom.xml",
            self.cache,
            self.lib,
            self.version,
            witness="kafka_2.13-*.jar",
            what="the Kafka jars",
            instead=" or set HORAE_KAFKA_BOOTSTRAP to a broker",
        )

    def _java(self) -> str:
        java = shutil.which("java")
        if java is None:
            raise StackError(
                "Java is not installed; the Kafka broker needs Java 17+ "
                "(`apt-get install -y openjdk-17-jre-headless`)."
            )
        return java

    def _java_cmd(self, main: str, *args: str, heap: str = "256m") -> list[str]:
        return [
            self._java(),
            f"-Xms{heap}",
            f"-Xmx{heap}",
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.home / 'log4j2.properties'}",
            f"-Dkafka.logs.dir={self.logs_dir}",
            "-cp",
            f"{self.lib}/*",
            main,
            *args,
        ]

    def _write_config(self) -> None:
        (self.home / "log4j2.properties").write_text((FILES / "log4j2.properties").read_text())
        template = (FILES / "server.properties.in").read_text()
        if self.voters:
            voters = ",".join(f"{node}@127.0.0.1:{cport}" for node, cport in self.voters)
            quorum = f"controller.quorum.voters={voters}"
        else:
            quorum = f"controller.quorum.bootstrap.servers=127.0.0.1:{self.controller_port}"
        tls = ""
        if self.tls is not None:
            tls = "\n".join(
                (
                    "# TLS: the local CA's server certificate, inline PEM",
                    "ssl.keystore.type=PEM",
                    f"ssl.keystore.certificate.chain={pem_property(self.tls.cert)}",
                    f"ssl.keystore.key={pem_property(self.tls.key)}",
                    "ssl.truststore.type=PEM",
                    f"ssl.truststore.certificates={pem_property(self.tls.ca)}",
                    "ssl.endpoint.identification.algorithm=https",
                    "ssl.client.auth=none",
                )
            )
        replication = self.replication
        self.config.write_text(
            template.format(
                node_id=self.node_id,
                quorum=quorum,
                listener=self.listener,
                listener_lc=self.listener.lower(),
                port=self.port,
                cport=self.controller_port,
                data_dir=self.data_dir,
                admin_password=self._make_admin().password,
                replication=replication,
                min_isr=min(2, replication),
                tls=tls,
            )
        )
        self.config.chmod(0o600)  # it holds the admin's password

    def _format(self, cluster_id: str | None = None) -> None:
        if (self.data_dir / "meta.properties").exists():
            return
        standalone = [] if self.voters else ["--standalone"]
        proc = subprocess.run(
            self._java_cmd(
                "kafka.tools.StorageTool",
                "format",
                *standalone,
                "-t",
                cluster_id or new_cluster_id(),
                "-c",
                str(self.config),
            ),
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            raise StackError(
                "formatting Kafka storage failed:\n" + (proc.stdout + proc.stderr)[-2000:]
            )

    # ------------------------------------------------------------------------------------
    def running_pid(self) -> int | None:
        return read_pid(self.pid_file)

    def healthy(self, brokers: int = 1) -> bool:
        """The node answers a metadata request naming at least ``brokers`` brokers."""
        if not port_open(self.port):
            return False
        return kafka_healthy(self.bootstrap, connection=self.connection(), brokers=brokers)

    def _write_admin_scram(self, bootstrap: str | None = None) -> None:
        """(Re)write the admin's SCRAM credential, logged in with SASL/PLAIN (its static user)."""
        from horae.kafka.scram import upsert_scram_users

        admin = self.admin
        if admin is not None:
            upsert_scram_users(
                bootstrap or self.bootstrap,
                replace(admin, mechanism="PLAIN"),
                {admin.username: admin.password},
                connection=self.connection(bootstrap),
            )

    def start(self) -> None:
        """Start the broker unless it runs already; return when an AdminClient gets an answer."""
        if self.running_pid() is not None:
            if wait_until(self.healthy, READY_TIMEOUT_S):
                self._write_admin_scram()
                return
            raise StackError(f"Kafka is running but not answering; see {self.logs_dir}/server.log")
        proc = self.launch()
        self.wait_ready(proc)
        self._write_admin_scram()

    def launch(self, cluster_id: str | None = None) -> subprocess.Popen[bytes]:
        """Write the config, format the storage once, start the JVM; do not wait for it."""
        require_free(self.port, "Kafka", "HORAE_DEV_KAFKA_PORT")
        require_free(
            self.controller_port, "the Kafka controller", "HORAE_DEV_KAFKA_CONTROLLER_PORT"
        )
        self.fetch_jars()
        self.home.mkdir(parents=True, exist_ok=True)
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        self._write_config()
        self._format(cluster_id)
        out = (self.logs_dir / "stdout.log").open("ab")
        proc = subprocess.Popen(
            self._java_cmd("kafka.Kafka", str(self.config), heap=self.heap),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            cwd=self.home,
        )
        out.close()
        _CHILDREN[proc.pid] = proc
        self.pid_file.write_text(f"{proc.pid}\n")
        return proc

    def wait_ready(self, proc: subprocess.Popen[bytes], brokers: int = 1) -> None:
        """Wait until the node answers (naming ``brokers`` brokers) or exits; raise if not."""
        log_file = self.logs_dir / "server.log"
        ready = wait_while_progressing(
            lambda: proc.poll() is not None or self.healthy(brokers),
            lambda: log_file.stat().st_size if log_file.exists() else 0,
            READY_TIMEOUT_S,
            READY_CAP_S,
        )
        if not ready:
            terminate(proc.pid, grace_s=STOP_GRACE_S)
            raise StackError(
                f"Kafka did not become ready (no progress in its log for {READY_TIMEOUT_S:.0f} s,"
                f" or {READY_CAP_S:.0f} s in all); last log lines:\n" + tail(log_file)
            )
        if proc.poll() is not None:
            raise StackError(
                f"Kafka exited at start (code {proc.returncode}); last output:\n"
                + tail(self.logs_dir / "stdout.log")
            )

    def stop(self) -> None:
        pid = self.running_pid()
        if pid is not None:
            terminate(pid, grace_s=STOP_GRACE_S)
            child = _CHILDREN.pop(pid, None)
            if child is not None:
                child.wait()
        self.pid_file.unlink(missing_ok=True)


def new_cluster_id() -> str:
    """22 characters of URL-safe base64 of a UUID, never starting with ``-``."""
    cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    return "H" + cluster_id[1:]


@dataclass(frozen=True)
class KafkaCluster:
    """Three (or more) :class:`KafkaNode` s forming one KRaft cluster: each a broker and a
    controller voter; the first node's home keeps the admin's password and the cluster id."""

    nodes: tuple[KafkaNode, ...]

    @property
    def bootstrap(self) -> str:
        return ",".join(node.bootstrap for node in self.nodes)

    @property
    def admin(self) -> KafkaCredentials | None:
        return self.nodes[0].admin

    @property
    def tls(self) -> Material | None:
        return self.nodes[0].tls

    def connection(self) -> KafkaConnection:
        return self.nodes[0].connection(self.bootstrap)

    def healthy(self) -> bool:
        return any(node.healthy(len(self.nodes)) for node in self.nodes)

    def _cluster_id(self) -> str:
        path = self.nodes[0].home / "cluster.id"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(new_cluster_id() + "\n")
        return path.read_text().strip()

    def start(self) -> None:
        """Start every node not running, then wait until each answers naming every broker."""
        cluster_id = self._cluster_id()
        self.nodes[0]._make_admin()
        procs = {
            node.node_id: node.launch(cluster_id)
            for node in self.nodes
            if node.running_pid() is None
        }
        brokers = len(self.nodes)
        for node in self.nodes:
            proc = procs.get(node.node_id)
            if proc is not None:
                node.wait_ready(proc, brokers=brokers)
            elif not wait_until(functools.partial(node.healthy, brokers), READY_TIMEOUT_S):
                raise StackError(
                    f"Kafka node {node.node_id} is running but not answering; see "
                    f"{node.logs_dir}/server.log"
                )
        self.nodes[0]._write_admin_scram(self.bootstrap)

    def stop(self) -> None:
        """Stop every node at once: one by one, the last would wait for a controller majority
        that left before it (its controlled shutdown then hangs until the grace ends)."""
        threads = [threading.Thread(target=node.stop) for node in self.nodes]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def node_of(self, broker_id: int) -> KafkaNode:
        return next(node for node in self.nodes if node.node_id == broker_id)
