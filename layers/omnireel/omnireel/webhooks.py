"""One queued event -> one delivery attempt to its webhook, recorded on the job (``GET /jobs/{id}`` shows it).

The job-events topic publishes every event with a ``webhook`` message attribute when its job's request asked for that
event type at a webhook (``omnireel.events.sns_message_attributes``); the webhook queue's subscription filters on
that attribute, so only events with a webhook reach the delivery function. Any event type that carries the attribute
and an ``event_id`` is delivered the same way (a batch's ``batch.completed`` too); the attempt is recorded on a job
record when the event names a ``job_id``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from omnireel.aws.job_store import JobStore
from omnireel.job import iso
from omnireel.observability import logger
from omnireel.webhook_delivery import AttemptResult, post, signed_headers
from omnireel.webhook_target import Resolver, WebhookRefused, resolve_target, system_resolver

WEBHOOK_ATTRIBUTE = "webhook"


@dataclass(frozen=True)
class QueuedEvent:
    url: str
    body: str  # the event exactly as published: signed and sent byte for byte
    event_id: str
    event_type: str
    job_id: str | None


def parse_queued(sqs_body: str) -> QueuedEvent:
    """The SNS notification an SQS record carries (raw delivery off): the event and its ``webhook`` attribute."""
    envelope = json.loads(sqs_body)
    url = envelope["MessageAttributes"][WEBHOOK_ATTRIBUTE]["Value"]
    body = envelope["Message"]
    event = json.loads(body)
    if not isinstance(event, dict) or not isinstance(event.get("event_id"), str):
        raise ValueError("the event has no event_id")
    return QueuedEvent(url, body, event["event_id"], str(event.get("event_type", "event")), event.get("job_id"))


@dataclass(frozen=True)
class Delivery:
    result: AttemptResult
    retry: bool  # False: delivered, or refused for good


def deliver(
    queued: QueuedEvent,
    attempt: int,
    *,
    secret: str | Sequence[str],  # the owner's whsec_ secret(s): omnireel.webhook_signing.delivery_secrets
    allow_loopback_http: bool,
    jobs: JobStore | None,
    now: Callable[[], datetime],
    connect_timeout_s: float = 3.0,
    read_timeout_s: float = 10.0,
    resolve: Resolver = system_resolver,
    send: Callable[..., AttemptResult] = post,
) -> Delivery:
    """Attempt number ``attempt`` (SQS's receive count) of one event; record it on the job."""
    refused = False
    try:
        # Checked again at every attempt: a host may resolve elsewhere now than when the job was submitted.
        target = resolve_target(queued.url, allow_loopback_http=allow_loopback_http, resolve=resolve)
    except WebhookRefused as exc:
        result, refused = AttemptResult(None, exc.message), True
    else:
        at = now()
        headers = signed_headers(secret, queued.event_id, queued.body, at)
        result = send(
            target,
            queued.body.encode(),
            headers,
            connect_timeout_s=connect_timeout_s,
            read_timeout_s=read_timeout_s,
        )
    stamp = iso(now())
    state: dict[str, Any] = {
        "attempts": attempt,
        "last_status": result.status,
        "last_error": result.error,
        "last_attempt_at": stamp,
        "delivered_at": stamp if result.delivered else None,
        "refused": refused,
    }
    if jobs is not None and queued.job_id:
        jobs.record_webhook_attempt(queued.job_id, queued.event_type, state)
    extra = {"event_id": queued.event_id, "job_id": queued.job_id, "attempt": attempt, "status": result.status}
    if result.delivered:
        logger.info("webhook delivered", extra=extra)
    else:
        logger.warning("webhook attempt failed", extra={**extra, "error": result.error, "refused": refused})
    return Delivery(result, retry=not (result.delivered or refused))
