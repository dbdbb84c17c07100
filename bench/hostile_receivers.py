"""Webhook receivers that behave as real consumers sometimes do, for the fault suite's "hostile consumers" phase.

Each ``Receiver`` is a loopback HTTP server owned by one caller: it verifies every delivery with that caller's
``whsec_`` secret (Standard Webhooks, the ``standardwebhooks`` library) and records what it saw and answered. Its
``behaviour`` decides how it answers a delivery whose signature holds:

- ``polite``: 204 at once;
- ``slow``: 204 after ``delay_s`` (shorter or longer than the sender's per-attempt deadline: past it, the sender gives
  up while the receiver still counts the delivery as accepted, so a later attempt delivers the same ``webhook-id``
  again);
- ``trickle``: the status line one byte every ``delay_s`` (the sender's overall deadline must cut it);
- ``hang``: never answers (the connection is held until the receiver stops);
- ``flaky``: 503.

``bad_first``: the behaviour applies to the first N attempts of each ``webhook-id`` only, then the receiver answers
204 at once (a receiver that recovers); None: to every attempt.

A delivery whose signature does not verify is answered 401 and recorded as refused: with per-caller secrets a receiver
must refuse every delivery of another caller's job. Waits inside a behaviour are on the receiver's stop event, so
``stop()`` ends every held connection at once.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

MAX_BODY_BYTES = 1024 * 1024
BEHAVIOURS = ("polite", "slow", "trickle", "hang", "flaky")


@dataclass
class Delivery:
    """One POST as the receiver saw it."""

    at: float  # time.time() when the request arrived
    webhook_id: str | None
    verified: bool
    event_type: str | None
    job_id: str | None
    batch_id: str | None
    answered: int | None  # the status the receiver sent (None: it never finished answering)
    answered_at: float | None  # time.time() when the answer was fully written
    host: str | None  # the Host header as received


@dataclass
class Receiver:
    owner: str  # a label for the caller this receiver belongs to
    secret: str
    behaviour: str = "polite"
    delay_s: float = 0.0
    bad_first: int | None = None
    deliveries: list[Delivery] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.behaviour not in BEHAVIOURS:
            raise ValueError(f"behaviour must be one of {BEHAVIOURS}")
        self._webhook = Webhook(self.secret)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._attempts: dict[str, int] = {}
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                receiver._handle(self)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name=f"receiver-{self.owner}", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/hooks/{self.owner}/{self.behaviour}"

    def stop(self) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()

    # ---------------------------------------------------------------- what it saw
    def snapshot(self) -> list[Delivery]:
        with self._lock:
            return list(self.deliveries)

    def accepted(self) -> list[Delivery]:
        """Deliveries this receiver verified and answered 2xx (the ones its application would act on)."""
        return [d for d in self.snapshot() if d.verified and d.answered is not None and 200 <= d.answered < 300]

    # ---------------------------------------------------------------- serving
    def _handle(self, request: BaseHTTPRequestHandler) -> None:
        arrived = time.time()
        length = int(request.headers.get("Content-Length") or 0)
        body = request.rfile.read(min(length, MAX_BODY_BYTES))
        headers = {k.lower(): v for k, v in request.headers.items()}
        event: Any = None
        try:
            event = self._webhook.verify(body, headers)
            verified = True
        except (WebhookVerificationError, ValueError, TypeError, UnicodeDecodeError):
            verified = False
        event = event if isinstance(event, dict) else {}
        if not verified:  # what the receiver can still read of an unverified body, to attribute it in the report
            try:
                event = json.loads(body)
            except ValueError:
                event = {}
            event = event if isinstance(event, dict) else {}
        delivery = Delivery(
            at=arrived,
            webhook_id=headers.get("webhook-id"),
            verified=verified,
            event_type=event.get("event_type"),
            job_id=event.get("job_id"),
            batch_id=event.get("batch_id") or (event.get("batch") or {}).get("batch_id"),
            answered=None,
            answered_at=None,
            host=headers.get("host"),
        )
        with self._lock:
            self.deliveries.append(delivery)
        status, how = self._decide(delivery)
        if status is None:  # hang: hold the connection until the receiver stops
            self._stop.wait()
            return
        try:
            if how == "trickle":
                self._trickle(request, status)
            else:
                if how == "slow" and self._stop.wait(self.delay_s):
                    return
                request.send_response(status)
                request.send_header("Content-Length", "0")
                request.end_headers()
                request.wfile.flush()
        except OSError:  # the sender gave up (its deadline) and closed the connection
            return
        with self._lock:
            delivery.answered, delivery.answered_at = status, time.time()

    def _decide(self, delivery: Delivery) -> tuple[int | None, str]:
        """The status to answer (None: never) and how (the behaviour, or "polite" once it has recovered)."""
        if not delivery.verified:
            return 401, "polite"
        with self._lock:
            seen = self._attempts.get(delivery.webhook_id or "", 0)
            self._attempts[delivery.webhook_id or ""] = seen + 1
        if self.bad_first is not None and seen >= self.bad_first:
            return 204, "polite"
        if self.behaviour == "hang":
            return None, "hang"
        return (503 if self.behaviour == "flaky" else 204), self.behaviour

    def _trickle(self, request: BaseHTTPRequestHandler, status: int) -> None:
        raw = f"HTTP/1.1 {status} No Content\r\nContent-Length: 0\r\n\r\n".encode()
        for i in range(len(raw)):
            request.wfile.write(raw[i : i + 1])
            request.wfile.flush()
            if self._stop.wait(self.delay_s):
                raise OSError("receiver stopped")
        request.close_connection = True
