"""Issue 33 item 8: the SSRF filter refuses every block of the IANA special-purpose registries as the code transcribes
them (``target.SPECIAL_PURPOSE``), the IPv4-translated ``::ffff:0:0:0/96``, the documentation ``3fff::/20`` and the SRv6
``5f00::/16`` -- whatever the running Python's ``ipaddress`` knows -- and webhooks use port 443 or 8443 only.

Every check goes through ``resolve_target`` with a stubbed resolver: no lookup and no packet leaves the process.
"""

from __future__ import annotations

import ipaddress

import pytest

from omnireel.webhooks.target import (
    ALLOWED_PORTS,
    SPECIAL_PURPOSE,
    WebhookRefused,
    resolve_target,
    special_block,
)


def _stub(*addresses: str):  # type: ignore[no-untyped-def]
    calls: list[tuple[str, int]] = []

    def resolve(host: str, port: int) -> list[str]:
        calls.append((host, port))
        return list(addresses)

    resolve.calls = calls  # type: ignore[attr-defined]
    return resolve


def _check(address: str, url: str = "https://hooks.example.com/in") -> None:
    resolve_target(url, allow_loopback_http=False, resolve=_stub(address))


def _samples(network: ipaddress.IPv4Network | ipaddress.IPv6Network) -> list[str]:
    """The first, middle and last address of a block."""
    first, last = int(network.network_address), int(network.broadcast_address)
    kind = type(network.network_address)
    return [str(kind(n)) for n in dict.fromkeys((first, (first + last) // 2, last))]


NAT64 = ipaddress.ip_network("64:ff9b::/96")
REGISTRY_SAMPLES = [
    pytest.param(address, id=f"{block.network}:{address}")
    for block in SPECIAL_PURPOSE
    if block.network != NAT64
    for address in _samples(block.network)
]


@pytest.mark.parametrize("address", REGISTRY_SAMPLES)
def test_every_special_purpose_block_is_refused_at_its_first_middle_and_last_address(address: str) -> None:
    with pytest.raises(WebhookRefused, match="refused"):
        _check(address)


def test_the_transcribed_registries_hold_the_blocks_the_issue_names_and_are_well_formed() -> None:
    networks = {str(block.network) for block in SPECIAL_PURPOSE}
    assert {"3fff::/20", "5f00::/16", "2001:db8::/32", "fc00::/7", "fe80::/10", "169.254.0.0/16"} <= networks
    assert len(networks) == len(SPECIAL_PURPOSE), "a block is listed twice"
    assert all(block.rfc.startswith("RFC ") and block.name for block in SPECIAL_PURPOSE)


@pytest.mark.parametrize(
    ("address", "fragment"),
    [
        ("::ffff:0:808:808", "IPv4-translated"),  # RFC 2765/6145 ::ffff:0:8.8.8.8, a public IPv4 address inside
        ("::ffff:0:a9fe:a9fe", "IPv4-translated"),  # ... and the metadata address
        ("::ffff:0:0:0", "IPv4-translated"),
        ("3fff::1", "documentation"),  # RFC 9637
        ("3fff:fff:ffff::1", "documentation"),  # the last /20 of it
        ("5f00::1", "SRv6"),  # RFC 9602
        ("5f00:ffff::1234", "SRv6"),
        ("::ffff:8.8.8.8", "IPv4-mapped"),  # no host publishes a mapped address, whatever IPv4 address it maps
        ("100:0:0:1::1", "dummy IPv6 prefix"),  # RFC 9780
        ("2001:1::3", "private|DNS-SD"),  # globally reachable anycast (Python: private), never a receiver
        ("192.31.196.1", "AS112"),
        ("4000::1", "outside 2000::/3"),  # IANA reserved: not allocated as global unicast
        ("ff0e::1", "not a public address"),  # global-scope multicast
        ("224.0.0.251", "not a public address"),
    ],
)
def test_the_ranges_python_may_call_global_are_refused_by_name(address: str, fragment: str) -> None:
    with pytest.raises(WebhookRefused, match=fragment) as refused:
        _check(address)
    assert str(ipaddress.ip_address(address)) in refused.value.message


def test_the_refusal_does_not_depend_on_the_python_release() -> None:
    """Python 3.13.0 calls 3fff::/20 (before gh-124217), 5f00::/16 and ::ffff:0:a.b.c.d global; the filter does not."""
    for address in ("3fff::1", "5f00::1", "::ffff:0:808:808"):
        with pytest.raises(WebhookRefused):
            _check(address)
        block = special_block(ipaddress.ip_address(address))
        assert block is None or not block.globally_reachable


@pytest.mark.parametrize("address", ["8.8.8.8", "2606:4700::1111", "64:ff9b::808:808", "2a00:1450:4001:80b::200e"])
def test_ordinary_global_unicast_addresses_pass(address: str) -> None:
    target = resolve_target("https://hooks.example.com/in", allow_loopback_http=False, resolve=_stub(address))
    assert target.address == str(ipaddress.ip_address(address))


# ---------------------------------------------------------------- ports
@pytest.mark.parametrize("port", sorted(ALLOWED_PORTS))
def test_an_https_webhook_on_an_allowed_port_passes(port: int) -> None:
    target = resolve_target(f"https://hooks.example.com:{port}/in", allow_loopback_http=False, resolve=_stub("8.8.8.8"))
    assert target.port == port


@pytest.mark.parametrize("port", [22, 25, 80, 444, 1024, 6379, 8080, 8444, 9200, 65535])
def test_any_other_port_is_refused_before_any_lookup_naming_the_rule(port: int) -> None:
    resolve = _stub("8.8.8.8")
    with pytest.raises(WebhookRefused) as refused:
        resolve_target(f"https://hooks.example.com:{port}/in", allow_loopback_http=False, resolve=resolve)
    assert refused.value.message == f"webhook: port {port} is not allowed: an https:// webhook uses port 443 or 8443"
    assert resolve.calls == []  # no lookup, no packet


def test_a_port_outside_1_to_65535_is_a_clear_refusal_not_a_crash() -> None:
    with pytest.raises(WebhookRefused, match="port"):
        resolve_target("https://hooks.example.com:99999/in", allow_loopback_http=False, resolve=_stub("8.8.8.8"))


def test_the_local_stacks_loopback_receivers_keep_any_port() -> None:
    local = resolve_target("http://127.0.0.1:38123/h", allow_loopback_http=True, resolve=_stub())
    assert local.port == 38123
    named = resolve_target("http://receiver.test:38124/h", allow_loopback_http=True, resolve=_stub("127.0.0.1"))
    assert named.port == 38124
    with pytest.raises(WebhookRefused, match="port 38123"):  # never on a stack that does not allow loopback http
        resolve_target("https://127.0.0.1:38123/h", allow_loopback_http=False, resolve=_stub("127.0.0.1"))
