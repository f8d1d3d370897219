"""Address policy for outbound calls: which URLs a trigger may reach (SSRF defence).

Contract of :meth:`AddressPolicy.check`:

* The URL is parsed once, strictly (``http``/``https`` only, a non-empty host, no userinfo, no
  IPv6 zone id, no backslash or whitespace, a port in 1..65535). Hosts that end in a number are
  read the way browsers and ``inet_aton`` read them (``2130706433``, ``0177.0.0.1``,
  ``0x7f.0.0.1``, ``127.1``) so that an obfuscated literal is judged as the address it *is*.
* A DNS name is resolved (the resolver is a parameter; the default is ``loop.getaddrinfo``) and
  **every** resolved address must be public. One non-public address refuses the whole target.
* Non-public means: private, loopback, link-local (169.254.169.254 ...), shared/CGNAT,
  multicast, reserved, "this network", broadcast, benchmarking, documentation, unique-local and
  site-local IPv6, unspecified, IPv4-compatible IPv6, Teredo, NAT64 local-use, and any address
  that *embeds* a non-public IPv4 (IPv4-mapped, NAT64 ``64:ff9b::/96``, 6to4 ``2002::/16``).
  Anything ``ipaddress`` does not call global is refused too (catch-all).
* The only way through for a non-public address is the operator's explicit allowlist: CIDRs
  (``"127.0.0.1/32"``) and/or ``host:port`` entries (``"localhost:8080"``, ``"[::1]:9000"``).
* The result, :class:`CheckedTarget`, carries the checked addresses; the sender connects to
  those and only those (no second resolution).

Refusals raise :class:`AddressRefused` with a machine-readable ``reason`` and a human ``detail``;
a failed lookup raises :class:`ResolutionError` (transient: worth a retry).
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import re
import socket
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass

from yarl import URL

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], Awaitable[Sequence[str]]]
"""``resolver(host, port) -> [address, ...]``; raises ``OSError`` when the name does not resolve."""


class AddressRefused(Exception):
    """The target may not be called. ``reason`` is a stable code, ``detail`` says why exactly."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


class ResolutionError(Exception):
    """The host name did not resolve (NXDOMAIN, timeout, no address). Retrying may help."""


@dataclass(frozen=True, slots=True)
class CheckedTarget:
    """A URL that passed the policy. ``url`` is rebuilt from the parsed parts (what is sent);
    ``host`` is the normalised host (IDNA, lower case, no trailing dot; canonical form for IP
    literals); ``addresses`` are the only addresses the sender may connect to."""

    url: URL
    host: str
    port: int
    addresses: tuple[IPAddress, ...]
    is_ip_literal: bool


Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Rules = tuple[tuple[tuple[Network, ...], str], ...]


def _net(cidrs: Iterable[str]) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(c) for c in cidrs)


# (networks, reason) — checked in order, first hit wins; precise reasons for the log and the user.
_V4_RULES: Rules = (
    (_net(["0.0.0.0/8"]), "this_network"),
    (_net(["127.0.0.0/8"]), "loopback"),
    (_net(["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"]), "private"),
    (_net(["169.254.0.0/16"]), "link_local"),
    (_net(["100.64.0.0/10"]), "shared_cgnat"),
    (_net(["192.0.0.0/24"]), "ietf_protocol_assignment"),
    (_net(["192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24"]), "documentation"),
    (_net(["198.18.0.0/15"]), "benchmarking"),
    (_net(["192.88.99.0/24"]), "6to4_relay_anycast"),
    (_net(["224.0.0.0/4"]), "multicast"),
    (_net(["255.255.255.255/32"]), "broadcast"),
    (_net(["240.0.0.0/4"]), "reserved"),
)
_V6_RULES: Rules = (
    (_net(["::/128"]), "unspecified"),
    (_net(["::1/128"]), "loopback"),
    (_net(["::/96"]), "ipv4_compatible"),
    (_net(["64:ff9b:1::/48"]), "nat64_local_use"),
    (_net(["2001::/32"]), "teredo"),
    (_net(["2001:db8::/32", "3fff::/20"]), "documentation"),
    (_net(["fc00::/7"]), "unique_local"),
    (_net(["fe80::/10"]), "link_local"),
    (_net(["fec0::/10"]), "site_local"),
    (_net(["ff00::/8"]), "multicast"),
    (_net(["100::/64"]), "discard_only"),
)
_NAT64_WKP = ipaddress.ip_network("64:ff9b::/96")
_SIXTOFOUR = ipaddress.ip_network("2002::/16")


