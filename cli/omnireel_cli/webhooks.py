"""``omnireel webhooks``: a local receiver that verifies Standard Webhooks signatures and prints each delivery, and
the signing secret (``GET /webhooks/secret``)."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from .errors import InfraError, UsageError
from .target import Target

MAX_BODY_BYTES = 1024 * 1024


def secret(target: Target) -> str:
    """The whsec_ secret: OMNIREEL_WEBHOOK_SECRET (from `omnireel local env`), else GET /webhooks/secret."""
    status, body = target.api("GET", "/webhooks/secret")
    if status != 200 or not isinstance(body, dict) or "secret" not in body:
        raise InfraError(f"cannot read the webhook secret: HTTP {status}: {str(body)[:200]}")
    return str(body["secret"])


def verify(webhook: Webhook, body: bytes, headers: dict[str, str]) -> Any:
    """The event if the signature holds (and the timestamp is within 5 minutes), else WebhookVerificationError."""
    try:
        return webhook.verify(body, headers)
    except WebhookVerificationError:
        raise
    except (ValueError, TypeError, UnicodeDecodeError) as exc:  # a malformed header or body
        raise WebhookVerificationError(f"malformed delivery: {exc}") from None


def listen(whsec: str, port: int, *, count: int | None, timeout: float | None, as_json: bool,
           fail_first: int = 0) -> int:  # fmt: skip
    """Serve POSTs on 127.0.0.1:``port``; answer 204 to a verified delivery (printed), 401 to anything else.

    ``fail_first``: answer the first N verified deliveries 503 (to watch the sender's retries). Returns after
    ``count`` verified deliveries or ``timeout`` seconds (both optional)."""
    try:
        webhook = Webhook(whsec)
    except Exception as exc:  # noqa: BLE001 - the library raises several types for a bad secret
        raise UsageError(f"not a webhook secret (whsec_...): {exc}") from None
    accepted = threading.Semaphore(0)
    state = {"refused_left": fail_first}
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY_BYTES:
                self._answer(413, "body too large")
                return
            body = self.rfile.read(length)
            headers = {k.lower(): v for k, v in self.headers.items()}
            try:
                event = verify(webhook, body, headers)
            except WebhookVerificationError as exc:
                print(f"refused a delivery to {self.path}: {exc}", file=sys.stderr, flush=True)
                self._answer(401, "invalid signature")
                return
            with lock:
                refuse = state["refused_left"] > 0
                state["refused_left"] -= refuse
            if refuse:
                self._answer(503, "failing on purpose (--fail-first)")
                return
            self._answer(204, "")  # answered before it is printed: whoever reads the line may stop the receiver
            line = {"verified": True, "webhook_id": headers.get("webhook-id"), "path": self.path, "event": event}
            if as_json:
                print(json.dumps(line), flush=True)
            else:
                kind = event.get("event_type", "event") if isinstance(event, dict) else "event"
                job = event.get("job_id", "") if isinstance(event, dict) else ""
                print(f"verified {kind} {job} (webhook-id {headers.get('webhook-id')})", flush=True)
            accepted.release()

        def _answer(self, status: int, text: str) -> None:
            data = text.encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print(f"listening on http://127.0.0.1:{server.server_address[1]}/ (verifying Standard Webhooks signatures)",
          file=sys.stderr, flush=True)  # fmt: skip
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    deadline = None if timeout is None else time.monotonic() + timeout
    received = 0
    try:
        while count is None or received < count:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                break
            if accepted.acquire(timeout=min(left, 1.0) if left is not None else 1.0):
                received += 1
    finally:
        server.shutdown()
        server.server_close()
    return 0 if count is None or received >= count else 1


def resolve_secret(target_factory: Any, given: str | None) -> str:
    return given or os.environ.get("OMNIREEL_WEBHOOK_SECRET") or secret(target_factory())
