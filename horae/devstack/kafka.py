"""A single-node Apache Kafka 4 (KRaft, broker+controller) on 127.0.0.1 from Maven Central jars.

Jars: the packaged ``horae/devstack/kafka_files/pom.xml`` pins the broker's closure (its Kafka
version is overridden by ``KafkaNode.version``); ``mvn dependency:copy-dependencies`` copies it
once into ``<cache>/lib``, a per-version folder under the cache directory shared by every node.
The packaged ``server.properties.in`` and ``log4j2.properties`` are written into the node's home.
Storage is formatted once per data dir (``kafka.tools.StorageTool format --standalone``). The
broker runs detached in its own process group; its pid is in ``<home>/kafka.pid``.

Authentication and authorization are on (see ``server.properties.in``): the admin's password is
made once (``<home>/admin.password``, mode 0600); at each start the admin's SCRAM-SHA-512
credential is (re)written, so every client, the admin included, logs in with SCRAM.
"""

from __future__ import annotations

import base64
import os
import secrets
import shutil
import subprocess
import uuid
from dataclasses import dataclass, replace
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path

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
from horae.kafka.config import KafkaCredentials

ADMIN_USER = "admin"
FILES: Traversable = files("horae.devstack") / "kafka_files"
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
        path = self.home / "admin.password"
        return KafkaCredentials(ADMIN_USER, path.read_text().strip()) if path.exists() else None

    def _make_admin(self) -> KafkaCredentials:
        path = self.home / "admin.password"
        if not path.exists():
            self.home.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as out:
                out.write(secrets.token_urlsafe(24) + "\n")
        return KafkaCredentials(ADMIN_USER, path.read_text().strip())

    # ------------------------------------------------------------------------------------
    def fetch_jars(self) -> None:
        """Copy the pinned broker closure of ``version`` from Maven Central (once)."""
        marker = self.lib / ".complete"
        if marker.exists():
            return
        if shutil.which("mvn") is None:
            raise StackError(
                "Maven (`mvn`) is not installed; it fetches the Kafka jars from Maven Central. "
                "Install it (`apt-get install -y maven`) or set HORAE_KAFKA_BOOTSTRAP to a broker."
            )
        self.lib.mkdir(parents=True, exist_ok=True)
        pom = self.cache / "pom.xml"
        pom.write_text((FILES / "pom.xml").read_text())
        proc = subprocess.run(
            [
                "mvn",
                "-B",
                "-q",
                "-f",
                str(pom),
                "dependency:copy-dependencies",
                f"-Dkafka.version={self.version}",
                f"-DoutputDirectory={self.lib}",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0 or not any(self.lib.glob("kafka_2.13-*.jar")):
            raise StackError(
                "could not fetch the Kafka jars from Maven Central (is it reachable? a proxy "
                "in ~/.m2/settings.xml?). Maven said:\n" + (proc.stdout + proc.stderr)[-2000:]
            )
        marker.write_text("ok\n")

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
        self.config.write_text(
            template.format(
                port=self.port,
                cport=self.controller_port,
                data_dir=self.data_dir,
                admin_password=self._make_admin().password,
            )
        )
        self.config.chmod(0o600)  # it holds the admin's password

    def _format(self) -> None:
        if (self.data_dir / "meta.properties").exists():
            return
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        cluster_id = "H" + cluster_id[1:]  # must not start with '-'
        proc = subprocess.run(
            self._java_cmd(
                "kafka.tools.StorageTool",
                "format",
                "--standalone",
                "-t",
                cluster_id,
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

    def healthy(self) -> bool:
        if not port_open(self.port):
            return False
        admin = self.admin
        if admin is None:  # started before authentication: a plaintext listener
            return kafka_healthy(self.bootstrap, authenticate=False)
        return kafka_healthy(self.bootstrap, replace(admin, mechanism="PLAIN"))

    def _write_admin_scram(self) -> None:
        """(Re)write the admin's SCRAM credential, logged in with SASL/PLAIN (its static user)."""
        from horae.kafka.scram import upsert_scram_users

        admin = self.admin
        if admin is not None:
            plain = replace(admin, mechanism="PLAIN")
            upsert_scram_users(self.bootstrap, plain, {admin.username: admin.password})

    def start(self) -> None:
        """Start the broker unless it runs already; return when an AdminClient gets an answer."""
        if self.running_pid() is not None:
            if wait_until(self.healthy, READY_TIMEOUT_S):
                self._write_admin_scram()
                return
            raise StackError(f"Kafka is running but not answering; see {self.logs_dir}/server.log")
        require_free(self.port, "Kafka", "HORAE_DEV_KAFKA_PORT")
        require_free(
            self.controller_port, "the Kafka controller", "HORAE_DEV_KAFKA_CONTROLLER_PORT"
        )
        self.fetch_jars()
        self.home.mkdir(parents=True, exist_ok=True)
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        self._write_config()
        self._format()
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
        log_file = self.logs_dir / "server.log"
        ready = wait_while_progressing(
            lambda: proc.poll() is not None or self.healthy(),
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
        self._write_admin_scram()

    def stop(self) -> None:
        pid = self.running_pid()
        if pid is not None:
            terminate(pid, grace_s=STOP_GRACE_S)
            child = _CHILDREN.pop(pid, None)
            if child is not None:
                child.wait()
        self.pid_file.unlink(missing_ok=True)
