"""The lean HTTP client gives the dispatcher what aiohttp's sender gives it, exchange for exchange.

A differential test: hypothesis generates raw responses — status lines (versions, codes, reasons,
missing parts), interim 1xx responses, headers (case, repeats, odd whitespace, folded lines),
framing (``Content-Length`` right, short, repeated or conflicting; chunked with extensions,
trailers; both; neither, the body running until the close), truncation mid-headers
or mid-body, and whether the server keeps the connection or closes it, saying so or not. A tiny
asyncio server on 127.0.0.1 answers one request with it and the next with a plain ``200``; each
client makes both requests through its own sender, and the two must agree on what the dispatcher
records of each: the response class (:class:`~horae.outbound.results.SendResult`), the status,
the body prefix it keeps, whether it was cut, ``Retry-After``.

Where the two disagreed, RFC 9112 decided which was right and the lean client was fixed; each fix
has its own test at the end of this file. The examples are bounded so the file runs in a few
seconds on each event loop (conftest); the client is not a parameter here, both run in each test.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from horae.outbound import AddressPolicy, AttemptResult, SenderConfig, SendResult
from horae.streams.dispatcher.worker import make_sender

LOOPBACK = AddressPolicy(allow=["127.0.0.1/32"])
#: a small body cap, so that generated bodies run past it; timeouts only as a safety net
CONFIG = SenderConfig(max_body_bytes=48, read_timeout_s=3.0, connect_timeout_s=3.0, deadline_s=6.0)
PLAIN_OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
NOW = 1_700_000_000.0


@pytest.fixture(autouse=True)
def on_each_client() -> Iterator[str]:
    """Overrides the conftest's: both clients run inside each test."""
    yield "both"


# --- the exchange -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reply:
    """One raw response and what the server does after writing it."""

    raw: bytes
    close: bool  # the server hangs up after writing it (else it waits for the next request)
    head: int = -1  # the server writes ``raw[:head]``, then the rest a moment later (-1: at once)
    upgrade: bool = False  # its final status line is a well-formed 101 (see expected)
    low_unframed: bytes | None = None  # the body of a 0xx without framing (see expected)


@asynccontextmanager
async def serving(replies: Sequence[Reply]) -> AsyncIterator[tuple[str, list[int], asyncio.Event]]:
    """A server answering the n-th request (on whatever connection) with ``replies[n]``; yields
    its URL, the number of connections it accepted, and an event set each time it hung up."""
    answered = [0]
    accepted = [0]
    hung_up = asyncio.Event()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted[0] += 1
        try:
            while answered[0] < len(replies):
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                await reader.readexactly(length)
                reply = replies[answered[0]]
                answered[0] += 1
                if 0 <= reply.head < len(reply.raw):  # the head first: see _exchanges
                    writer.write(reply.raw[: reply.head])
                    await writer.drain()
                    await asyncio.sleep(0.002)
                    writer.write(reply.raw[reply.head :])
                else:
                    writer.write(reply.raw)
                await writer.drain()
                if reply.close:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()
            hung_up.set()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/hook", accepted, hung_up
    finally:
        server.close()
        await server.wait_closed()


Seen = tuple[SendResult, int | None, bytes, bool, float | None]


def seen(result: AttemptResult) -> Seen:
    """What the dispatcher records of an attempt (the detail text is each client's own)."""
    return (
        result.send_result,
        result.status,
        result.body_excerpt,
        result.body_truncated,
        result.retry_after_s,
    )


async def _exchanges(client: str, replies: Sequence[Reply]) -> tuple[list[Seen], int]:
    """Each reply's exchange through ``client``'s sender. The server writes a response's head and
    its body apart: aiohttp reports a body that is broken within the very read that brought the
    head as a response that is not HTTP (no status), and the same body arriving a moment later
    as the status with a body-read error; the lean client reports the latter either way."""
    sender = make_sender(client, LOOPBACK, CONFIG, lambda: NOW)
    await sender.start()
    try:
        async with serving(replies) as (url, accepted, hung_up):
            out = []
            for reply in replies:
                hung_up.clear()
                out.append(seen(await sender.send(url, b'{"n":1}', {"X-Test": "1"})))
                if reply.close:  # let the client see the hang-up before the next request
                    await asyncio.wait_for(hung_up.wait(), 3.0)
                    await asyncio.sleep(0.005)
            return out, accepted[0]
    finally:
        await sender.close()


