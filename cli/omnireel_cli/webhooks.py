"""``omnireel webhooks``: a local receiver that verifies Standard Webhooks signatures and prints each delivery, the
caller's own signing secret (``GET /webhooks/secret``), and for operators the unowned secret and the rotation of the
master key (Secrets Manager, with the operator's credentials: ``omnireel.webhooks.secrets`` says how secrets derive)."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from omnireel.webhooks.secrets import (
    MAX_GRACE,
    InvalidMasterKey,
    MasterKeys,
    new_master_key,
    parse_master,
    secrets_view,
    unowned_secret,
)

from .errors import InfraError, UsageError
from .target import Target

MAX_BODY_BYTES = 1024 * 1024


def secret_view(target: Target) -> dict[str, Any]:
    """GET /webhooks/secret: the caller's own secret (and, during a rotation, the previous one)."""
    from .api import calling

    with calling(target, "cannot read the webhook secret"):
        return dict(target.api_client.webhook_secret().raw)


def secret(target: Target) -> str:
    """The caller's own whsec_ secret (GET /webhooks/secret)."""
    return str(secret_view(target)["secret"])


# ---------------------------------------------------------------- operators: the master key (Secrets Manager)
def _master(target: Target, *, allow_legacy: bool = False) -> tuple[Any, str, MasterKeys, datetime]:
    """(Secrets Manager client, secret ARN, the master key document, the service's time), read with the operator's own
    credentials. The time is the answer's Date header (this machine's clock only without one): a rotation records
    when it was written, and every function derives from that when it takes effect."""
    from botocore.exceptions import BotoCoreError, ClientError

    arn = target.output("WebhookSigningSecretArn")
    manager = target.client("secretsmanager")
    try:
        answer = manager.get_secret_value(SecretId=arn)
        value = answer["SecretString"]
    except (ClientError, BotoCoreError) as exc:
        raise InfraError(
            f"cannot read the webhook master key {arn} (operators need secretsmanager:GetSecretValue on it): {exc}"
        ) from exc
    try:
        keys = parse_master(value, allow_legacy=allow_legacy)
    except InvalidMasterKey as exc:
        raise InfraError(f"the webhook master key {arn}: {exc}") from None
    return manager, arn, keys, _service_time(answer)


def _service_time(answer: dict[str, Any]) -> datetime:
    from email.utils import parsedate_to_datetime

    date = ((answer.get("ResponseMetadata") or {}).get("HTTPHeaders") or {}).get("date")
    try:
        return parsedate_to_datetime(date).astimezone(UTC) if date else datetime.now(UTC)
    except (TypeError, ValueError):
        return datetime.now(UTC)


def unowned(target: Target) -> dict[str, Any]:
    """The secret of deliveries without an owner (dropped files), derived from the master as the functions do."""
    _, _, keys, now = _master(target)  # phases as a function with the longest key cache sees them (DEFAULT_PICKUP)
    return secrets_view(keys, unowned_secret, now)


def rotate(target: Target, *, grace_hours: float, end_grace: bool = False, force: bool = False) -> str:
    """Write a new master key (the current one keeps signing for ``grace_hours``), or end a grace period now."""
    from botocore.exceptions import BotoCoreError, ClientError

    if not end_grace and not (grace_hours == 0 or 1 <= grace_hours <= MAX_GRACE.total_seconds() / 3600):
        raise UsageError(f"--grace-hours: 0 (the old key stops at once) or 1 to {MAX_GRACE.days * 24}")
    manager, arn, keys, now = _master(target, allow_legacy=True)
    if end_grace:
        if not keys.in_grace(now):
            return "no grace period is running: only the current master key signs"
        updated = keys.grace_ended(now)
    else:
        if keys.in_grace(now) and not force:
            raise UsageError(
                f"the previous rotation's grace period runs until {_iso(keys.previous_until)}: rotating again now "
                "would stop the oldest key at once (receivers still holding it would reject every delivery). Wait, "
                "end it first (--end-grace), or pass --force."
            )
        updated = keys.rotated(new_master_key(), now, timedelta(hours=grace_hours))
    try:
        manager.put_secret_value(SecretId=arn, SecretString=updated.to_json())
    except (ClientError, BotoCoreError) as exc:
        raise InfraError(
            f"cannot write the webhook master key {arn} (operators need secretsmanager:PutSecretValue on it): {exc}"
        ) from exc
    if end_grace:
        return (
            f"grace period ending: the previous master key stops signing at {_iso(updated.previous_end())}, once "
            "every function has read this (GET /webhooks/secret says the same)"
        )
    if keys.legacy:
        return (
            "rotated: the single secret of before per-caller secrets (every caller had read it) no longer signs; "
            "functions sign with the new master key within 5 minutes. Each caller reads its own secret at "
            "GET /webhooks/secret."
        )
    if updated.previous_until and updated.previous_until > (updated.key_from() or now):
        return (
            f"rotated: the previous master key signs alone until {_iso(updated.key_from())} (every function has read"
            f" the new one by then), then both sign until {_iso(updated.previous_end())} (every delivery carries"
            " both signatures). Each caller reads its new secret at GET /webhooks/secret now (it says which secrets"
            " sign and from when) and switches its receivers before the grace period ends."
        )
    return (
        f"rotated with no grace period: the previous master key signs until {_iso(updated.key_from())} (every "
        "function has read the new one by then), then only the new one"
    )


def _iso(at: datetime | None) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if at else ""


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
            line = {
                "verified": True, "webhook_id": headers.get("webhook-id"), "path": self.path, "event": event,
                # how many v1 signatures came (two during a key rotation's grace period), and the Host header
                "signatures": len(headers.get("webhook-signature", "").split()), "host": headers.get("host"),
            }  # fmt: skip
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
