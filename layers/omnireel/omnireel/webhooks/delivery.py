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

What a caller is told (issue 33 item 8): an attempt's ``outcome`` is one coarse class (``Outcome``), and its ``error``
(``last_error`` on the job) the same sentence for every attempt of that class; the precise cause (connection refused,
timed out, reset, TLS, a resolver error, ...) is its ``detail``, for the logs only. ``unreachable`` covers every attempt
that got no complete HTTP answer, so the job view cannot tell a closed port from a filtered one or from a host that
does not resolve: the stack is no port scanner for whoever sets a webhook URL. ``last_attempt_at`` is when an attempt
started, so its duration (a connect timeout is longer than a refusal) does not show either.

Retries: the delivery function is fed by SQS; a failed attempt makes its message invisible for ``retry_delay_s``
(exponential) and after ``max_attempts`` receives SQS moves it to the dead-letter queue. SQS refuses a visibility that
ends more than 12 hours after the receive that produced the receipt handle (``InvalidParameterValue``), so a delay is
capped at ``MAX_VISIBILITY_S`` minus the time since that receive (bounded from above: the time since the invocation
started plus ``RECEIVE_TO_INVOKE_MARGIN_S``) minus ``SAFETY_MARGIN_S``. The template keeps the schedule over 24 hours
(a test sums it).
"""

from __future__ import annotations

import contextlib
import functools
import http.client
import socket
import ssl
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

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


class Outcome(StrEnum):
    """How an attempt ended, as callers see it (``GET /jobs/{id}``: ``webhook.deliveries.<type>.outcome``)."""

    DELIVERED = "delivered"  # the receiver answered 2xx
    REJECTED = "rejected"  # the receiver answered something else (``last_status`` says what; 3xx: not followed)
    UNREACHABLE = "unreachable"  # no complete HTTP answer: not resolved, connection or TLS failed, timed out, reset
    REFUSED = "refused"  # the target is refused by policy (omnireel.webhooks.target): nothing sent, not retried
    NOT_SIGNED = "not_signed"  # the stack could not read its signing key: nothing sent, retried


UNREACHABLE_ERROR = (
    "unreachable: no complete HTTP answer within the attempt (the host did not resolve, the connection or TLS failed, "
    "or it timed out)"
)
NOT_SIGNED_ERROR = "not sent: the webhook signing key could not be read (an operator must act; retried)"


@dataclass(frozen=True)
class AttemptResult:
    status: int | None  # the consumer's HTTP status; None when no answer came
    error: str | None = None  # what the caller is told: one sentence per outcome (the HTTP status for ``rejected``)
    detail: str | None = None  # the precise cause, for the logs only (never recorded on the job)
    outcome: Outcome | None = None  # None: derived from ``status`` (2xx delivered, another status rejected)

    def __post_init__(self) -> None:
        if self.outcome is None:
            derived = Outcome.UNREACHABLE if self.status is None else Outcome.REJECTED
            object.__setattr__(self, "outcome", Outcome.DELIVERED if self.delivered else derived)

    @property
    def delivered(self) -> bool:
        return self.status is not None and 200 <= self.status < 300

    @classmethod
    def answered(cls, status: int) -> AttemptResult:
        if 200 <= status < 300:
            return cls(status, outcome=Outcome.DELIVERED)
        error = f"HTTP {status}: redirects are not followed" if 300 <= status < 400 else f"HTTP {status}"
        return cls(status, error, error, Outcome.REJECTED)

    @classmethod
    def unreachable(cls, detail: str) -> AttemptResult:
        return cls(None, UNREACHABLE_ERROR, detail[:300], Outcome.UNREACHABLE)

    @classmethod
    def refused(cls, message: str) -> AttemptResult:
        """The policy's own message (what a 400 at submit says too): it names the rule, not the network's answer."""
        return cls(None, message, message, Outcome.REFUSED)

    @classmethod
    def not_signed(cls, detail: str) -> AttemptResult:
        return cls(None, NOT_SIGNED_ERROR, detail[:300], Outcome.NOT_SIGNED)

    @property
    def log_detail(self) -> str | None:
        return self.detail or self.error


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


@functools.cache
def default_tls() -> ssl.SSLContext:
    """The system's trust store (``ssl.create_default_context()``), made once per execution environment: loading the
    CA certificates costs ~40 ms of CPU, more at a Lambda's fraction of a vCPU, and an https attempt used to make its
    own. A context is safe to share between threads and connections; each attempt still verifies its host name."""
    return ssl.create_default_context()


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
        return AttemptResult.unreachable(f"connect: {type(exc).__name__}: {exc}")
    watchdog = _Watchdog(sock, deadline)
    status: int | None = None
    try:
        sock.settimeout(left())
        if target.scheme == "https":
            sock = (tls or default_tls()).wrap_socket(sock, server_hostname=target.host, do_handshake_on_connect=False)
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
        return AttemptResult.answered(response.status)
    except (OSError, http.client.HTTPException, ssl.SSLError, ValueError) as exc:
        if watchdog.fired or isinstance(exc, TimeoutError):
            answered = f" (HTTP {status} received, the answer incomplete)" if status is not None else ""
            return AttemptResult.unreachable(f"deadline: the attempt did not finish in time{answered}")
        return AttemptResult.unreachable(f"{type(exc).__name__}: {exc}")
    finally:
        watchdog.close()