@functools.lru_cache(maxsize=4096)
def non_public_reason(addr: IPAddress) -> str | None:
    """Why ``addr`` is not a public unicast address, or ``None`` if it is. Pure (cached)."""
    if isinstance(addr, ipaddress.IPv6Address):
        if addr.scope_id:
            return "zone_id"
        mapped = addr.ipv4_mapped
        if mapped is not None:
            inner = non_public_reason(mapped)
            return f"ipv4_mapped_{inner}" if inner else None
        if addr in _NAT64_WKP:
            inner = non_public_reason(ipaddress.IPv4Address(int(addr) & 0xFFFFFFFF))
            return f"nat64_{inner}" if inner else None
        if addr in _SIXTOFOUR:
            embedded = addr.sixtofour
            assert embedded is not None
            inner = non_public_reason(embedded)
            return f"6to4_{inner}" if inner else None
        rules = _V6_RULES
    else:
        rules = _V4_RULES
    for nets, reason in rules:
        if any(addr in n for n in nets):
            return reason
    if not addr.is_global:
        return "not_global"
    return None


_HOST_LABEL = re.compile(r"^(?!-)[a-z0-9_-]{1,63}(?<!-)$")
_FORBIDDEN_CHARS = re.compile(r"[\s\\\x00-\x1f\x7f]")
_NUMERIC_LABEL = re.compile(r"^(0[xX][0-9a-fA-F]*|[0-9]+)$")


def parse_legacy_ipv4(host: str) -> ipaddress.IPv4Address | None:
    """The IPv4 address a host ending in a number denotes (WHATWG URL / ``inet_aton`` rules:
    1–4 parts, each decimal, octal with a leading ``0`` or hex with ``0x``); ``None`` if the host
    does not end in a number. Raises :class:`AddressRefused` (``invalid_ipv4``) when it ends in
    a number but is no valid address — such a host must never reach a resolver."""
    parts = host.split(".")
    if not _NUMERIC_LABEL.match(parts[-1]):
        return None
    if len(parts) > 4:
        raise AddressRefused("invalid_ipv4", f"{host!r} ends in a number but has too many parts")
    values: list[int] = []
    for part in parts:
        if part[:2].lower() == "0x":
            digits, base = part[2:] or "0", 16
        elif len(part) > 1 and part.startswith("0"):
            digits, base = part[1:], 8
        else:
            digits, base = part, 10
        try:
            values.append(int(digits, base))
        except ValueError:
            raise AddressRefused("invalid_ipv4", f"{host!r}: bad number {part!r}") from None
    if any(v > 255 for v in values[:-1]) or values[-1] >= 256 ** (5 - len(values)):
        raise AddressRefused("invalid_ipv4", f"{host!r}: a part is out of range")
    number = values[-1]
    for i, v in enumerate(values[:-1]):
        number += v << (8 * (3 - i))
    return ipaddress.IPv4Address(number)


