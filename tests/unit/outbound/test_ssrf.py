"""The address policy: a matrix of hostile and honest URLs, judged without any real DNS."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Mapping, Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from horae.outbound.ssrf import (
    AddressPolicy,
    AddressRefused,
    CheckedTarget,
    ResolutionError,
    non_public_reason,
    parse_legacy_ipv4,
)


class FakeResolver:
    """A DNS stand-in: name -> answers; records every lookup."""

    def __init__(self, table: Mapping[str, Sequence[str]]) -> None:
        self.table = table
        self.calls: list[tuple[str, int]] = []

    async def __call__(self, host: str, port: int) -> Sequence[str]:
        self.calls.append((host, port))
        if host not in self.table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return self.table[host]


DNS = {
    "public.example": ["93.184.216.34"],
    "public6.example": ["2606:2800:220:1:248:1893:25c8:1946"],
    "internal.example": ["10.1.2.3"],
    "metadata.example": ["169.254.169.254"],
    "mixed.example": ["93.184.216.34", "127.0.0.1"],
    "mixed6.example": ["2606:2800:220:1:248:1893:25c8:1946", "fd00::1"],
    "mapped.example": ["::ffff:10.0.0.1"],
    "localhost": ["93.184.216.34"],  # a lying resolver: localhost is still this machine
    "app.localhost": ["93.184.216.34"],
    "scoped.example": ["fe80::1%2"],
    "empty.example": [],
}


def check(url: str, allow: Sequence[str] = ()) -> CheckedTarget:
    return asyncio.run(AddressPolicy(allow=allow, resolver=FakeResolver(DNS)).check(url))


REFUSED = [
    # (url, reason) — the metadata service and the classic private ranges
    ("http://169.254.169.254/latest/meta-data/", "link_local"),
    ("http://metadata.example/", "link_local"),
    ("http://10.0.0.1/", "private"),
    ("http://172.16.5.4/", "private"),
    ("http://192.168.1.1/", "private"),
    ("http://internal.example/", "private"),
    ("http://127.0.0.1/", "loopback"),
    ("http://0.0.0.0/", "this_network"),
    ("http://100.64.0.1/", "shared_cgnat"),
    ("http://224.0.0.1/", "multicast"),
    ("http://239.255.255.250:1900/", "multicast"),
    ("http://255.255.255.255/", "broadcast"),
    ("http://240.0.0.1/", "reserved"),
    ("http://198.18.0.1/", "benchmarking"),
    ("http://192.0.2.1/", "documentation"),
    ("http://203.0.113.9/", "documentation"),
    ("http://192.0.0.8/", "ietf_protocol_assignment"),
    # obfuscated IPv4 literals
    ("http://2130706433/", "loopback"),
    ("http://0177.0.0.1/", "loopback"),
    ("http://0x7f.0.0.1/", "loopback"),
    ("http://0x7f000001/", "loopback"),
    ("http://127.1/", "loopback"),
    ("http://127.0.1/", "loopback"),
    ("http://0/", "this_network"),
    ("http://0251.0376.0251.0376/", "link_local"),  # 169.254.169.254 in octal
    ("http://127.0.0.1./", "loopback"),  # trailing dot
    ("http://1.2.3.4.5/", "invalid_ipv4"),
    ("http://256.1.1.1/", "invalid_ipv4"),
    ("http://08.0.0.1/", "invalid_ipv4"),
    # IPv6
    ("http://[::1]/", "loopback"),
    ("http://[::]/", "unspecified"),
    ("http://[::ffff:127.0.0.1]/", "ipv4_mapped_loopback"),
    ("http://[::ffff:169.254.169.254]/", "ipv4_mapped_link_local"),
    ("http://[::127.0.0.1]/", "ipv4_compatible"),
    ("http://[64:ff9b::7f00:1]/", "nat64_loopback"),
    ("http://[64:ff9b::a9fe:a9fe]/", "nat64_link_local"),
    ("http://[64:ff9b:1::808:808]/", "nat64_local_use"),
    ("http://[2002:7f00:1::1]/", "6to4_loopback"),
    ("http://[2002:c0a8:101::1]/", "6to4_private"),
    ("http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/", "teredo"),
    ("http://[fd00::1]/", "unique_local"),
    ("http://[fc00::1]/", "unique_local"),
    ("http://[fe80::1]/", "link_local"),
    ("http://[fe80::1%25eth0]/", "zone_id"),
    ("http://[fec0::1]/", "site_local"),
    ("http://[ff02::1]/", "multicast"),
    ("http://[2001:db8::1]/", "documentation"),
    ("http://mapped.example/", "ipv4_mapped_private"),
    ("http://scoped.example/", "zone_id"),
    # names that must not be trusted, and DNS answers with one bad apple
    ("http://localhost/", "loopback_name"),
    ("http://localhost./", "loopback_name"),
    ("http://app.localhost:8080/", "loopback_name"),
    ("http://mixed.example/", "loopback"),
    ("http://mixed6.example/", "unique_local"),
    # URL tricks and schemes
    ("http://good.example@127.0.0.1/", "userinfo"),
    ("http://user:pw@public.example/", "userinfo"),
    ("http://public.example\\@127.0.0.1/", "invalid_url"),
    ("http://exa mple.com/", "invalid_url"),
    ("http://exa_mple..com/", "invalid_host"),
    ("ftp://public.example/", "bad_scheme"),
    ("file:///etc/passwd", "bad_scheme"),
    ("gopher://127.0.0.1:6379/_INFO", "bad_scheme"),
    ("javascript:alert(1)", "bad_scheme"),
    ("http:///path-only", "empty_host"),
    ("http://public.example:0/", "invalid_port"),
    ("http://public.example:99999/", "invalid_url"),
]


@pytest.mark.parametrize(("url", "reason"), REFUSED, ids=[u for u, _ in REFUSED])
def test_refused(url: str, reason: str) -> None:
    with pytest.raises(AddressRefused) as info:
        check(url)
    assert info.value.reason == reason, info.value.detail


ALLOWED = [
    ("http://93.184.216.34/hook", "93.184.216.34"),
    ("https://1.1.1.1/", "1.1.1.1"),
    ("http://1572395042/", "93.184.216.34"),  # a decimal literal of a public address
    ("http://[2606:4700:4700::1111]:8443/x", "2606:4700:4700::1111"),
    ("http://[::ffff:8.8.8.8]/", "::ffff:808:808"),  # mapped, but public inside
    ("http://[64:ff9b::808:808]/", "64:ff9b::808:808"),  # NAT64 of a public address
    ("http://[2002:808:808::1]/", "2002:808:808::1"),  # 6to4 of a public address
    ("https://public.example/a/b?c=d", "93.184.216.34"),
    ("https://PUBLIC.example./", "93.184.216.34"),
    ("http://public6.example/", "2606:2800:220:1:248:1893:25c8:1946"),
]


@pytest.mark.parametrize(("url", "address"), ALLOWED, ids=[u for u, _ in ALLOWED])
def test_allowed(url: str, address: str) -> None:
    target = check(url)
    assert [str(a) for a in target.addresses] == [address]


def test_checked_target_is_rebuilt_from_the_parsed_parts() -> None:
    target = check("https://PUBLIC.example.:8443/p%20q?x=1#frag")
    assert str(target.url) == "https://public.example:8443/p%20q?x=1"
    assert (target.host, target.port, target.is_ip_literal) == ("public.example", 8443, False)
    literal = check("http://0x5d.0xb8.0xd8.0x22/")  # 93.184.216.34 in hex
    assert str(literal.url) == "http://93.184.216.34/"
    assert literal.is_ip_literal


def test_allowlisted_loopback_is_the_only_way_in() -> None:
    assert check("http://127.0.0.1:8080/", allow=["127.0.0.1/32"]).addresses == (
        ipaddress.ip_address("127.0.0.1"),
    )
    assert check("http://[::1]:9/", allow=["::1/128"]).host == "::1"
    with pytest.raises(AddressRefused):
        check("http://127.0.0.2/", allow=["127.0.0.1/32"])
    with pytest.raises(AddressRefused):
        check("http://10.0.0.1/", allow=["127.0.0.0/8"])


def test_allowlisted_host_port_is_exact() -> None:
    allow = ["localhost:8080", "[::1]:9000", "10.0.0.1:443"]
    policy = AddressPolicy(allow=allow, resolver=FakeResolver({"localhost": ["127.0.0.1", "::1"]}))
    assert len(asyncio.run(policy.check("http://localhost:8080/")).addresses) == 2
    assert asyncio.run(policy.check("http://[::1]:9000/")).host == "::1"
    assert asyncio.run(policy.check("https://10.0.0.1/")).port == 443
    for other in ("http://localhost:8081/", "http://[::1]:9001/", "http://10.0.0.1/"):
        with pytest.raises(AddressRefused):
            asyncio.run(policy.check(other))


def test_bad_allowlist_entry_is_rejected_early() -> None:
    with pytest.raises(ValueError, match="neither a CIDR nor host:port"):
        AddressPolicy(allow=["not an entry"])


def test_resolution_failures_are_not_refusals() -> None:
    with pytest.raises(ResolutionError):
        check("http://nxdomain.example/")
    with pytest.raises(ResolutionError):
        check("http://empty.example/")


def test_every_answer_is_judged_and_the_name_resolved_once() -> None:
    resolver = FakeResolver(DNS)
    policy = AddressPolicy(resolver=resolver)
    with pytest.raises(AddressRefused) as info:
        asyncio.run(policy.check("http://mixed.example:8080/"))
    assert "127.0.0.1" in info.value.detail
    assert resolver.calls == [("mixed.example", 8080)]
    asyncio.run(policy.check("http://1.1.1.1/"))
    assert len(resolver.calls) == 1  # literals never reach the resolver


def test_answers_are_cached_for_the_ttl_and_judged_every_time() -> None:
    clock = [0.0]
    table = {"flip.example": ["93.184.216.34"]}
    resolver = FakeResolver(table)
    policy = AddressPolicy(resolver=resolver, cache_ttl_s=10.0, monotonic=lambda: clock[0])

    async def go() -> None:
        await policy.check("http://flip.example/")
        table["flip.example"] = ["10.0.0.1"]  # rebinding
        clock[0] = 9.9
        await policy.check("http://flip.example/")  # cached, checked answer
        await policy.check("http://flip.example:8080/")  # another port: a fresh lookup

    with pytest.raises(AddressRefused, match="private"):
        asyncio.run(go())
    assert resolver.calls == [("flip.example", 80), ("flip.example", 8080)]
    clock[0] = 10.0
    with pytest.raises(AddressRefused, match="private"):
        asyncio.run(policy.check("http://flip.example/"))  # expired: looked up again
    assert len(resolver.calls) == 3


def test_check_now_judges_literals_and_cached_answers_without_a_lookup() -> None:
    """The lean sender's fast path: the same judgement as :meth:`check`, or None (a lookup is
    needed) — never an unjudged answer."""
    clock = [0.0]
    table = {"pub.example": ["93.184.216.34"], "flip.example": ["93.184.216.34"]}
    resolver = FakeResolver(table)
    policy = AddressPolicy(resolver=resolver, cache_ttl_s=10.0, monotonic=lambda: clock[0])
    assert policy.check_now("http://1.1.1.1/") == asyncio.run(policy.check("http://1.1.1.1/"))
    with pytest.raises(AddressRefused, match="loopback"):
        policy.check_now("http://127.0.0.1/")
    with pytest.raises(AddressRefused, match="invalid_ipv4"):
        policy.check_now("http://0x7f.1.2.3.4/")
    assert policy.check_now("http://pub.example/") is None  # not looked up yet
    assert resolver.calls == []
    checked = asyncio.run(policy.check("http://pub.example/"))
    assert policy.check_now("http://pub.example/") == checked
    asyncio.run(policy.check("http://flip.example/"))
    policy._cache[("flip.example", 80)] = (10.0, (ipaddress.ip_address("10.0.0.1"),))
    with pytest.raises(AddressRefused, match="private"):  # a cached answer is judged again
        policy.check_now("http://flip.example/")
    clock[0] = 10.0
    assert policy.check_now("http://pub.example/") is None  # expired
    assert AddressPolicy(cache_ttl_s=0).check_now("http://pub.example/") is None
    assert len(resolver.calls) == 2


def test_cache_is_bounded() -> None:
    table = {f"h{i}.example": ["93.184.216.34"] for i in range(5)}
    resolver = FakeResolver(table)
    policy = AddressPolicy(resolver=resolver, cache_size=2)
    for i in range(5):
        asyncio.run(policy.check(f"http://h{i}.example/"))
    asyncio.run(policy.check("http://h4.example/"))  # still cached
    asyncio.run(policy.check("http://h0.example/"))  # evicted: looked up again
    assert len(resolver.calls) == 6


def test_default_resolver_handles_literals_and_localhost() -> None:
    policy = AddressPolicy()  # system resolver; only names that need no network
    with pytest.raises(AddressRefused):
        asyncio.run(policy.check("http://localhost/"))
    assert str(asyncio.run(policy.check("http://8.8.8.8/")).addresses[0]) == "8.8.8.8"


def test_public_reason_none_and_catch_all() -> None:
    assert non_public_reason(ipaddress.ip_address("8.8.8.8")) is None
    assert non_public_reason(ipaddress.ip_address("2001:4860:4860::8888")) is None
    assert non_public_reason(ipaddress.ip_address("2001:10::1")) == "not_global"  # ORCHID
    assert non_public_reason(ipaddress.ip_address("100::1")) == "discard_only"


_PART = st.integers(0, 255)


def _spell(value: int, style: int) -> str:
    return (str(value), f"0{value:o}", f"0x{value:x}")[style]


@given(
    parts=st.lists(st.integers(0, 255), min_size=4, max_size=4),
    shape=st.integers(1, 4),
    styles=st.lists(st.integers(0, 2), min_size=4, max_size=4),
)
def test_legacy_ipv4_forms_read_like_inet_aton(
    parts: list[int], shape: int, styles: list[int]
) -> None:
    """Every spelling (1–4 parts, decimal/octal/hex) denotes what the C library connects to."""
    number = int.from_bytes(bytes(parts), "big")
    head = parts[: shape - 1]
    tail = number & ((1 << (8 * (5 - shape))) - 1)
    text = ".".join([_spell(p, s) for p, s in zip(head, styles, strict=False)])
    text = (text + "." if text else "") + _spell(tail, styles[3])
    expected = ipaddress.IPv4Address(socket.inet_aton(text))
    assert parse_legacy_ipv4(text) == expected == ipaddress.IPv4Address(number)
