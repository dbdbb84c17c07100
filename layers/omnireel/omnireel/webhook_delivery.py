"""Delivering one event to one webhook: Standard Webhooks signature, a pinned POST, and the retry schedule.

Signature (https://www.standardwebhooks.com): ``webhook-id`` (the event id: stable across retries, the consumer's
de-duplication key), ``webhook-timestamp`` (unix seconds of this attempt) and ``webhook-signature: v1,<base64
HMAC-SHA256 of "<id>.<timestamp>.<body>">`` with the owner's ``whsec_`` secret (``omnireel.webhook_signing``; two
space-separated signatures during a rotation's grace period), computed by the ``standardwebhooks`` library.
The body is sent byte for byte as it was signed.

Retries: the delivery function is fed by SQS; a failed attempt makes its message invisible for ``retry_delay_s``
(exponential, capped at SQS's 12-hour maximum visibility), and after ``max_attempts`` receives SQS moves it to the
dead-letter queue. The template keeps the schedule over 24 hours (a test sums it).
"""

from __future__ import annotations

import http.client
import socket
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from standardwebhooks.webhooks import Webhook

from omnireel.webhook_target import WebhookTarget

MAX_VISIBILITY_S = 43200  # SQS ChangeMessageVisibility maximum (12 hours)
USER_AGENT = "omnireel-webhooks/1"
MAX_RESPONSE_BYTES = 1024


def retry_delay_s(attempt: int, base_s: int) -> int:
    """How long to wait after failed attempt number ``attempt`` (1-based)."""
    return min(base_s * 2 ** min(attempt - 1, 20), MAX_VISIBILITY_S)


def retry_span_s(base_s: int, max_attempts: int) -> int:
    """Seconds from the first attempt to the last (the delays between ``max_attempts`` attempts)."""
    return sum(retry_delay_s(n, base_s) for n in range(1, max_attempts))


def signed_headers(secret: str | Sequence[str], event_id: str, body: str, at: datetime) -> dict[str, str]:
    """``secret``: one ``whsec_`` secret, or several (a rotation's grace period: the new one first): one ``v1,<sig>``
    entry each, space-separated, as Standard Webhooks specifies (a receiver verifies if any entry matches)."""
    secrets = [secret] if isinstance(secret, str) else list(secret)
    if not secrets:
        raise ValueError("no secret to sign with")
    return {
        "webhook-id": event_id,
        "webhook-timestamp": str(int(at.timestamp())),
        "webhook-signature": " ".join(Webhook(s).sign(event_id, at, body) for s in secrets),
        "content-type": "application/json",
        "user-agent": USER_AGENT,
    }


@dataclass(frozen=True)
class AttemptResult:
    status: int | None  # the consumer's HTTP status; None when no answer came
    error: str | None = None

    @property
    def delivered(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


def post(
    target: WebhookTarget,
    body: bytes,
    headers: dict[str, str],
    *,
    connect_timeout_s: float,
    read_timeout_s: float,
    tls: ssl.SSLContext | None = None,
) -> AttemptResult:
    """POST ``body`` to the checked address of ``target`` (TLS verified against the host name); no redirects."""
    try:
        sock = socket.create_connection((target.address, target.port), timeout=connect_timeout_s)
    except OSError as exc:
        return AttemptResult(None, f"connect: {type(exc).__name__}: {exc}"[:300])
    try:
        sock.settimeout(read_timeout_s)
        if target.scheme == "https":
            sock = (tls or ssl.create_default_context()).wrap_socket(sock, server_hostname=target.host)
        connection = http.client.HTTPConnection(target.host, target.port, timeout=read_timeout_s)
        connection.sock = sock  # already connected to the checked address: no second resolution
        # Host: the URL's authority as written (a Host header given here replaces http.client's host:port, which names
        # port 443 on every https request because HTTPConnection's default port is 80).
        connection.request("POST", target.target, body=body, headers={**headers, "Host": target.host_header})
        response = connection.getresponse()
        response.read(MAX_RESPONSE_BYTES)
        error = None
        if 300 <= response.status < 400:
            error = "redirects are not followed"
        elif not 200 <= response.status < 300:
            error = f"HTTP {response.status}"
        return AttemptResult(response.status, error)
    except (OSError, http.client.HTTPException, ssl.SSLError) as exc:
        return AttemptResult(None, f"{type(exc).__name__}: {exc}"[:300])
    finally:
        sock.close()
