"""The file adapter of the OIDC key port (:class:`~horae.outbound.oidc.OidcKeys`): one directory,
``HORAE_OIDC_KEYS_DIR``.

- ``keys.json``: the public set, ``{"keys": [{"kid", "alg", "activates_at", "jwk"}]}`` — all the
  API needs (mount only this file there);
- ``<kid>.pem``: each key's private key (PKCS#8, mode 0600) — the dispatcher's mount.

:meth:`OidcKeyFiles.rotate` (``horae oidc rotate``) writes the new private key first, then the
set (a temporary file renamed over the old one, so a reader sees the old set or the new, never
half of one), then deletes the private keys of the keys it dropped. Readers look at
``keys.json`` again at most once a second and re-read it when it changed, so a rotation reaches
running dispatchers and APIs without a restart.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from horae.outbound.oidc import ALG, KeySet, PublicKey, new_key

SET_FILE = "keys.json"
RECHECK_S = 1.0


def _parse(text: str) -> KeySet:
    raw = json.loads(text)
    keys = [
        PublicKey(
            kid=str(k["kid"]),
            activates_at=int(k["activates_at"]),
            jwk={str(n): str(v) for n, v in k["jwk"].items()},
            alg=str(k.get("alg", ALG)),
        )
        for k in raw.get("keys", [])
    ]
    return KeySet(tuple(sorted(keys, key=lambda k: k.activates_at)))


def _dump(keys: KeySet) -> str:
    listed = [
        {"kid": k.kid, "alg": k.alg, "activates_at": k.activates_at, "jwk": dict(k.jwk)}
        for k in keys.keys
    ]
    return json.dumps({"keys": listed}, indent=2, sort_keys=True) + "\n"


class OidcKeyFiles:
    """:class:`~horae.outbound.oidc.OidcKeys` over a directory (see the module docstring)."""

    def __init__(self, directory: Path, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.directory = Path(directory)
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._checked = -RECHECK_S
        self._stamp: tuple[int, int, int] | None = None
        self._keys = KeySet()

    @property
    def set_path(self) -> Path:
        return self.directory / SET_FILE

    def key_set(self) -> KeySet:
        with self._lock:
            now = self._monotonic()
            if now - self._checked < RECHECK_S:
                return self._keys
            self._checked = now
            try:
                st = self.set_path.stat()
            except FileNotFoundError:
                self._stamp, self._keys = None, KeySet()
                return self._keys
            stamp = (st.st_ino, st.st_mtime_ns, st.st_size)  # a rename: a new inode
            if stamp != self._stamp:
                self._keys = _parse(self.set_path.read_text())
                self._stamp = stamp
            return self._keys

    def private_key(self, kid: str) -> bytes | None:
        if "/" in kid or kid.startswith("."):
            return None
        try:
            return (self.directory / f"{kid}.pem").read_bytes()
        except FileNotFoundError:
            return None

    def rotate(self, now: float, lead_s: int, skew_s: int) -> PublicKey:
        self.directory.mkdir(parents=True, exist_ok=True)
        current = _parse(self.set_path.read_text()) if self.set_path.exists() else KeySet()
        key, pem = new_key(int(now) + lead_s)
        grown = current.with_key(key, now, skew_s)
        private = self.directory / f"{key.kid}.pem"
        fd = os.open(private, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(pem)
        tmp = self.directory / f".{SET_FILE}.tmp"
        tmp.write_text(_dump(grown))
        os.replace(tmp, self.set_path)
        kept = {k.kid for k in grown.keys}
        for old in current.keys:
            if old.kid not in kept:
                (self.directory / f"{old.kid}.pem").unlink(missing_ok=True)
        with self._lock:
            self._checked = -RECHECK_S  # this process sees its own rotation at once
        return key
