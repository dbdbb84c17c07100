"""SigV4 for the HTTP API (service ``execute-api``): what API Gateway's IAM authorizer checks.

The one signing function of the repository: the client, and through it the CLI, the UI and the benchmarks.

Written from AWS's published algorithm with ``hashlib``/``hmac`` instead of calling botocore's ``SigV4Auth``:
importing ``botocore.auth`` (and ``botocore.compat``, ``botocore.utils``, urllib3 under them) cost every CLI command
~70 ms of CPU, a quarter of a command's whole run. It signs exactly as ``SigV4Auth(credentials, "execute-api",
region)`` does, header for header: tests/unit/client/test_signing.py compares the two on generated requests (paths
with dot segments and escapes, query strings, repeated and spaced headers, session tokens, empty and binary bodies),
and every e2e test sends its calls through the local front door, which checks them with botocore's canonical request.
botocore still resolves the credentials of a deployed stack (its credential chain: profiles, SSO, roles).
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any
from urllib.parse import quote, urlsplit

SERVICE = "execute-api"
# Never signed (botocore's SIGNED_HEADERS_BLACKLIST): hop-by-hop headers and ones proxies may change.
UNSIGNED_HEADERS = frozenset({
    "baggage", "connection", "expect", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "traceparent",
    "tracestate", "trailer", "transfer-encoding", "upgrade", "user-agent", "x-amzn-trace-id",
})  # fmt: skip
_DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class StaticCredentials:
    """An access key (and a session token for temporary ones): what ``signed_headers`` reads from credentials."""

    access_key: str
    secret_key: str
    token: str | None = None


def signed_headers(method: str, url: str, body: bytes | None, headers: dict[str, str], credentials: Any,
                   region: str, *, now: datetime | None = None) -> dict[str, str]:  # fmt: skip
    """``headers`` plus ``Authorization``, ``X-Amz-Date`` (and ``X-Amz-Security-Token`` for session credentials).

    ``credentials``: ``StaticCredentials`` or botocore credentials (refreshable ones are frozen per call, so a
    rotation is picked up). ``now``: the signing time (default: the current time).
    """
    frozen = credentials.get_frozen_credentials() if hasattr(credentials, "get_frozen_credentials") else credentials
    when = (now or datetime.now(timezone.utc)).replace(microsecond=0)
    stamp = when.strftime("%Y%m%dT%H%M%SZ")
    out = _without(headers, "authorization")
    if any(k.lower() == "date" for k in out):  # a Date header given is set to the signing time (and no X-Amz-Date)
        from email.utils import formatdate

        out = {**_without(out, "date"), "Date": formatdate(when.timestamp())}
    else:
        out = {**_without(out, "x-amz-date"), "X-Amz-Date": stamp}
    if frozen.token:
        out = {**_without(out, "x-amz-security-token"), "X-Amz-Security-Token": frozen.token}
    parts = urlsplit(url)
    to_sign: dict[str, list[str]] = {}
    for name, value in out.items():
        if name.lower() not in UNSIGNED_HEADERS:
            to_sign.setdefault(name.lower(), []).append(value)
    to_sign.setdefault("host", [_host(parts)])
    names = sorted(to_sign)
    signed = ";".join(names)
    canonical = "\n".join([
        method.upper(),
        quote(_without_dot_segments(parts.path), safe="/~"),
        "&".join(f"{k}={v}" for k, v in sorted(p.partition("=")[::2] for p in parts.query.split("&") if parts.query)),
        "".join(f"{n}:{','.join(' '.join(v.split()) for v in to_sign[n])}\n" for n in names),
        signed,
        hashlib.sha256(body or b"").hexdigest(),
    ])  # fmt: skip
    scope = f"{stamp[:8]}/{region}/{SERVICE}/aws4_request"
    string_to_sign = f"AWS4-HMAC-SHA256\n{stamp}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
    key = f"AWS4{frozen.secret_key}".encode()
    for part in (stamp[:8], region, SERVICE, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    signature = hmac.new(key, string_to_sign.encode(), hashlib.sha256).hexdigest()
    out["Authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={frozen.access_key}/{scope}, SignedHeaders={signed}, Signature={signature}"
    )
    return out


def _without(headers: dict[str, str], name: str) -> dict[str, str]:
    """``headers`` without any spelling of ``name`` (lowercase): the signer replaces it, as botocore's does."""
    return {k: v for k, v in headers.items() if k.lower() != name}


def _host(parts: Any) -> str:
    """The Host header as the URL gives it: lowercase, without userinfo, without the scheme's default port."""
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 literal
        host = f"[{host}]"
    if parts.port is not None and parts.port != _DEFAULT_PORTS.get(parts.scheme):
        host = f"{host}:{parts.port}"
    return host


def _without_dot_segments(path: str) -> str:
    """RFC 3986 5.2.4, and no empty segments (AWS's canonical path): ``/a/./b/../c//d/`` -> ``/a/c/d/``."""
    if not path:
        return "/"
    kept: list[str] = []
    for segment in path.split("/"):
        if segment == "..":
            if kept:
                kept.pop()
        elif segment and segment != ".":
            kept.append(segment)
    return ("/" if path.startswith("/") else "") + "/".join(kept) + ("/" if path.endswith("/") and kept else "")
