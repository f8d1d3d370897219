"""The soak's webhook receiver on loopback: records every call (key, ``webhook-id``, the fire key
in the body, body size, time) as a JSON line, and deduplicates by ``Idempotency-Key`` (``first``:
the first call with that key). Answers 200."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


class SoakReceiver:
    def __init__(self, log: Path) -> None:
        self.log = log
        self.seen: set[str] = set()
        self.calls = 0
        lock = threading.Lock()
        out = log.open("a")
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                key = self.headers.get("Idempotency-Key", "")
                try:
                    data: Any = json.loads(body).get("data", {})
                    body_key = data.get("fire_key") if isinstance(data, dict) else None
                    due = data.get("due_at") if isinstance(data, dict) else None
                except (ValueError, AttributeError):
                    body_key, due = None, None
                with lock:
                    first = bool(key) and key not in receiver.seen
                    receiver.seen.add(key)
                    receiver.calls += 1
                    hit = {
                        "key": key,
                        "webhook_id": self.headers.get("webhook-id", ""),
                        "body_key": body_key,
                        "due": due,
                        "bytes": len(body),
                        "t": time.time(),
                        "first": first,
                    }
                    out.write(json.dumps(hit) + "\n")
                    out.flush()
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                return

        self._out = out
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        if self._thread.is_alive():  # shutdown() waits for a serve_forever that never ran
            self.server.shutdown()
        self.server.server_close()
        self._out.close()
