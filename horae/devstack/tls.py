"""A throwaway certificate authority for the local stack on TLS (``horae dev up --tls``).

:func:`make_ca` writes, once per state directory, into ``<state>/tls/`` (made with the system's
``openssl``; the ``cryptography`` package is not among Horae's dependencies):

- ``ca.pem`` / ``ca.key``: a self-signed CA (``CN=Horae local stack CA``), valid 30 days;
- ``server.pem`` / ``server.key``: one server certificate signed by it for ``127.0.0.1`` and
  ``localhost`` (subjectAltName IP and DNS, serverAuth and clientAuth), shared by every broker
  and by PostgreSQL — everything listens on loopback only.

Clients trust ``ca.pem`` (``HORAE_KAFKA_SSL_CA_FILE``, ``HORAE_DATABASE_SSL_CA_FILE``) and verify
the host name. The keys are unencrypted PKCS#8 with mode 0600: this CA signs nothing but a
stack that lives on one machine and is thrown away. A material older than 20 days is made anew.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from horae.devstack import StackError

DAYS = 30
RENEW_AFTER_S = 20 * 86400


@dataclass(frozen=True)
class Material:
    """The files of a local CA and its server certificate."""

    home: Path

    @property
    def ca(self) -> Path:
        return self.home / "ca.pem"

    @property
    def ca_key(self) -> Path:
        return self.home / "ca.key"

    @property
    def cert(self) -> Path:
        return self.home / "server.pem"

    @property
    def key(self) -> Path:
        return self.home / "server.key"

    def complete(self) -> bool:
        files = (self.ca, self.ca_key, self.cert, self.key)
        return all(f.exists() for f in files) and (
            time.time() - self.ca.stat().st_mtime < RENEW_AFTER_S
        )


def _openssl(*args: str, cwd: Path) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        raise StackError(
            "openssl is not installed; `horae dev up --tls` makes its CA with it "
            "(`apt-get install -y openssl`)."
        )
    proc = subprocess.run(
        [openssl, *args], cwd=cwd, capture_output=True, text=True, check=False, timeout=60
    )
    if proc.returncode != 0:
        raise StackError(f"openssl {args[0]} failed:\n{(proc.stdout + proc.stderr)[-1500:]}")


def make_ca(home: Path) -> Material:
    """The CA and server certificate under ``home``, made when missing or old."""
    material = Material(home)
    if material.complete():
        return material
    home.mkdir(parents=True, exist_ok=True)
    home.chmod(0o755)
    (home / "server.ext").write_text(
        "basicConstraints=critical,CA:FALSE\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth,clientAuth\n"
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
    )
    days = str(DAYS)
    _openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", days,
        "-keyout", "ca.key", "-out", "ca.pem", "-subj", "/CN=Horae local stack CA",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        cwd=home,
    )  # fmt: skip
    _openssl(
        "req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
        "-subj", "/CN=127.0.0.1",
        cwd=home,
    )  # fmt: skip
    _openssl(
        "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-days", days, "-out", "server.pem", "-extfile", "server.ext",
        cwd=home,
    )  # fmt: skip
    for secret in (material.ca_key, material.key):
        secret.chmod(0o600)
    for public in (material.ca, material.cert):
        public.chmod(0o644)
    return material


def pem_property(path: Path) -> str:
    """A PEM file as one Java properties value (newlines escaped), for the broker's inline
    ``ssl.keystore.key`` / ``ssl.keystore.certificate.chain`` / ``ssl.truststore.certificates``."""
    return "\\n".join(line.strip() for line in path.read_text().strip().splitlines())
