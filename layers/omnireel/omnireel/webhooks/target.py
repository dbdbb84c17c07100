"""Where a webhook may be sent: the SSRF defences, applied when a job is submitted and again at every delivery.

- On AWS only ``https://``. ``http://`` is accepted only for a loopback address when the deployment says so
  (``WEBHOOK_ALLOW_LOOPBACK_HTTP``: the local stack's setting, never a template default): a literal ``127.0.0.1`` /
  ``::1``, or a name under ``.test`` (RFC 6761: reserved for testing, never delegated on the internet) that resolves
  to loopback addresses only - the local stack's resolver hook answers such names (local/README.md).
- The host is resolved and *every* address must be global: private (10/8, 172.16/12, 192.168/16, fc00::/7), loopback,
  link-local (169.254/16 - the instance metadata service - and fe80::/10), site-local (fec0::/10), shared (100.64/10),
  multicast, reserved and unspecified addresses are refused, as are the metadata services' IPv6 addresses. An IPv6
  address that embeds an IPv4 one is judged by the IPv4 address it reaches: IPv4-mapped ``::ffff:a.b.c.d``, NAT64
  ``64:ff9b::a.b.c.d`` (a NAT64 gateway connects to the IPv4 address: ``64:ff9b::a9fe:a9fe`` is 169.254.169.254),
  IPv4-compatible ``::a.b.c.d`` and 6to4 ``2002:AABB:CCDD::/48``. Python's ``is_global`` counts several of these as
  global, so they are checked here, not left to it.
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
    if isinstance(address, ipaddress.IPv6Address):
        if address in _SITE_LOCAL:
            return "site-local"
        embedded = _embedded_ipv4(address)
        if embedded is not None and (why := _refusal(embedded)):
            return f"{why} (embeds {embedded})"
        if address.ipv4_mapped is not None:
            address = address.ipv4_mapped
    if address in _METADATA or address.is_link_local:
        return "link-local (instance metadata)"
    if address.is_loopback:
        return "loopback"
    if address.is_private:
        return "private"
    if not address.is_global or address.is_multicast:
        return "not a public address"
    return None


def resolve_target(url: str, *, allow_loopback_http: bool, resolve: Resolver = system_resolver) -> WebhookTarget:
    """Check ``url`` for this deployment and resolve it to the one address a delivery may connect to."""
    parts = urlsplit(url)
    host, scheme = parts.hostname or "", parts.scheme
    if "@" in parts.netloc:  # request.check_webhook_url refuses it at submit; checked again for every delivery
        raise WebhookRefused("webhook: must not carry credentials (user:password@)")
    authority = parts.netloc
    port = parts.port or (443 if scheme == "https" else 80)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    loopback_http = allow_loopback_http and host in _LOOPBACK_HOSTS
    test_name_http = allow_loopback_http and scheme == "http" and host.endswith(".test")
    if scheme != "https" and not (loopback_http or test_name_http):
        raise WebhookRefused("webhook: must be an https:// URL")
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
