"""Where a webhook may be sent: the SSRF defences, applied when a job is submitted and again at every delivery.

- On AWS only ``https://``. ``http://`` is accepted only for a loopback address when the deployment says so
  (``WEBHOOK_ALLOW_LOOPBACK_HTTP``: the local stack's setting, never a template default): a literal ``127.0.0.1`` /
  ``::1``, or a name under ``.test`` (RFC 6761: reserved for testing, never delegated on the internet) that resolves
  to loopback addresses only - the local stack's resolver hook answers such names (local/README.md).
- Ports (issue 33 item 8, docs/decisions.md): an ``https://`` webhook uses port 443 or 8443 (``ALLOWED_PORTS``),
  nothing else, checked before any lookup. Only the local stack's loopback receivers (below) use any port.
- The host is resolved and *every* address must be an ordinary global unicast address. Refused, whatever Python's
  ``ipaddress`` knows (its ``is_global`` depends on the Python patch release: 3.13.0 calls ``3fff::/20``,
  ``5f00::/16`` and ``::ffff:0:a.b.c.d`` global):
  - every block of the IANA IPv4 and IPv6 Special-Purpose Address Registries (RFC 6890; ``SPECIAL_PURPOSE``, with
    each entry's "Globally Reachable" column), including the globally reachable ones (they are anycast protocol
    endpoints such as PCP, TURN, AS112 and AMT relays, never a webhook receiver), except the NAT64 prefix
    ``64:ff9b::/96``, judged by the IPv4 address it embeds;
  - IPv4 multicast (224/4), and in IPv6 everything outside ``2000::/3``, the only range IANA allocates as global
    unicast (``fc00::/7``, ``fe80::/10``, site-local ``fec0::/10``, multicast ``ff00::/8``, SRv6 SIDs ``5f00::/16``,
    the IPv4-translated ``::ffff:0:a.b.c.d`` of RFC 2765/6145, ...), except the two forms judged by their IPv4 address;
  - the metadata services' IPv6 addresses.
  An IPv6 address that embeds an IPv4 one is judged first by the IPv4 address it reaches (the refusal names it):
  IPv4-mapped ``::ffff:a.b.c.d``, NAT64 ``64:ff9b::a.b.c.d`` (a NAT64 gateway connects to the IPv4 address:
  ``64:ff9b::a9fe:a9fe`` is 169.254.169.254), IPv4-compatible ``::a.b.c.d`` and 6to4 ``2002:AABB:CCDD::/48``. Only
  NAT64 and IPv4-compatible addresses of a public IPv4 address pass: IPv4-mapped and 6to4 are special-purpose blocks
  (no host publishes a mapped address; 6to4 relays are deprecated, RFC 7526).
- The URL carries no credentials (``user:pass@``), and a delivery sends the URL's authority exactly as written as its
  ``Host`` header (``https://h/`` -> ``h``; http.client alone would send ``h:443``, its default port being 80).
- A host that does not resolve (``EAI_AGAIN``, ``SERVFAIL``, ``NXDOMAIN``, a resolver timeout) raises
  ``WebhookUnresolved``: refused when a job is submitted, but a delivery retries it on the schedule (DNS failures are
  often temporary). Only an address that resolved and is refused by policy ends a delivery's retries.
- The delivery connects to the address that was checked (no second DNS answer can swap it: DNS rebinding), with short
  connect and read timeouts, and never follows a redirect (a 3xx is a failed attempt).
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from omnireel.core.errors import InvalidRequest

Resolver = Callable[[str, int], list[str]]
_LOOPBACK_HOSTS = {"127.0.0.1", "::1"}
_METADATA = {ipaddress.ip_address("fd00:ec2::254")}  # EC2's IPv6 metadata endpoint (inside fc00::/7 anyway)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")  # RFC 6052 well-known prefix: the last 32 bits are the IPv4 address
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")  # RFC 4291 (deprecated) ::a.b.c.d; :: and ::1 are judged as they are
_SITE_LOCAL = ipaddress.ip_network("fec0::/10")  # RFC 3879 (deprecated), still routed inside some networks
_IPV4_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")  # RFC 2765/6145: ::ffff:0:a.b.c.d, a translator's own form
_GLOBAL_UNICAST = ipaddress.ip_network("2000::/3")  # IANA IPv6 Address Space: the only global unicast allocation
_MULTICAST_V4 = ipaddress.ip_network("224.0.0.0/4")  # RFC 5771 (the multicast registry, not the special-purpose one)
# Ports an https:// webhook may use (docs/decisions.md, 2026-12-04): 443, and 8443 where 443 is taken.
ALLOWED_PORTS = frozenset({443, 8443})

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class SpecialBlock:
    """One entry of an IANA special-purpose address registry."""

    network: Network
    name: str
    rfc: str
    globally_reachable: bool | None  # the registry's column; None: N/A (or none given)


def _block(network: str, name: str, rfc: str, reachable: bool | None) -> SpecialBlock:
    return SpecialBlock(ipaddress.ip_network(network), name, rfc, reachable)


# The IANA IPv4 and IPv6 Special-Purpose Address Registries (RFC 6890), every entry, as last updated (IPv4:
# 2025-01; IPv6: 2025-05, with 100:0:0:1::/64 of RFC 9780). Every block is refused, whatever its "Globally Reachable"
# (kept for reference), except NAT64 64:ff9b::/96 (judged by the IPv4 address it embeds): see the module docstring.
SPECIAL_PURPOSE: tuple[SpecialBlock, ...] = (
    _block("0.0.0.0/8", '"this network"', "RFC 791", False),
    _block("0.0.0.0/32", '"this host on this network"', "RFC 1122", False),
    _block("10.0.0.0/8", "private-use", "RFC 1918", False),
    _block("100.64.0.0/10", "shared address space", "RFC 6598", False),
    _block("127.0.0.0/8", "loopback", "RFC 1122", False),
    _block("169.254.0.0/16", "link-local", "RFC 3927", False),
    _block("172.16.0.0/12", "private-use", "RFC 1918", False),
    _block("192.0.0.0/24", "IETF protocol assignments", "RFC 6890", False),
    _block("192.0.0.0/29", "IPv4 service continuity prefix", "RFC 7335", False),
    _block("192.0.0.8/32", "IPv4 dummy address", "RFC 7600", False),
    _block("192.0.0.9/32", "Port Control Protocol anycast", "RFC 7723", True),
    _block("192.0.0.10/32", "TURN anycast", "RFC 8155", True),
    _block("192.0.0.170/32", "NAT64/DNS64 discovery", "RFC 7050", False),
    _block("192.0.0.171/32", "NAT64/DNS64 discovery", "RFC 7050", False),
    _block("192.0.2.0/24", "documentation (TEST-NET-1)", "RFC 5737", False),
    _block("192.31.196.0/24", "AS112-v4", "RFC 7535", True),
    _block("192.52.193.0/24", "AMT", "RFC 7450", True),
    _block("192.88.99.0/24", "deprecated 6to4 relay anycast", "RFC 7526", None),
    _block("192.88.99.2/32", "6a44-relay anycast", "RFC 6751", True),
    _block("192.168.0.0/16", "private-use", "RFC 1918", False),
    _block("192.175.48.0/24", "direct delegation AS112 service", "RFC 7534", True),
    _block("198.18.0.0/15", "benchmarking", "RFC 2544", False),
    _block("198.51.100.0/24", "documentation (TEST-NET-2)", "RFC 5737", False),
    _block("203.0.113.0/24", "documentation (TEST-NET-3)", "RFC 5737", False),
    _block("240.0.0.0/4", "reserved", "RFC 1112", False),
    _block("255.255.255.255/32", "limited broadcast", "RFC 919", False),
    _block("::1/128", "loopback", "RFC 4291", False),
    _block("::/128", "unspecified", "RFC 4291", False),
    _block("::ffff:0:0/96", "IPv4-mapped", "RFC 4291", False),
    _block("64:ff9b::/96", "IPv4-IPv6 translation (NAT64)", "RFC 6052", True),
    _block("64:ff9b:1::/48", "local-use IPv4-IPv6 translation", "RFC 8215", False),
    _block("100::/64", "discard-only", "RFC 6666", False),
    _block("100:0:0:1::/64", "dummy IPv6 prefix", "RFC 9780", False),
    _block("2001::/23", "IETF protocol assignments", "RFC 2928", False),
    _block("2001::/32", "Teredo", "RFC 4380", None),
    _block("2001:1::1/128", "Port Control Protocol anycast", "RFC 7723", True),
    _block("2001:1::2/128", "TURN anycast", "RFC 8155", True),
    _block("2001:1::3/128", "DNS-SD service registration protocol anycast", "RFC 9665", True),
    _block("2001:2::/48", "benchmarking", "RFC 5180", False),
    _block("2001:3::/32", "AMT", "RFC 7450", True),
    _block("2001:4:112::/48", "AS112-v6", "RFC 7535", True),
    _block("2001:10::/28", "deprecated ORCHID", "RFC 4843", None),
    _block("2001:20::/28", "ORCHIDv2", "RFC 7343", True),
    _block("2001:30::/28", "drone remote ID entity tags", "RFC 9374", True),
    _block("2001:db8::/32", "documentation", "RFC 3849", False),
    _block("2002::/16", "6to4", "RFC 3056", None),
    _block("2620:4f:8000::/48", "direct delegation AS112 service", "RFC 7534", True),
    _block("3fff::/20", "documentation", "RFC 9637", False),
    _block("5f00::/16", "segment routing (SRv6) SIDs", "RFC 9602", False),
    _block("fc00::/7", "unique-local", "RFC 4193", False),
    _block("fe80::/10", "link-local", "RFC 4291", False),
)
_JUDGED_BY_EMBEDDED_IPV4 = {ipaddress.ip_network("64:ff9b::/96")}


def special_block(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> SpecialBlock | None:
    """The most specific special-purpose block holding ``address`` (None: in none)."""
    holding = [b for b in SPECIAL_PURPOSE if b.network.version == address.version and address in b.network]
    return max(holding, key=lambda b: b.network.prefixlen, default=None)


class WebhookRefused(InvalidRequest):
    code = "WebhookRefused"


class WebhookUnresolved(WebhookRefused):
    """The host did not resolve (now): a 400 at submit, a retried attempt at delivery."""

    retryable = True


@dataclass(frozen=True)
class WebhookTarget:
    scheme: str
    host: str
    port: int
    target: str  # path and query, as sent in the request line
    address: str  # the checked IP to connect to
    authority: str = ""  # the URL's host[:port] as written: the Host header (empty: host, and port unless default)

    @property
    def host_header(self) -> str:
        if self.authority:
            return self.authority
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == (443 if self.scheme == "https" else 80) else f"{host}:{self.port}"


def system_resolver(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address reaches, for the forms that embed one (mapped, NAT64, compatible, 6to4)."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in _NAT64 or (address in _IPV4_COMPATIBLE and int(address) > 1):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address.sixtofour


def resolve_within(resolve: Resolver, timeout_s: float) -> Resolver:
    """``resolve`` bounded to ``timeout_s`` seconds (``getaddrinfo`` has no timeout of its own): past it, a
    ``TimeoutError`` (the lookup's thread finishes on its own; its answer is dropped)."""

    def bounded(host: str, port: int) -> list[str]:
        answer: list[list[str]] = []
        failure: list[BaseException] = []

        def run() -> None:
            try:
                answer.append(resolve(host, port))
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
                failure.append(exc)

        thread = threading.Thread(target=run, name="webhook-resolve", daemon=True)
        thread.start()
        thread.join(max(0.0, timeout_s))
        if failure:
            raise failure[0]
        if not answer:
            raise TimeoutError(f"no answer from the resolver within {timeout_s:.1f} s")
        return answer[0]

    return bounded


def _refusal(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    """Why ``address`` may not receive a webhook (None: it may). Python's own classification names the common cases;
    the registries and the global unicast rule decide the rest, so the answer does not depend on the Python release."""
    if isinstance(address, ipaddress.IPv6Address):
        if address in _SITE_LOCAL:
            return "site-local"
        if address in _IPV4_TRANSLATED:
            return f"IPv4-translated (RFC 2765/6145, embeds {ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)})"
        embedded = _embedded_ipv4(address)
        if embedded is not None and (why := _refusal(embedded)):
            return f"{why} (embeds {embedded})"
        if address.ipv4_mapped is not None:  # a public IPv4 address here: still no host's published address
            return _registry_refusal(address)
    if address in _METADATA or address.is_link_local:
        return "link-local (instance metadata)"
    if address.is_loopback:
        return "loopback"
    if address.is_private:
        return "private"
    if not address.is_global or address.is_multicast:
        return "not a public address"
    return _registry_refusal(address)


def _registry_refusal(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    """The version-independent floor: special-purpose blocks, IPv4 multicast, IPv6 outside global unicast."""
    block = special_block(address)
    if block is not None and block.network not in _JUDGED_BY_EMBEDDED_IPV4:
        return f"special-purpose {block.name} ({block.network}, {block.rfc})"
    if isinstance(address, ipaddress.IPv4Address):
        return "multicast" if address in _MULTICAST_V4 else None
    judged = address in _NAT64 or (address in _IPV4_COMPATIBLE and int(address) > 1)
    if address not in _GLOBAL_UNICAST and not judged:
        return "not a global unicast address (outside 2000::/3)"
    return None


def refusal(address: str) -> str | None:
    """Why the literal IP ``address`` may not receive a webhook, or None (for other checks and tests)."""
    return _refusal(ipaddress.ip_address(address.split("%", 1)[0]))


def resolve_target(url: str, *, allow_loopback_http: bool, resolve: Resolver = system_resolver) -> WebhookTarget:
    """Check ``url`` for this deployment and resolve it to the one address a delivery may connect to."""
    parts = urlsplit(url)
    host, scheme = parts.hostname or "", parts.scheme
    if "@" in parts.netloc:  # request.check_webhook_url refuses it at submit; checked again for every delivery
        raise WebhookRefused("webhook: must not carry credentials (user:password@)")
    authority = parts.netloc
    try:
        port = parts.port or (443 if scheme == "https" else 80)
    except ValueError:
        raise WebhookRefused("webhook: the URL's port is not a number from 1 to 65535") from None
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    loopback_http = allow_loopback_http and host in _LOOPBACK_HOSTS
    test_name_http = allow_loopback_http and scheme == "http" and host.endswith(".test")
    if scheme != "https" and not (loopback_http or test_name_http):
        raise WebhookRefused("webhook: must be an https:// URL")
    if port not in ALLOWED_PORTS and not (loopback_http or test_name_http):  # checked before any lookup
        allowed = " or ".join(str(p) for p in sorted(ALLOWED_PORTS))
        raise WebhookRefused(f"webhook: port {port} is not allowed: an https:// webhook uses port {allowed}")
    if loopback_http:  # the local stack's own receivers: a literal loopback address, nothing resolved
        return WebhookTarget(scheme, host, port, target, host, authority)
    try:
        addresses = [ipaddress.ip_address(a.split("%", 1)[0]) for a in resolve(host, port)]
    except UnicodeError as exc:  # not a name any resolver can look up: the same answer every time
        raise WebhookRefused(f"webhook: the host {host[:64]} is not a valid name ({type(exc).__name__})") from None
    except (OSError, ValueError) as exc:
        raise WebhookUnresolved(f"webhook: the host {host[:64]} does not resolve ({_why(exc)})") from None
    if not addresses:
        raise WebhookUnresolved(f"webhook: the host {host[:64]} does not resolve (no address)")
    if test_name_http:  # the local stack's test names: http:// only to loopback addresses
        if not all(address.is_loopback for address in addresses):
            raise WebhookRefused("webhook: must be an https:// URL")
        return WebhookTarget(scheme, host, port, target, str(addresses[0]), authority)
    for address in addresses:
        why = _refusal(address)
        if why:
            raise WebhookRefused(f"webhook: the host {host[:64]} resolves to a {why} address ({address}): refused")
    return WebhookTarget(scheme, host, port, target, str(addresses[0]), authority)


def _why(exc: BaseException) -> str:
    """``EAI_AGAIN``-style name of a resolver error when it has one (``socket.gaierror``), else the exception's type."""
    if isinstance(exc, socket.gaierror):
        for name in ("EAI_AGAIN", "EAI_FAIL", "EAI_NONAME", "EAI_NODATA", "EAI_SYSTEM"):
            if exc.errno == getattr(socket, name, None):
                return f"{name}: {exc.strerror}"
    return type(exc).__name__
