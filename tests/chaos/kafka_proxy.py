"""A small TCP proxy in front of one Kafka broker that can lose the answer to a transaction's
commit. Clients bootstrap through it; the broker's address in Metadata, FindCoordinator and
DescribeCluster answers is rewritten to the proxy's, so every connection of the client (the
transaction coordinator's included) goes through it. Frames are Kafka's (4-byte size, then the
request header: api key, version, correlation id), SASL's included, so authentication passes
through untouched.

:meth:`KafkaProxy.cut_next_commit` arms it: the next ``EndTxn`` request with ``committed = true``
is forwarded to the broker, the broker's answer is read and dropped, and both connections are
closed — the commit reached the broker, its answer never reached the client.

:meth:`KafkaProxy.go_down` plays the broker's death as its clients see it: every connection is
cut and new ones are closed as soon as they are accepted, until :meth:`KafkaProxy.come_back`.
"""

from __future__ import annotations

import socket
import struct
import threading
from contextlib import suppress

from horae.kafka.config import settings_credentials

END_TXN = 26
REWRITTEN = {3, 10, 60}  # Metadata, FindCoordinator, DescribeCluster


def _read_exact(sock: socket.socket, n: int) -> bytes | None:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def _read_frame(sock: socket.socket) -> bytes | None:
    head = _read_exact(sock, 4)
    if head is None:
        return None
    (size,) = struct.unpack(">i", head)
    body = _read_exact(sock, size)
    return None if body is None else head + body


def _commits(request: bytes) -> bool:
    """True when an EndTxn request (any version) asks to commit: its last field before the tagged
    fields is the ``committed`` boolean; the flexible versions (3+) end with one empty tag byte."""
    (version,) = struct.unpack(">h", request[6:8])
    return request[-2 if version >= 3 else -1] == 1


class KafkaProxy:
    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.server.getsockname()[1])
        self._old = b"127.0.0.1" + struct.pack(">i", upstream_port)
        self._new = b"127.0.0.1" + struct.pack(">i", self.port)
        self._armed = threading.Event()
        self.cut = threading.Event()  # set once a commit's answer was dropped
        self.commits_seen = 0
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._closed = False
        self._down = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def client_env(self) -> dict[str, str]:
        """The environment of a Horae process that reaches the broker through this proxy (with
        the broker's credentials, when it authenticates)."""
        env = {"HORAE_KAFKA_BOOTSTRAP": self.bootstrap}
        creds = settings_credentials()
        if creds is not None:
            env |= {"HORAE_KAFKA_USERNAME": creds.username, "HORAE_KAFKA_PASSWORD": creds.password}
        return env

    def cut_next_commit(self) -> None:
        self.cut.clear()
        self._armed.set()

    def go_down(self) -> None:
        """Cut every connection and refuse new ones (accepted, then closed at once)."""
        self._down.set()
        with self._lock:
            self._close(*self._sockets)
            self._sockets.clear()

    def come_back(self) -> None:
        self._down.clear()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            if self._down.is_set():
                self._close(client)
                continue
            try:
                upstream = socket.create_connection(self.upstream, timeout=10)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._sockets += [client, upstream]
            pending: dict[int, int] = {}  # correlation id -> api key
            cut_id: list[int] = []
            threading.Thread(
                target=self._requests, args=(client, upstream, pending, cut_id), daemon=True
            ).start()
            threading.Thread(
                target=self._responses, args=(client, upstream, pending, cut_id), daemon=True
            ).start()

    def _requests(
        self, client: socket.socket, upstream: socket.socket, pending: dict[int, int],
        cut_id: list[int],
    ) -> None:  # fmt: skip
        try:
            while (frame := _read_frame(client)) is not None:
                key, _, correlation = struct.unpack(">hhi", frame[4:12])
                pending[correlation] = key
                if key == END_TXN and _commits(frame):
                    self.commits_seen += 1
                    if self._armed.is_set():
                        self._armed.clear()
                        cut_id.append(correlation)
                upstream.sendall(frame)
        except OSError:
            pass
        finally:
            self._close(client, upstream)

    def _responses(
        self, client: socket.socket, upstream: socket.socket, pending: dict[int, int],
        cut_id: list[int],
    ) -> None:  # fmt: skip
        try:
            while (frame := _read_frame(upstream)) is not None:
                (correlation,) = struct.unpack(">i", frame[4:8])
                key = pending.pop(correlation, None)
                if cut_id and correlation == cut_id[0]:
                    self.cut.set()  # the broker committed; the client never hears it
                    return
                if key in REWRITTEN:
                    frame = frame.replace(self._old, self._new)
                client.sendall(frame)
        except OSError:
            pass
        finally:
            self._close(client, upstream)

    def _close(self, *socks: socket.socket) -> None:
        for s in socks:
            with suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def close(self) -> None:
        self._closed = True
        self.server.close()
        with self._lock:
            self._close(*self._sockets)
