"""Where a webhook may be sent: the SSRF defences, applied when a job is submitted and again at every delivery.

- On AWS only ``https://``. ``http://`` is accepted only for a loopback address when the deployment says so
  (``WEBHOOK_ALLOW_LOOPBACK_HTTP``: the local stack's setting, never a template default).
- The host is resolved and *every* address must be global: private (10/8, 172.16/12, 192.168/16, fc00::/7), loopback,
  link-local (169.254/16 - the instance metadata service - and fe80::/10), shared (100.64/10), multicast, reserved and
  unspecified addresses are refused, IPv4-mapped IPv6 included, as are the metadata services' IPv6 addresses.
- The delivery connects to the address that was checked (no second DNS answer can swap it: DNS rebinding), with short
  connect and read timeouts, and never follows a redirect (a 3xx is a failed attempt).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from omnireel.errors import InvalidRequest

Resolver = Callable[[str, int], list[str]]
_LOOPBACK_HOSTS = {"127.0.0.1", "::1"}
_METADATA = {ipaddress.ip_address("fd00:ec2::254")}  # EC2's IPv6 metadata endpoint (inside fc00::/7 anyway)


class WebhookRefused(InvalidRequest):
    code = "WebhookRefused"


@dataclass(frozen=True)
class WebhookTarget:
    scheme: str
    host: str
    port: int
    target: str  # path and query, as sent in the request line
    address: str  # the checked IP to connect to


def system_resolver(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def _refusal(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
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
    port = parts.port or (443 if scheme == "https" else 80)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    loopback_http = allow_loopback_http and host in _LOOPBACK_HOSTS
    if scheme != "https" and not loopback_http:
        raise WebhookRefused("webhook: must be an https:// URL")
    if loopback_http:  # the local stack's own receivers: a literal loopback address, nothing resolved
        return WebhookTarget(scheme, host, port, target, host)
    try:
        addresses = [ipaddress.ip_address(a.split("%", 1)[0]) for a in resolve(host, port)]
    except (OSError, UnicodeError, ValueError) as exc:
        raise WebhookRefused(f"webhook: the host {host[:64]} does not resolve ({type(exc).__name__})") from None
    if not addresses:
        raise WebhookRefused(f"webhook: the host {host[:64]} does not resolve")
    for address in addresses:
        why = _refusal(address)
        if why:
            raise WebhookRefused(f"webhook: the host {host[:64]} resolves to a {why} address ({address}): refused")
    return WebhookTarget(scheme, host, port, target, str(addresses[0]))