def both(replies: Sequence[Reply]) -> tuple[list[Seen], list[Seen]]:
    """The lean client's and aiohttp's records of the same exchanges; both opened as many
    connections (each kept one the server kept, and dropped one it had to)."""

    async def main() -> tuple[list[Seen], list[Seen]]:
        (lean, opened), (reference, opened_too) = [
            await _exchanges(client, replies) for client in ("lean", "aiohttp")
        ]
        assert opened == opened_too, "connections opened, lean and aiohttp"
        return lean, reference

    return asyncio.run(main())


# --- generated responses ------------------------------------------------------------------------

OWS = st.sampled_from([b"", b" ", b"  ", b"\t", b" \t "])
STATUS = st.sampled_from(
    [200, 201, 204, 299, 301, 304, 307, 400, 404, 429, 500, 503, 599, 101, 199, 600, 999, 0]
)
REASONS = st.sampled_from([b"OK", b"", b"Some Reason", b"  spaced  ", b"caf\xe9"])
EXTRA_NAMES = st.sampled_from([b"X-Thing", b"x-thing", b"X-THING", b"Server", b"Date", b"Vary"])
VALUES = st.sampled_from([b"v", b"a, b", b"", b"\xe9", b"x y"])
RETRY_AFTER = st.sampled_from([b"120", b"5", b"Wed, 21 Oct 2015 07:28:00 GMT", b"soon", b"-1"])


@st.composite
def status_lines(draw: st.DrawFn) -> tuple[bytes, int | None, str]:
    """A status line, the status it carries if well formed (else None) and its version."""
    version = draw(st.sampled_from([b"HTTP/1.1", b"HTTP/1.1", b"HTTP/1.0"]))
    status = draw(STATUS)
    reason = draw(REASONS)
    shape = draw(st.sampled_from(["normal"] * 6 + ["no-reason-space", "bad-code", "bad-version"]))
    if status < 100:
        return version + b" %03d " % status + reason + b"\r\n", status, version.decode()
    if shape == "no-reason-space":
        return version + b" %d\r\n" % status, status, version.decode()
    if shape == "bad-code":
        code = draw(st.sampled_from([b"20", b"2000", b"abc", b"-20"]))
        return version + b" " + code + b" " + reason + b"\r\n", None, version.decode()
    if shape == "bad-version":
        bad = draw(st.sampled_from([b"HTTP/2", b"ICY", b"http/1.1", b"HTTP/1.1 "]))
        return bad + b" %d " % status + reason + b"\r\n", None, "bad"
    return version + b" %d " % status + reason + b"\r\n", status, version.decode()


@st.composite
def header_lines(draw: st.DrawFn) -> tuple[list[bytes], bool]:
    """Extra header lines (not framing) and whether one of them is malformed or folded."""
    lines: list[bytes] = []
    odd = False
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(
            st.sampled_from(
                ["plain"] * 5 + ["retry-after", "space-before-colon", "fold", "no-colon", "nul"]
            )
        )
        if kind == "retry-after":
            name = draw(st.sampled_from([b"Retry-After", b"retry-after", b"RETRY-AFTER"]))
            lines.append(name + b":" + draw(OWS) + draw(RETRY_AFTER) + draw(OWS))
        elif kind == "space-before-colon":
            lines.append(draw(EXTRA_NAMES) + b" : v")
            odd = True
        elif kind == "no-colon":
            lines.append(draw(EXTRA_NAMES))
            odd = True
        elif kind == "nul":
            lines.append(draw(EXTRA_NAMES) + b": a\x00b")
            odd = True
        elif kind == "fold" and lines:
            lines.append(draw(st.sampled_from([b" ", b"\t"])) + b"folded")
            odd = True
        else:
            lines.append(draw(EXTRA_NAMES) + b":" + draw(OWS) + draw(VALUES) + draw(OWS))
    return lines, odd


