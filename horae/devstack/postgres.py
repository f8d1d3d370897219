"""A throwaway PostgreSQL cluster in a project folder, on its own port, from Debian's packages.

Never the machine's system cluster: ``initdb`` creates ``<state_dir>/postgres/data`` and
``pg_ctl`` runs it on 127.0.0.1:<port> with its socket in the data folder. As root, the server
packages are installed when missing, and initdb/pg_ctl run as the ``postgres`` user (initdb
refuses root), so the folder is handed to that user.

On TLS (``tls``: the local CA's :class:`~horae.devstack.tls.Material`), the server runs with
``ssl=on`` and the CA's server certificate (its key copied into the cluster's home, mode 0600,
owned by the server's user, as PostgreSQL demands), and :attr:`PostgresCluster.url` asks for
``sslmode=verify-full`` against that CA.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from horae.devstack import StackError
from horae.devstack.probe import database_healthy
from horae.devstack.procs import alive, port_open, require_free, tail, wait_until
from horae.devstack.tls import Material

DB_USER = "horae"
DB_NAME = "horae"


def _pg_bindir() -> Path | None:
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4])
    )
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).resolve().parent if initdb else None


def _install_server() -> Path:
    if os.geteuid() != 0:
        raise StackError(
            "PostgreSQL's server is not installed and this user cannot install it. Run "
            "`sudo apt-get install -y postgresql`, or point HORAE_DATABASE_URL at a database."
        )
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", "postgresql"]):
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
        if proc.returncode != 0:
            raise StackError(
                f"installing PostgreSQL failed ({' '.join(cmd)}):\n" + proc.stderr[-1500:]
            )
    bindir = _pg_bindir()
    if bindir is None:
        raise StackError("apt-get installed postgresql but no initdb was found")
    return bindir


@dataclass(frozen=True)
class PostgresCluster:
    home: Path
    port: int
    fsync: bool = False  # the dev stack trades durability for speed; bench/compare.py does not
    tls: Material | None = None

    @property
    def data_dir(self) -> Path:
        return self.home / "data"

    @property
    def log_file(self) -> Path:
        return self.home / "postgres.log"

    @property
    def url(self) -> str:
        return self._url(DB_NAME)

    def _url(self, database: str) -> str:
        url = f"postgresql://{DB_USER}@127.0.0.1:{self.port}/{database}"
        if self.tls is not None:
            url += f"?sslmode=verify-full&sslrootcert={self.tls.ca}"
        return url

    def _ssl_options(self) -> str:
        if self.tls is None:
            return " -c ssl=off"
        key = self.home / "server.key"
        shutil.copyfile(self.tls.key, key)
        key.chmod(0o600)
        if os.geteuid() == 0:
            shutil.chown(key, "postgres", "postgres")
        return f" -c ssl=on -c ssl_cert_file={self.tls.cert} -c ssl_key_file={key}"

    def _run(self, bindir: Path, *args: str) -> subprocess.CompletedProcess[str]:
        cmd = [str(bindir / args[0]), *args[1:]]
        if os.geteuid() == 0:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        return subprocess.run(cmd, capture_output=True, text=True, check=False)

    def _bindir(self) -> Path:
        return _pg_bindir() or _install_server()

    def _prepare_dirs(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(self.home, "postgres", "postgres")
            # every parent must let the postgres user through
            for parent in self.home.parents:
                mode = parent.stat().st_mode
                if not mode & 0o001:
                    parent.chmod(mode | 0o001)

    def _initdb(self, bindir: Path) -> None:
        if (self.data_dir / "PG_VERSION").exists():
            return
        proc = self._run(
            bindir,
            "initdb",
            "-D",
            str(self.data_dir),
            "-A",
            "trust",
            "-U",
            DB_USER,
            "-E",
            "UTF8",
            "--no-locale",
        )
        if proc.returncode != 0:
            raise StackError("initdb failed:\n" + (proc.stdout + proc.stderr)[-2000:])

    def running(self) -> bool:
        return (self.data_dir / "postmaster.pid").exists() and port_open(self.port)

    def healthy(self) -> bool:
        return port_open(self.port) and database_healthy(self.url)

    def start(self) -> None:
        """Start the cluster unless it runs already; create the database; wait until it answers."""
        bindir = self._bindir()
        if not self.running():
            require_free(self.port, "PostgreSQL", "HORAE_DEV_POSTGRES_PORT")
            self._prepare_dirs()
            self._initdb(bindir)
            opts = (
                f"-p {self.port} -k {self.data_dir} -c listen_addresses=127.0.0.1 "
                f"-c fsync={'on' if self.fsync else 'off'} -c max_connections=200"
            ) + self._ssl_options()
            proc = self._run(
                bindir,
                "pg_ctl",
                "-D",
                str(self.data_dir),
                "-o",
                opts,
                "-l",
                str(self.log_file),
                "-w",
                "-t",
                "60",
                "start",
            )
            if proc.returncode != 0:
                raise StackError("PostgreSQL did not start:\n" + tail(self.log_file))
        self._create_database()
        if not wait_until(self.healthy, 30):
            raise StackError("PostgreSQL is up but refuses queries:\n" + tail(self.log_file))

    def _create_database(self) -> None:
        import psycopg

        admin = self._url("postgres")
        with psycopg.connect(admin, autocommit=True, connect_timeout=5) as conn:
            exists = conn.execute("select 1 from pg_database where datname = %s", (DB_NAME,))
            if exists.fetchone() is None:
                conn.execute(f'create database "{DB_NAME}"')

    def stop(self) -> None:
        pid_file = self.data_dir / "postmaster.pid"
        if not pid_file.exists():
            return
        first = pid_file.read_text().split("\n", 1)[0].strip()
        bindir = self._bindir()
        self._run(bindir, "pg_ctl", "-D", str(self.data_dir), "-m", "fast", "-w", "stop")
        wait_until(lambda: not port_open(self.port), 30)
        if first.isdigit():  # pg_ctl returns once the pid file is gone, the process soon after
            wait_until(lambda: not alive(int(first)), 30)
