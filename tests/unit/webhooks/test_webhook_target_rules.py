"""Issue 25 items 2 and 7: the SSRF filter judges IPv6 forms that embed an IPv4 address (NAT64, IPv4-compatible,
6to4) by that address and refuses site-local fec0::/10, with a stubbed resolver (no packet leaves loopback); a delivery
sends the URL's authority as written as its ``Host`` header (a loopback TLS server made here records it)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import http.server
import ipaddress
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from omnireel.webhooks.delivery import post
from omnireel.webhooks.dispatch import QueuedEvent, deliver
from omnireel.webhooks.target import WebhookRefused, WebhookTarget, resolve_target


def _resolver(*addresses: str):  # type: ignore[no-untyped-def]
    def resolve(host: str, port: int) -> list[str]:
        return list(addresses)

    return resolve


# ---------------------------------------------------------------- item 2: SSRF gaps
@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("64:ff9b::a9fe:a9fe", "link-local"),  # NAT64 of 169.254.169.254 (instance metadata)
        ("64:ff9b::a00:1", "private"),  # NAT64 of 10.0.0.1
        ("64:ff9b::7f00:1", "loopback"),  # NAT64 of 127.0.0.1
        ("::a9fe:a9fe", "link-local"),  # IPv4-compatible 169.254.169.254
        ("::10.0.0.1", "private"),  # IPv4-compatible, dotted
        ("::127.0.0.1", "loopback"),
        ("2002:a9fe:a9fe::1", "link-local"),  # 6to4 of 169.254.169.254
        ("2002:c0a8:0101::1", "private"),  # 6to4 of 192.168.1.1
        ("fec0::1", "site-local"),
        ("fed0:1234::5", "site-local"),  # still inside fec0::/10
        ("feff::1", "site-local"),
    ],
)
def test_ipv6_forms_that_reach_internal_addresses_are_refused(address: str, why: str) -> None:
    with pytest.raises(WebhookRefused, match=why) as refused:
        resolve_target("https://hooks.example.com/x", allow_loopback_http=False, resolve=_resolver(address))
    assert f"({ipaddress.ip_address(address)})" in refused.value.message


@pytest.mark.parametrize("address", ["64:ff9b::808:808", "::8.8.8.8", "2606:4700::1111"])
def test_embedded_public_ipv4_and_global_ipv6_stay_allowed(address: str) -> None:
    target = resolve_target("https://hooks.example.com/x", allow_loopback_http=False, resolve=_resolver(address))
    assert target.address == str(ipaddress.ip_address(address))


@pytest.mark.parametrize(("address", "why"), [("::", "private"), ("::1", "loopback")])
def test_the_unspecified_and_loopback_addresses_are_judged_as_themselves(address: str, why: str) -> None:
    with pytest.raises(WebhookRefused, match=why):
        resolve_target("https://hooks.example.com/x", allow_loopback_http=False, resolve=_resolver(address))


def test_a_nat64_metadata_address_at_delivery_is_refused_without_a_connection() -> None:
    sent: list[object] = []
    queued = QueuedEvent("https://hooks.example.com/in", '{"event_id": "ev-1"}', "ev-1", "job.succeeded", None)
    delivery = deliver(
        queued, 1, secret="whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", allow_loopback_http=False, jobs=None,
        now=lambda: dt.datetime(2026, 12, 1, tzinfo=dt.UTC), resolve=_resolver("64:ff9b::a9fe:a9fe"),
        deadline=time.monotonic() + 5, send=lambda *a, **k: sent.append(a),
    )  # fmt: skip
    assert sent == [] and delivery.retry is False and "link-local" in (delivery.result.error or "")


def test_credentials_in_a_webhook_url_are_refused_at_delivery_too() -> None:
    with pytest.raises(WebhookRefused, match="credentials"):
        resolve_target("https://user:pw@hooks.example.com/", allow_loopback_http=False, resolve=_resolver("8.8.8.8"))
    with pytest.raises(WebhookRefused, match="credentials"):
        resolve_target("http://x@127.0.0.1:9000/", allow_loopback_http=True, resolve=_resolver())


# ---------------------------------------------------------------- item 7: Host is the authority as written
@pytest.mark.parametrize(
    ("url", "authority"),
    [
        ("https://hooks.example.com/in", "hooks.example.com"),
        ("https://hooks.example.com:443/in", "hooks.example.com:443"),
        ("https://hooks.example.com:8443/in", "hooks.example.com:8443"),
        ("https://[2606:4700::1111]/in", "[2606:4700::1111]"),
        ("https://[2606:4700::1111]:8443/in", "[2606:4700::1111]:8443"),
    ],
)
def test_the_target_keeps_the_urls_authority_as_written(url: str, authority: str) -> None:
    target = resolve_target(url, allow_loopback_http=False, resolve=_resolver("2606:4700::1111"))
    assert target.host_header == authority


class _Recorder(http.server.BaseHTTPRequestHandler):
    hosts: list[list[str]] = []

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        type(self).hosts.append(self.headers.get_all("Host") or [])
        self.send_response(204)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        return


def _self_signed(tmp: Path, name: str) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp / "cert.pem", tmp / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


@pytest.fixture
def recorder(tmp_path: Path) -> Iterator[tuple[int, int, ssl.SSLContext]]:
    """(https port, http port, a client context trusting the https server's self-signed cert for hooks.example.com);
    both servers on 127.0.0.1 record the Host headers they receive."""
    cert, key = _self_signed(tmp_path, "hooks.example.com")
    server_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_tls.load_cert_chain(cert, key)
    https = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    https.socket = server_tls.wrap_socket(https.socket, server_side=True)
    plain = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    _Recorder.hosts = []
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in (https, plain)]
    for thread in threads:
        thread.start()
    try:
        yield https.server_address[1], plain.server_address[1], ssl.create_default_context(cafile=str(cert))
    finally:
        for server in (https, plain):
            server.shutdown()
            server.server_close()


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("https://hooks.example.com/in", "hooks.example.com"),
        ("https://hooks.example.com:443/in", "hooks.example.com:443"),
    ],
)
def test_an_https_delivery_sends_the_authority_as_written_as_host(
    recorder: tuple[int, int, ssl.SSLContext], url: str, host: str
) -> None:
    """The target is checked as on AWS (stubbed resolver, public address), then pointed at the loopback TLS server: the
    request line, TLS name check and Host header are the ones a real receiver at ``url`` gets."""
    https_port, _, tls = recorder
    checked = resolve_target(url, allow_loopback_http=False, resolve=_resolver("93.184.215.14"))
    local = dataclasses.replace(checked, address="127.0.0.1", port=https_port)
    headers = {"content-type": "application/json"}
    result = post(local, b"{}", headers, connect_timeout_s=2, deadline=time.monotonic() + 5, tls=tls)
    assert result.status == 204, result.error
    assert _Recorder.hosts == [[host]]  # exactly one Host header, the URL's authority


def test_an_http_loopback_delivery_sends_host_and_port(recorder: tuple[int, int, ssl.SSLContext]) -> None:
    _, http_port, _ = recorder
    target = resolve_target(f"http://127.0.0.1:{http_port}/h", allow_loopback_http=True)
    result = post(target, b"{}", {}, connect_timeout_s=2, deadline=time.monotonic() + 5)
    assert result.status == 204, result.error
    assert _Recorder.hosts == [[f"127.0.0.1:{http_port}"]]


def test_a_target_built_without_an_authority_omits_the_default_port() -> None:
    assert WebhookTarget("https", "h.example", 443, "/", "93.184.215.14").host_header == "h.example"
    assert WebhookTarget("https", "2606:4700::1", 8443, "/", "2606:4700::1").host_header == "[2606:4700::1]:8443"
    assert WebhookTarget("http", "127.0.0.1", 80, "/", "127.0.0.1").host_header == "127.0.0.1"
