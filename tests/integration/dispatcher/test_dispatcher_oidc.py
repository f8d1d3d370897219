"""Identity tokens end to end: a real dispatcher on the real broker sends each attempt of a
target with ``target.oidc`` with ``Authorization: Bearer <JWT>``; the receiver knows nothing of
Horae but the issuer's URL: it fetches the JWKS from the real API (served over HTTP, keys from
the same key directory, through its own public-only mount) with PyJWT's ``PyJWKClient`` and
verifies the token's signature, issuer, expiry and its own audience, answering 401 otherwise.
A token for target A replayed to target B is refused on its audience; after a rotation the new
key signs and the old key's token still verifies while it lives."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import jwt
import pytest
import uvicorn
from aiohttp import web
from cryptography.hazmat.primitives.asymmetric import ec

from horae.api.app import create_app
from horae.api.memory import MemoryBackend
from horae.contracts import events as ev
from horae.contracts.topics import Topic
from horae.outbound.oidc import OidcSigner
from horae.outbound.oidc_files import SET_FILE, OidcKeyFiles
from horae.outbound.ssrf import AddressPolicy
from horae.settings import Settings
from tests.integration.dispatcher.support import DispatchEnv, events, order
from tests.waiting import wait_until

SKEW = 30
LEAD = 8  # the test's publishing lead (the default, 600 s, exceeds the JWKS's cache lifetime)


@dataclass
class Api:
    """The real API app served by uvicorn on 127.0.0.1 in a thread."""

    keys_dir: Path
    server: uvicorn.Server | None = None
    thread: threading.Thread | None = None
    port: int = 0

    @property
    def issuer(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, port: int) -> None:
        self.port = port
        settings = Settings.model_validate(
            {
                "oidc_issuer": self.issuer,
                "oidc_keys_dir": str(self.keys_dir),
                "oidc_skew_s": SKEW,
                "api": {"token_keys": {"k1": "token-key-of-the-oidc-test-0000"}, "token_kid": "k1"},
            }
        )
        backend = MemoryBackend()
        app = create_app(settings, backend, backend, addresses=AddressPolicy(("127.0.0.1/32",)))
        config = uvicorn.Config(
            app, host="127.0.0.1", port=port, log_level="warning", lifespan="off", loop="asyncio"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        wait_until(lambda: self.server is not None and self.server.started)

    def stop(self) -> None:
        if self.server is not None:
            self.server.should_exit = True
        if self.thread is not None:
            self.thread.join(30)


@dataclass
class Verifying:
    """A target that verifies the bearer token with PyJWT and the API's published JWKS:
    ``/a`` expects audience ``https://a.example``, ``/b`` ``https://b.example``."""

    issuer: str
    verdicts: list[tuple[str, str, dict[str, Any] | str]] = field(default_factory=list)
    tokens: dict[str, str] = field(default_factory=dict)
    all_tokens: list[tuple[str, str]] = field(default_factory=list)
    port: int = 0
    _loop: asyncio.AbstractEventLoop | None = None
    _stopped: asyncio.Event | None = None
    _thread: threading.Thread | None = None

    def __post_init__(self) -> None:
        self.jwks = jwt.PyJWKClient(f"{self.issuer}/.well-known/jwks.json", cache_keys=False)

    def check(self, path: str, authorization: str) -> dict[str, Any] | str:
        audience = f"https://{path.strip('/')}.example"
        token = authorization.removeprefix("Bearer ")
        try:
            key = self.jwks.get_signing_key_from_jwt(token)
            claims: dict[str, Any] = jwt.decode(
                token, key.key, algorithms=["ES256"], audience=audience, issuer=self.issuer
            )
        except jwt.PyJWTError as exc:
            return type(exc).__name__
        return claims

    async def handle(self, request: web.Request) -> web.Response:
        authorization = request.headers.get("Authorization", "")
        verdict = await asyncio.to_thread(self.check, request.path, authorization)
        self.verdicts.append((request.path, request.headers.get("Idempotency-Key", ""), verdict))
        self.tokens.setdefault(request.path, authorization)
        if request.headers.get("Idempotency-Key"):  # the dispatcher's calls (not the test's)
            self.all_tokens.append((request.path, authorization))
        return web.Response(status=200 if isinstance(verdict, dict) else 401)

    def start(self) -> None:
        ready = threading.Event()

        async def main() -> None:
            self._loop, self._stopped = asyncio.get_running_loop(), asyncio.Event()
            app = web.Application()
            app.router.add_route("*", "/{tail:.*}", self.handle)
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            self.port = runner.addresses[0][1]
            ready.set()
            await self._stopped.wait()
            await runner.cleanup()

        self._thread = threading.Thread(target=lambda: asyncio.run(main()), daemon=True)
        self._thread.start()
        assert ready.wait(30)

    def stop(self) -> None:
        if self._loop is not None and self._stopped is not None:
            self._loop.call_soon_threadsafe(self._stopped.set)
        if self._thread is not None:
            self._thread.join(30)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def keys(tmp_path: Path) -> Iterator[tuple[OidcKeyFiles, Path]]:
    """The dispatcher's key directory (private keys and the set) and the API's mount: the
    public set alone, a link to the dispatcher's."""
    dispatcher = tmp_path / "dispatcher-keys"
    api = tmp_path / "api-keys"
    api.mkdir()
    store = OidcKeyFiles(dispatcher)
    store.rotate(time.time() - 3600, 0, SKEW)
    (api / SET_FILE).symlink_to(dispatcher / SET_FILE)
    yield store, api


