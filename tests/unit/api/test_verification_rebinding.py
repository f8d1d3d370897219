"""The verification fetch goes through the dispatcher's pinned, SSRF-checked sender: a name whose
second resolution differs (DNS rebinding) is never fetched at the other address.

Two local servers share one port, both serving the right answer: a "good" one on 127.0.0.2
(allowlisted: it plays the tenant's public host) and a "victim" on 127.0.0.1 (not allowlisted:
it plays the platform's insides). The resolver, which the test controls, answers 127.0.0.2 at
first and 127.0.0.1 ever after. Were the fetch to resolve the name itself (as an HTTP client
does), it could reach the victim and verify the host from there."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from horae.api.verification import expected_answer
from horae.outbound.ssrf import AddressPolicy
from tests.unit.api.support import Api, make_api
from tests.unit.outbound.test_rebinding import RebindingResolver, _free_port


@contextmanager
def answering(host: str, port: int, hits: list[str]) -> Iterator[None]:
    """A server on ``host:port`` that serves the right answer for ``acme`` to every challenge
    (the HMAC of the path's token with acme's webhook secret) and records each ``Host``."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(self.headers["Host"])
            token = self.path.rsplit("/", 1)[-1]
            body = expected_answer("whsec_a", "acme", self.headers["Host"], token).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def scenario(first: Sequence[str], ttl_s: float) -> tuple[dict[str, object], list[str], list[str]]:
    """Ask for a challenge for ``rebind.example``, then check it with the API's default fetch:
    (the check's answer, the good server's hits, the victim's)."""
    port = _free_port()
    good: list[str] = []
    victim: list[str] = []
    resolver = RebindingResolver(list(first), then="127.0.0.1")
    policy = AddressPolicy(allow=["127.0.0.2/32"], resolver=resolver, cache_ttl_s=ttl_s)
    api: Api = make_api(addresses=policy, pinned=True)
    h = api.headers()
    url = f"http://rebind.example:{port}/hook"
    with answering("127.0.0.1", port, victim), answering("127.0.0.2", port, good):
        made = api.client.post("/v1/targets/verifications", json={"url": url}, headers=h)
        assert made.status_code == 201, made.text
        host = made.json()["host"]
        check = api.client.post(f"/v1/targets/verifications/{host}/check", headers=h)
    assert check.status_code == 200, check.text
    return check.json(), good, victim


def test_the_approved_address_is_fetched_not_a_later_answer() -> None:
    """The policy's answer is reused (cached): the check fetches the approved address, though
    the resolver now says 127.0.0.1; Host names the host."""
    answer, good, victim = scenario(["127.0.0.2"], ttl_s=60.0)
    assert answer["state"] == "verified", answer
    assert victim == [] and len(good) == 1 and good[0].startswith("rebind.example:")


def test_a_second_resolution_elsewhere_is_refused_not_fetched() -> None:
    """No cache: the sender judges the name's new answer (127.0.0.1, not allowlisted) and refuses
    it; nothing reaches either server after the approval."""
    answer, good, victim = scenario(["127.0.0.2", "127.0.0.2"], ttl_s=0.0)
    assert answer["state"] == "failed", answer
    assert "refused_ssrf" in str(answer["detail"]) and "127.0.0.1" in str(answer["detail"])
    assert victim == [] and good == []


@pytest.mark.parametrize("ttl_s", [0.0, 60.0])
def test_an_address_never_approved_is_never_fetched(ttl_s: float) -> None:
    """The name rebinds before the check: the check's own policy step refuses it (422)."""
    port = _free_port()
    victim: list[str] = []
    resolver = RebindingResolver(["127.0.0.2"], then="127.0.0.1")
    now = [0.0]
    policy = AddressPolicy(
        allow=["127.0.0.2/32"], resolver=resolver, cache_ttl_s=ttl_s, monotonic=lambda: now[0]
    )
    api = make_api(addresses=policy, pinned=True)
    h = api.headers()
    url = f"http://rebind.example:{port}/hook"
    with answering("127.0.0.1", port, victim):
        made = api.client.post("/v1/targets/verifications", json={"url": url}, headers=h)
        assert made.status_code == 201, made.text
        now[0] += ttl_s + 1  # the approval expired: the next lookup rebinds
        check_url = f"/v1/targets/verifications/{made.json()['host']}/check"
        check = api.client.post(check_url, headers=h)
    assert check.status_code == 422 and "SSRF" in check.text, check.text
    assert victim == []