async def system_resolver(host: str, port: int) -> list[str]:
    """Resolve with the event loop's ``getaddrinfo`` (a worker thread); TCP addresses only."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    return [str(info[4][0]) for info in infos]


class AddressPolicy:
    """Decides whether a URL may be called, and pins the addresses it may be called at.

    ``allow``: operator allowlist, CIDRs and/or ``host:port`` entries; the only way to reach a
    non-public address. ``resolver``: injected for tests (no DNS needed); defaults to
    :func:`system_resolver`. ``cache_ttl_s``: a name's answer is reused for this long (0: resolve
    on every check). Caching does not weaken the guarantee: every answer, cached or fresh, is
    judged on every check, and the sender connects only to the addresses of the check it got; a
    rebinding inside the TTL just goes unnoticed until the entry expires. At most
    ``cache_size`` names are kept. Safe to share across the tasks of one event loop.
    """

    def __init__(
        self,
        allow: Iterable[str] = (),
        resolver: Resolver | None = None,
        *,
        cache_ttl_s: float = 10.0,
        cache_size: int = 10_000,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        nets: list[Network] = []
        host_ports: set[tuple[str, int]] = set()
        for entry in allow:
            entry = entry.strip()
            try:
                nets.append(ipaddress.ip_network(entry, strict=False))
                continue
            except ValueError:
                pass
            host, sep, port = entry.rpartition(":")
            if not sep or not port.isdigit() or not host:
                raise ValueError(f"allowlist entry {entry!r} is neither a CIDR nor host:port")
            host = host.removeprefix("[").removesuffix("]").lower().rstrip(".")
            literal = _as_ip(host)
            host_ports.add((str(literal) if literal else host, int(port)))
        self._nets = tuple(nets)
        self._host_ports = frozenset(host_ports)
        self._resolver: Resolver = resolver or system_resolver
        self._ttl = cache_ttl_s
        self._cache_size = cache_size
        self._monotonic = monotonic
        self._cache: dict[tuple[str, int], tuple[float, tuple[IPAddress, ...]]] = {}
        self._allowed_memo: dict[tuple[str, int, IPAddress], bool] = {}

    def _allowed(self, host: str, port: int, addr: IPAddress) -> bool:
        """Whether the allowlist lets ``addr`` through for ``host:port`` (remembered: the
        allowlist never changes)."""
        key = (host, port, addr)
        known = self._allowed_memo.get(key)
        if known is None:
            if len(self._allowed_memo) >= self._cache_size:
                self._allowed_memo.clear()
            known = self._allowed_memo[key] = (
                (host, port) in self._host_ports
                or (str(addr), port) in self._host_ports
                or any(addr.version == n.version and addr in n for n in self._nets)
            )
        return known

    async def check(self, url: str | URL) -> CheckedTarget:
        """Parse, resolve and judge ``url``; see the module docstring for the contract."""
        parsed, host, port, literal = parse_target(url)
        addresses = (literal,) if literal is not None else await self._resolve(host, port)
        return self._judge(parsed, host, port, literal, addresses)

    def check_now(self, url: str | URL) -> CheckedTarget | None:
        """:meth:`check` without waiting: the same judgement when ``url``'s host is an IP
        literal or its answer is cached; None when it needs a lookup (then :meth:`check`)."""
        parsed, host, port, literal = parse_target(url)
        if literal is not None:
            return self._judge(parsed, host, port, literal, (literal,))
        if self._ttl <= 0:
            return None
        hit = self._cache.get((host, port))
        if hit is None or hit[0] <= self._monotonic():
            return None
        return self._judge(parsed, host, port, literal, hit[1])

    def _judge(
        self,
        parsed: URL,
        host: str,
        port: int,
        literal: IPAddress | None,
        addresses: tuple[IPAddress, ...],
    ) -> CheckedTarget:
        # RFC 6761: "localhost" names this machine whatever a resolver says about it.
        local_name = host == "localhost" or host.endswith(".localhost")
        for addr in addresses:
            reason = "loopback_name" if local_name else non_public_reason(addr)
            if reason is not None and not self._allowed(host, port, addr):
                shown = host if literal is not None else f"{host} -> {addr}"
                raise AddressRefused(reason, f"{shown} is not a public address ({reason})")
        return CheckedTarget(parsed, host, port, addresses, literal is not None)

    async def _resolve(self, host: str, port: int) -> tuple[IPAddress, ...]:
        if self._ttl > 0:
            hit = self._cache.get((host, port))
            now = self._monotonic()
            if hit is not None and hit[0] > now:
                return hit[1]
        addresses = await self._lookup(host, port)
        if self._ttl > 0:
            if len(self._cache) >= self._cache_size:
                del self._cache[next(iter(self._cache))]  # the oldest entry
            self._cache.pop((host, port), None)
            self._cache[(host, port)] = (self._monotonic() + self._ttl, addresses)
        return addresses

    async def _lookup(self, host: str, port: int) -> tuple[IPAddress, ...]:
        try:
            raw = await self._resolver(host, port)
        except OSError as exc:
            raise ResolutionError(f"{host}: {exc}") from exc
        seen: dict[IPAddress, None] = {}  # ordered, deduplicated
        for text in raw:
            try:  # a scoped "fe80::1%eth0" parses, keeps its scope and is refused as zone_id
                seen[ipaddress.ip_address(text)] = None
            except ValueError:
                raise AddressRefused("bad_resolver_answer", f"{host}: {text!r}") from None
        if not seen:
            raise ResolutionError(f"{host}: no address")
        return tuple(seen)


def _as_ip(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def parse_target(url: str | URL) -> tuple[URL, str, int, IPAddress | None]:
    """Strictly parse ``url``: ``(url to send, normalised host, port, IP if a literal)``.
    Raises :class:`AddressRefused` for every malformed or hostile form. Pure (no I/O); results
    for URL strings are cached (a trigger calls the same URL again and again)."""
    return _parse_cached(url) if isinstance(url, str) else _parse(url)


@functools.lru_cache(maxsize=4096)
def _parse_cached(url: str) -> tuple[URL, str, int, IPAddress | None]:
    return _parse(url)


def _parse(url: str | URL) -> tuple[URL, str, int, IPAddress | None]:
    if isinstance(url, str):
        if _FORBIDDEN_CHARS.search(url):
            raise AddressRefused("invalid_url", "whitespace, control character or backslash")
        try:
            url = URL(url)
        except ValueError as exc:
            raise AddressRefused("invalid_url", str(exc)) from None
    if url.scheme not in ("http", "https"):
        raise AddressRefused("bad_scheme", f"scheme {url.scheme!r} is not http or https")
    if url.raw_user is not None or url.raw_password is not None:
        raise AddressRefused("userinfo", "credentials in the URL are not allowed")
    raw_host = url.raw_host
    if not raw_host:
        raise AddressRefused("empty_host", "the URL has no host")
    if "%" in raw_host:
        raise AddressRefused("zone_id", f"IPv6 zone ids are not allowed ({url.host!r})")
    try:
        port = url.port
    except ValueError as exc:
        raise AddressRefused("invalid_port", str(exc)) from None
    if port is None or not 0 < port < 65536:
        raise AddressRefused("invalid_port", f"port {port!r}")
    host = raw_host.lower()
    if host.endswith("."):
        host = host[:-1]
    if not host or _FORBIDDEN_CHARS.search(host):
        raise AddressRefused("invalid_host", f"{raw_host!r}")
    literal: IPAddress | None
    if ":" in host:
        literal = _as_ip(host)
        if literal is None:
            raise AddressRefused("invalid_host", f"{raw_host!r} is not an IPv6 address")
    else:
        literal = parse_legacy_ipv4(host)
    if literal is not None:
        host = str(literal)
    elif len(host) > 253 or not all(_HOST_LABEL.match(label) for label in host.split(".")):
        raise AddressRefused("invalid_host", f"{raw_host!r} is not a valid host name")
    rebuilt = URL.build(
        scheme=url.scheme,
        host=f"[{host}]" if ":" in host else host,
        port=url.explicit_port,
        path=url.raw_path,
        query_string=url.raw_query_string,
        encoded=True,
    )
    return rebuilt, host, port, literal
