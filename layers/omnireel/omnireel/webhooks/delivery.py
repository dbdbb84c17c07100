"""Delivering one event to one webhook: Standard Webhooks signature, a pinned POST, and the retry schedule.

Signature (https://www.standardwebhooks.com): ``webhook-id`` (the event id: stable across retries, the consumer's
de-duplication key), ``webhook-timestamp`` (unix seconds of this attempt) and ``webhook-signature: v1,<base64
HMAC-SHA256 of "<id>.<timestamp>.<body>">`` with the owner's ``whsec_`` secret (``omnireel.webhooks.signing``; two
space-separated signatures during a rotation's grace period), computed by the ``standardwebhooks`` library.
The body is sent byte for byte as it was signed.

One deadline per attempt: connecting, the TLS handshake, sending the request and reading the answer (status line,
headers and up to ``MAX_RESPONSE_BYTES`` of body) all end at one ``deadline`` (``time.monotonic()`` seconds). Every
socket operation's timeout is the time left, and a watchdog shuts the socket down at the deadline, so a receiver that
trickles a byte every half second is cut as surely as one that hangs (a per-read timeout alone would wait forever).

Retries: the delivery function is fed by SQS; a failed attempt makes its message invisible for ``retry_delay_s``
(exponential) and after ``max_attempts`` receives SQS moves it to the dead-letter queue. SQS refuses a visibility that
ends more than 12 hours after the receive that produced the receipt handle (``InvalidParameterValue``), so a delay is
capped at ``MAX_VISIBILITY_S`` minus the time since that receive (bounded from above: the time since the invocation
started plus ``RECEIVE_TO_INVOKE_MARGIN_S``) minus ``SAFETY_MARGIN_S``. The template keeps the schedule over 24 hours
(a test sums it).
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import ssl
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from standardwebhooks.webhooks import Webhook

from omnireel.webhooks.target import WebhookTarget

MAX_VISIBILITY_S = 43200  # SQS: a message's visibility may end at most 12 hours after the receive
# The receive that produced a record's receipt handle happened before the invocation started, but the record does not
# say when. Lambda's poller invokes the function while the batch is still invisible (the queue's VisibilityTimeout,
# at most this margin: a template test checks it), so the receive was at most this long before the invocation began.
RECEIVE_TO_INVOKE_MARGIN_S = 300
SAFETY_MARGIN_S = 60  # clock and request latency between measuring the time since the receive and SQS applying it
MAX_DELAY_S = MAX_VISIBILITY_S - RECEIVE_TO_INVOKE_MARGIN_S - SAFETY_MARGIN_S  # 42,840 s: the longest delay asked
USER_AGENT = "omnireel-webhooks/1"
MAX_RESPONSE_BYTES = 1024
# Sizing (template.yaml: the event source's BatchSize, WEBHOOK_DELIVERY_CONCURRENCY, WEBHOOK_ATTEMPT_DEADLINE_SECONDS,
# the function's Timeout and the queue's VisibilityTimeout; tests/unit/template checks the rule):
RECORD_OVERHEAD_S = 5.0  # after a record's attempt: recording it on the job and its ChangeMessageVisibility
INVOCATION_OVERHEAD_S = 5.0  # per invocation: reading the signing secret, Powertools, the response
VISIBILITY_PER_TIMEOUT = 6  # AWS: a queue's visibility timeout at least 6x the function timeout of its consumer


def worst_case_invocation_s(batch_size: int, concurrency: int, deadline_s: float) -> float:
    """An invocation whose every receiver holds its attempt to the deadline: ``concurrency`` records at a time."""
    rounds = -(-batch_size // concurrency)
    return rounds * (deadline_s + RECORD_OVERHEAD_S) + INVOCATION_OVERHEAD_S


def retry_delay_s(attempt: int, base_s: int, *, invoked_s_ago: float = 0.0) -> int:
    """How long to wait after failed attempt number ``attempt`` (1-based): ``base_s`` doubling, within what SQS accepts
    for a receipt handle received at most ``invoked_s_ago`` + ``RECEIVE_TO_INVOKE_MARGIN_S`` seconds ago."""
    cap = int(MAX_DELAY_S - max(0.0, invoked_s_ago))
    return max(0, min(base_s * 2 ** min(attempt - 1, 20), cap))


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


class _Watchdog:
    """Shuts the attempt's socket down at the deadline, so any read or write blocked on it returns at once."""

    def __init__(self, sock: socket.socket, deadline: float):
        self.sock = sock
        self.fired = False
        self._done = False
        self._lock = threading.Lock()
        self._timer = threading.Timer(max(0.0, deadline - time.monotonic()), self._fire)
        self._timer.daemon = True
        self._timer.start()

    def watch(self, sock: socket.socket) -> None:
        """``sock`` replaces the watched socket (the TLS socket wrapping the TCP one)."""
        with self._lock:
            self.sock = sock
            fired = self.fired
        if fired:
            self._fire()

    def _fire(self) -> None:
        with self._lock:
            if self._done:
                return
            self.fired = True
            with contextlib.suppress(OSError):  # the plain socket call: SSLSocket.shutdown would unwrap it
                socket.socket.shutdown(self.sock, socket.SHUT_RDWR)

    def close(self) -> None:
        with self._lock:
            self._done = True
            self._timer.cancel()
            self.sock.close()


def post(
    target: WebhookTarget,
    body: bytes,
    headers: dict[str, str],
    *,
    connect_timeout_s: float,
    deadline: float,
    tls: ssl.SSLContext | None = None,
) -> AttemptResult:
    """POST ``body`` to the checked address of ``target`` (TLS verified against the host name); no redirects. The
    whole attempt ends by ``deadline`` (``time.monotonic()``)."""

    def left() -> float:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("the attempt's deadline passed")
        return remaining

    try:
        sock = socket.create_connection((target.address, target.port), timeout=min(connect_timeout_s, left()))
    except OSError as exc:
        return AttemptResult(None, f"connect: {type(exc).__name__}: {exc}"[:300])
    watchdog = _Watchdog(sock, deadline)
    status: int | None = None
    try:
        sock.settimeout(left())
        if target.scheme == "https":
            sock = (tls or ssl.create_default_context()).wrap_socket(
                sock, server_hostname=target.host, do_handshake_on_connect=False
            )
            watchdog.watch(sock)
            sock.settimeout(left())
            sock.do_handshake()
        connection = http.client.HTTPConnection(target.host, target.port, timeout=left())
        connection.sock = sock  # already connected to the checked address: no second resolution
        sock.settimeout(left())
        # Host: the URL's authority as written (a Host header given here replaces http.client's host:port, which names
        # port 443 on every https request because HTTPConnection's default port is 80).
        connection.request("POST", target.target, body=body, headers={**headers, "Host": target.host_header})
        sock.settimeout(left())
        response = connection.getresponse()
        status = response.status
        sock.settimeout(left())
        response.read(MAX_RESPONSE_BYTES)
        if watchdog.fired:
            raise TimeoutError("the attempt's deadline passed")
        error = None
        if 300 <= response.status < 400:
            error = "redirects are not followed"
        elif not 200 <= response.status < 300:
            error = f"HTTP {response.status}"
        return AttemptResult(response.status, error)
    except (OSError, http.client.HTTPException, ssl.SSLError, ValueError) as exc:
        if watchdog.fired or isinstance(exc, TimeoutError):
            answered = f" (HTTP {status} received, the answer incomplete)" if status is not None else ""
            return AttemptResult(None, f"deadline: the attempt did not finish in time{answered}")
        return AttemptResult(None, f"{type(exc).__name__}: {exc}"[:300])
    finally:
        watchdog.close()