def _chunked(body: bytes, sizes: list[int], ext: bool, trailer: bool, bad: bool) -> bytes:
    out = []
    rest = body
    for size in sizes:
        if not rest:
            break
        piece, rest = rest[: max(1, size)], rest[max(1, size) :]
        head = b"%x" % len(piece)
        if bad:
            head, bad = b"zz", False
        out.append(head + (b";name=value" if ext else b"") + b"\r\n" + piece + b"\r\n")
    if rest:
        out.append(b"%x\r\n" % len(rest) + rest + b"\r\n")
    return b"".join(out) + b"0\r\n" + (b"X-Trailer: t\r\n" if trailer else b"") + b"\r\n"


@st.composite
def replies(draw: st.DrawFn) -> Reply:
    """A generated first response; the server hangs up after it unless it is a well-formed,
    explicitly framed, persistent one it chose to keep."""
    interim = draw(
        st.sampled_from(
            [b"", b"", b"", b"HTTP/1.1 100 Continue\r\n\r\n", b"HTTP/1.1 103 Early Hints\r\n\r\n"]
        )
    )
    line, status, version = draw(status_lines())
    headers, odd = draw(header_lines())
    body = draw(st.binary(max_size=90))
    framing = draw(
        st.sampled_from(
            ["length"] * 4 + ["chunked"] * 3 + ["until-close", "both", "length-twice", "length-bad"]
        )
    )
    cl_name = draw(st.sampled_from([b"Content-Length", b"content-length", b"CONTENT-LENGTH"]))
    te_name = draw(st.sampled_from([b"Transfer-Encoding", b"transfer-encoding"]))
    well_framed = framing in ("length", "chunked")
    if framing == "length":
        headers.append(cl_name + b":" + draw(OWS) + b"%d" % len(body) + draw(OWS))
        payload = body
    elif framing == "length-twice":
        other = draw(st.sampled_from([len(body), len(body) + 1]))
        headers += [cl_name + b": %d" % len(body), b"Content-Length: %d" % other]
        payload = body
    elif framing == "length-bad":
        headers.append(cl_name + b": " + draw(st.sampled_from([b"+5", b"5a", b"-1", b"1 2"])))
        payload = body
    elif framing == "until-close":
        payload = body
    else:
        sizes = draw(st.lists(st.integers(1, 40), max_size=4))
        ext, trailer = draw(st.booleans()), draw(st.booleans())
        value = draw(st.sampled_from([b"chunked", b"Chunked", b" chunked "]))
        headers.append(te_name + b":" + value)
        if framing == "both":
            headers.append(cl_name + b": %d" % len(body))
        payload = _chunked(body, sizes, ext, trailer, bad=False)  # see the bad size's own test
    say_close = draw(st.integers(0, 3)) == 0
    if say_close:
        headers.append(draw(st.sampled_from([b"Connection: close", b"connection: Close"])))
    elif draw(st.integers(0, 5)) == 0:
        headers.append(b"Connection: keep-alive")
    eol = draw(st.sampled_from([b"\r\n"] * 5 + [b"\n"]))  # a bare LF ends the lines, or not
    head = interim + line + b"".join(h + eol for h in headers) + eol
    raw = head + payload
    cut = draw(st.sampled_from([None] * 6 + ["headers", "body"]))
    if cut == "headers":
        raw = raw[: draw(st.integers(0, len(head) - 1))]
    elif cut == "body" and payload:
        raw = raw[: len(head) + draw(st.integers(0, len(payload) - 1))]
    keep = (
        well_framed
        and cut is None
        and not say_close
        and not odd
        and status is not None
        and version == "HTTP/1.1"
        and eol == b"\r\n"
        and 200 <= status < 600
        and status not in (204, 304)  # a body after them would be the next response's start
        and not draw(st.booleans())  # or the server hangs up anyway, without saying so
    )
    low = None
    if status is not None and status < 100 and framing == "until-close" and cut != "headers":
        low = raw[len(head) :]
    return Reply(
        raw, not keep, len(head), upgrade=status == 101 and cut != "headers", low_unframed=low
    )


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(first=replies())
@example(first=Reply(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", close=False))
def test_both_clients_record_the_same_of_each_exchange(first: Reply) -> None:
    lean, reference = both([first, Reply(PLAIN_OK, close=True)])
    assert lean == expected(first, reference), first.raw


def expected(first: Reply, reference: list[Seen]) -> list[Seen]:
    """What the lean client must record: aiohttp's record, but for the one difference where
    aiohttp is wrong. A 101 we never asked for (no ``Upgrade`` is sent; RFC 9110 7.8: a server
    MUST NOT switch to a protocol the request did not name) is no answer to the request:
    ``protocol_error`` without a status, where aiohttp records a final 101 ``http_error``. And
    a status below 100 is invalid, which a client SHOULD take as a 5xx (RFC 9110 15): without
    ``Content-Length`` or ``Transfer-Encoding`` its body runs until the close (RFC 9112 6.3),
    as it does for a 600, where aiohttp reads none of it."""
    if first.upgrade and reference[0][:2] == (SendResult.HTTP_ERROR, 101):
        return [(SendResult.PROTOCOL_ERROR, None, b"", False, None), *reference[1:]]
    if first.low_unframed is not None and reference[0][0] is SendResult.HTTP_ERROR:
        result, status, _, _, retry_after = reference[0]
        cap = CONFIG.max_body_bytes
        body = first.low_unframed
        return [(result, status, body[:cap], len(body) > cap, retry_after), *reference[1:]]
    return reference


# --- the fixes the comparison found -------------------------------------------------------------


def test_a_plain_exchange_is_the_same_on_both() -> None:
    """The comparison's baseline: a 200 with a body, kept alive, then another."""
    lean, reference = both([Reply(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", False)] * 2)
    assert lean == reference == [(SendResult.OK, 200, b"hello", False, None)] * 2


def test_the_test_server_takes_both_requests_on_one_connection() -> None:
    """The server really keeps a connection it does not hang up (so reuse is exercised)."""

    async def main() -> int:
        sender = make_sender("lean", LOOPBACK, CONFIG, time.time)
        await sender.start()
        try:
            async with serving([Reply(PLAIN_OK, False)] * 2) as (url, accepted, _):
                for _ in range(2):
                    assert (await sender.send(url, b"", {})).send_result is SendResult.OK
                return accepted[0]
        finally:
            await sender.close()

    assert asyncio.run(main()) == 1


def lean(raw: bytes) -> AttemptResult:
    """The lean client's attempt against a server answering ``raw`` (head and body apart) and
    hanging up."""
    end = raw.find(b"\r\n\r\n")

    async def main() -> AttemptResult:
        sender = make_sender("lean", LOOPBACK, CONFIG, lambda: NOW)
        await sender.start()
        try:
            async with serving([Reply(raw, True, end + 4 if end >= 0 else -1)]) as (url, _, _):
                return await sender.send(url, b"{}", {})
        finally:
            await sender.close()

    return asyncio.run(main())


def test_a_retry_after_of_a_head_that_never_ended_is_not_reported() -> None:
    """A response cut inside its header section is no response (RFC 9112 8): its Retry-After
    was reported by the lean client as if it were one."""
    result = lean(b"HTTP/1.1 503 Busy\r\nRetry-After: 120\r\nContent-Len")
    assert seen(result) == (SendResult.CONNECTION_LOST, None, b"", False, None)
    refused = lean(b"HTTP/1.1 503 Busy\r\nRetry-After: 120\r\nX-A : b\r\n\r\n")
    assert seen(refused) == (SendResult.PROTOCOL_ERROR, None, b"", False, None)


def test_the_first_of_repeated_retry_after_fields_counts() -> None:
    """Retry-After is a singleton field (RFC 9110 10.2.3); of a repeat, aiohttp reads the first
    and so does the lean client now (it read the last)."""
    raw = b"HTTP/1.1 429 Slow\r\nRetry-After: 30\r\nRetry-After: 5\r\nContent-Length: 0\r\n\r\n"
    assert seen(lean(raw)) == (SendResult.HTTP_ERROR, 429, b"", False, 30.0)


@pytest.mark.parametrize(
    "raw",
    [
        b"HTTP/1.1 200 OK\r\nX-A: v\r\n folded\r\nContent-Length: 2\r\n\r\nok",
        b"HTTP/1.1 200 OK\nX-A: v\nContent-Length: 2\n\nok",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2 ;a=b\r\nok\r\n0\r\n\r\n",
    ],
    ids=["obs-fold", "bare-lf", "space-after-chunk-size"],
)
def test_what_rfc_9112_has_a_client_read_is_read(raw: bytes) -> None:
    """A folded header line in a response (5.2: a user agent MUST replace it by a space), lines
    ended by a bare LF (2.2: a recipient MAY accept), whitespace before a chunk extension
    (7.1.1: BWS): llhttp refuses them by default and the lean client gave protocol_error where
    aiohttp reads the response."""
    assert seen(lean(raw)) == (SendResult.OK, 200, b"ok", False, None)


def test_a_nul_in_a_header_value_is_a_protocol_error() -> None:
    """RFC 9110 5.5: a field value with a NUL is rejected or the NUL replaced by a space; aiohttp
    rejects it, and so does the lean client (reading leniently as above, it would have taken
    it)."""
    result = lean(b"HTTP/1.1 200 OK\r\nX-A: a\x00b\r\nContent-Length: 2\r\n\r\nok")
    assert seen(result) == (SendResult.PROTOCOL_ERROR, None, b"", False, None)
    assert result.detail == "a NUL in a header value"


def test_a_status_below_100_is_a_final_answer() -> None:
    """A status outside 100-599 is invalid and a client SHOULD take it as a 5xx (RFC 9110 15):
    the lean client waited for a final response after a ``000`` as if it were a 1xx, and then
    reported the connection lost. Its body runs until the close, as a 600's does (aiohttp
    reads none of an unframed 0xx body)."""
    assert seen(lean(b"HTTP/1.1 000 Zero\r\nContent-Length: 2\r\n\r\nok")) == (
        SendResult.HTTP_ERROR,
        0,
        b"ok",
        False,
        None,
    )
    assert lean(b"HTTP/1.1 000 Zero\r\n\r\nuntil close").body_excerpt == b"until close"


def test_bytes_after_an_interim_head_are_not_the_body() -> None:
    """A 1xx ends with its header section (RFC 9112 6.3); what follows is the next response's
    start, not a body: the lean client kept it as the body excerpt of the attempt. (No final
    response comes here: the connection is lost, as aiohttp says too.)"""
    raw = b"HTTP/1.1 199 Odd\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nno\r\n0\r\n\r\n"
    assert seen(lean(raw)) == (SendResult.CONNECTION_LOST, None, b"", False, None)


def test_a_bad_chunk_size_ends_the_attempt_at_once() -> None:
    """A chunk size that is not hex (RFC 9112 7.1) ends the body read at once, with the status
    the head gave. Not part of the generated comparison: aiohttp records the same but only
    once its deadline has passed."""
    raw = b"HTTP/1.1 400 No\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n"
    started = time.monotonic()
    result = lean(raw)
    assert seen(result) == (SendResult.HTTP_ERROR, 400, b"", False, None)
    assert "chunk size" in result.detail and time.monotonic() - started < CONFIG.read_timeout_s


def test_a_101_nobody_asked_for_is_a_protocol_error() -> None:
    """No request asks for an upgrade, and a server MUST NOT switch to a protocol the request did
    not name (RFC 9110 7.8): no answer to the request, where aiohttp records a final 101."""
    result = lean(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n")
    assert seen(result) == (SendResult.PROTOCOL_ERROR, None, b"", False, None)
