"""The API's verification fetch (:class:`~horae.api.verification.PinnedFetch`) with the real lean
sender, the system resolver and a local server: it connects to an address the SSRF policy
approved, names the host in ``Host``, follows no redirect, reads at most 1 KiB, and fetches
nothing from an address the policy refuses (``FetchFailed`` naming the refusal)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from horae.api.verification import MAX_ANSWER_BYTES, WELL_KNOWN, FetchFailed, PinnedFetch
from horae.outbound.ssrf import AddressPolicy

ANSWERS = {
    "/ok": (200, b"the answer\n"),
    "/long": (200, b"x" * (MAX_ANSWER_BYTES * 4)),
    "/moved": (302, b""),
}


@pytest.fixture
def server() -> Iterator[tuple[int, list[tuple[str, str]]]]:
    """A local server on 127.0.0.1 (port, [(path, Host) of each request])."""
    hits: list[tuple[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append((self.path, self.headers["Host"]))
            status, body = ANSWERS.get(self.path.removeprefix(WELL_KNOWN.rstrip("/")), (404, b""))
            self.send_response(status)
            if status == 302:
                self.send_header("Location", "http://127.0.0.1:1/elsewhere")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(httpd.server_address[1]), hits
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


def fetch(url: str, allow: list[str]) -> tuple[int, bytes]:
    return asyncio.run(PinnedFetch(AddressPolicy(allow=allow))(url))


LOCAL = ["127.0.0.1/32", "::1/128"]


def test_the_approved_address_is_fetched_with_the_name_as_host(
    server: tuple[int, list[tuple[str, str]]],
) -> None:
    port, hits = server
    url = f"http://localhost:{port}{WELL_KNOWN.rstrip('/')}/ok"
    assert fetch(url, LOCAL) == (200, b"the answer\n")
    assert hits == [(f"{WELL_KNOWN.rstrip('/')}/ok", f"localhost:{port}")]


def test_no_redirect_is_followed_and_at_most_1_kib_is_read(
    server: tuple[int, list[tuple[str, str]]],
) -> None:
    port, hits = server
    base = f"http://127.0.0.1:{port}{WELL_KNOWN.rstrip('/')}"
    assert fetch(f"{base}/moved", LOCAL) == (302, b"")
    status, body = fetch(f"{base}/long", LOCAL)
    assert status == 200 and body == b"x" * MAX_ANSWER_BYTES
    assert [path for path, _ in hits] == [
        f"{WELL_KNOWN.rstrip('/')}/moved",
        f"{WELL_KNOWN.rstrip('/')}/long",
    ]


def test_an_address_the_policy_refuses_is_not_fetched(
    server: tuple[int, list[tuple[str, str]]],
) -> None:
    port, hits = server
    with pytest.raises(FetchFailed, match="refused_ssrf: loopback"):
        fetch(f"http://127.0.0.1:{port}/ok", [])
    with pytest.raises(FetchFailed, match="refused_ssrf"):
        fetch(f"http://localhost:{port}/ok", ["10.0.0.0/8"])
    with pytest.raises(FetchFailed, match="connection_error"):
        fetch("http://127.0.0.1:1/ok", LOCAL)  # approved, but nothing listens
    assert hits == []