def oidc(o: ev.DispatchOrder, audience: str | None) -> ev.DispatchOrder:
    return replace(o, target=replace(o.target, oidc=ev.OidcToken(audience=audience)))


def post(url: str, authorization: str) -> int:
    req = urllib.request.Request(url, data=b"{}", headers={"Authorization": authorization})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code


def test_a_target_verifies_its_token_with_the_published_jwks(
    env: DispatchEnv, keys: tuple[OidcKeyFiles, Path]
) -> None:
    store, api_dir = keys
    api = Api(api_dir)
    api.start(free_port())
    receiver = Verifying(api.issuer)
    receiver.start()
    try:
        env.start(oidc=OidcSigner(api.issuer, store, SKEW))
        (old,) = store.key_set().keys
        nxt = store.rotate(time.time(), LEAD, SKEW)  # published now, signs LEAD s later
        now = int(time.time())
        to_a = oidc(order(receiver.url("/a"), now - 5, trigger="to-a"), "https://a.example")
        wrong = oidc(order(receiver.url("/b"), now - 5, trigger="wrong"), "https://a.example")
        env.produce_orders([to_a, wrong])
        outcomes_topic = env.topic(Topic.OUTCOMES)

        def outcomes() -> dict[str, ev.WorkOutcome]:
            return {o.fire_key: o for o in events(env.bootstrap, outcomes_topic, ev.WorkOutcome)}

        wait_until(lambda: len(outcomes()) == 2, timeout_s=60)
        done = outcomes()
        assert done[to_a.fire.fire_key].state is ev.OutcomeState.SUCCEEDED
        # a token for audience A sent to B: B refuses it (401, a final failure: not retried)
        assert done[wrong.fire.fire_key].state is ev.OutcomeState.FAILED
        assert done[wrong.fire.fire_key].http_status == 401
        by_path = {path: verdict for path, _, verdict in receiver.verdicts}
        claims = by_path["/a"]
        assert isinstance(claims, dict), claims
        assert claims["sub"] == "acme/to-a" and claims["jti"] == f"{to_a.fire.fire_key}#1"
        assert claims["fire_key"] == to_a.fire.fire_key
        assert claims["exp"] == claims["iat"] + 10 + SKEW  # the target's 10 s timeout
        assert by_path["/b"] == "InvalidAudienceError"
        # replayed by hand: A's token at B is refused on its audience, at A it still verifies
        token_a = receiver.tokens["/a"]
        assert post(receiver.url("/b"), token_a) == 401
        assert receiver.verdicts[-1][2] == "InvalidAudienceError"
        assert post(receiver.url("/a"), token_a) == 200
        # a forged token (another key, same kid) is refused on its signature
        header = jwt.get_unverified_header(token_a.removeprefix("Bearer "))
        forged = jwt.encode(
            {"iss": api.issuer, "aud": "https://a.example", "exp": now + 60, "sub": "acme/x"},
            _other_key(),
            algorithm="ES256",
            headers={"kid": header["kid"]},
        )
        assert post(receiver.url("/a"), f"Bearer {forged}") == 401
        assert receiver.verdicts[-1][2] == "InvalidSignatureError"

        # rotation: the next key was published before it signs (rotated with a lead, before the
        # first fire), so the receiver's cached JWKS already holds it: PyJWT's client refetches
        # an unknown kid at most every 30 s, so a key published only when it starts to sign
        # would be refused here. Once it signs, the old key's token still verifies (published
        # until every token it signed has expired).
        assert header["kid"] == old.kid
        wait_until(lambda: time.time() >= nxt.activates_at, timeout_s=LEAD + 10)
        later = oidc(order(receiver.url("/a"), now - 4, trigger="after"), "https://a.example")
        env.produce_orders([later])
        wait_until(lambda: later.fire.fire_key in outcomes(), timeout_s=60)
        (verdict,) = [v for _, k, v in receiver.verdicts if k == later.fire.fire_key]
        assert isinstance(verdict, dict), verdict
        assert outcomes()[later.fire.fire_key].state is ev.OutcomeState.SUCCEEDED
        (by_next,) = [t for p, t in receiver.all_tokens if p == "/a" and t != token_a]
        assert jwt.get_unverified_header(by_next.removeprefix("Bearer "))["kid"] == nxt.kid
        listed = _kids(api.issuer)
        assert listed == [old.kid, nxt.kid]  # the old key stays while its tokens may live
        assert post(receiver.url("/a"), token_a) == 200  # the old key is still published
    finally:
        receiver.stop()
        api.stop()


def _kids(issuer: str) -> list[str]:
    """The key ids the API publishes."""
    with urllib.request.urlopen(f"{issuer}/.well-known/jwks.json", timeout=30) as resp:
        return [str(k["kid"]) for k in json.loads(resp.read())["keys"]]


def _other_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def test_without_keys_the_dispatcher_sends_nothing_and_says_why(env: DispatchEnv) -> None:
    receiver = Verifying("http://127.0.0.1:9")
    receiver.start()
    try:
        o = oidc(order(receiver.url("/a"), int(time.time()) - 5, trigger="nokey"), None)
        env.produce_orders([o])
        env.start()  # no issuer, no keys
        attempts_topic = env.topic(Topic.ATTEMPTS)
        wait_until(lambda: events(env.bootstrap, attempts_topic, ev.Attempt), timeout_s=60)
        (attempt,) = events(env.bootstrap, attempts_topic, ev.Attempt)
        assert attempt.not_sent == ev.NotSent.NO_OIDC_KEY and "target.oidc" in (attempt.error or "")
        assert receiver.verdicts == []
    finally:
        receiver.stop()
