"""The demo's webhook receiver: a local HTTP server that checks each call's ``X-Signature`` and
prints the delivery with its idempotency key (what a tenant's endpoint would do)."""

from __future__ import annotations

import hmac
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from horae.outbound.signing import body_signature, decode_secret


class DemoReceiver:
    def __init__(self, secret: str) -> None:
        key = decode_secret(secret)
        seen: set[str] = set()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                expected = body_signature(body, key)
                valid = hmac.compare_digest(expected, self.headers.get("X-Signature", ""))
                fire_key = self.headers.get("Idempotency-Key", "?")
                again = " (again: deduplicated by key)" if fire_key in seen else ""
                seen.add(fire_key)
                print(
                    f"  delivered {fire_key}  signature {'ok' if valid else 'BAD'}{again}",
                    flush=True,
                )
                self.send_response(200 if valid else 401)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True  # a stop never waits for a call still being read
        self.server.block_on_close = False
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop serving (within the server's half-second poll); calls in progress are dropped."""
        self.server.shutdown()
        self.server.server_close()
