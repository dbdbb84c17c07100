"""One queued event -> one delivery attempt to its webhook, recorded on its job (``GET /jobs/{id}`` shows it) or, for a
``batch.completed``, on its batch (``GET /batches/{id}``).

The job-events topic publishes every event with a ``webhook`` message attribute when its job's request asked for that
event type at a webhook (``omnireel.events.job_events.sns_message_attributes``); the webhook queue's subscription
filters on that attribute, so only events with a webhook reach the delivery function. Any event type that carries the
attribute and an ``event_id`` is delivered the same way (a batch's ``batch.completed`` too); the attempt is recorded on
the record the event was published from: the job's, or the batch's for a batch event (same state shape).

A message is not trusted (issue 33 item 1): whoever may send to the queue or publish to the topic could write any
event, job and URL into it. Only its identifiers are read (``parse_ids``: event id, event type, job or batch id); the
event delivered is the one the stack recorded when it published it, sent to the URL of the record's own request
(``resolve``: ``omnireel.aws.record_owners.PublishedEvents``, ``omnireel.events.published``). A message naming an
event the stack did not publish is dropped, not retried and never signed, with an error log line and the
``webhook_forged_dropped`` metric.

``process_record`` is one SQS record of the delivery function's batch, isolated from the others: whatever fails on it
(the attempt, recording it, the signing secret) makes that record alone invisible for its backoff (``retry_delay``,
through the queue adapter ``omnireel.aws.webhook_queue``) and reports it as a batch item failure; records already
delivered in the same batch are not sent again. ``attempt`` is one attempt within the invocation's time, signed with
the owner's secret(s) (``omnireel.webhooks.signing``) read inside it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from omnireel.aws.batch_store import BatchStore
from omnireel.aws.job_store import JobStore
from omnireel.aws.record_owners import PublishedEvents, RecordOwners
from omnireel.aws.secrets import WebhookMasterKey
from omnireel.aws.webhook_queue import WebhookQueue
from omnireel.core.clock import iso
from omnireel.core.errors import OmnireelError, SigningKeyUnavailable
from omnireel.events.published import EventIds, EventNotPublished, RecordedDelivery, record_kind
from omnireel.runtime.observability import MetricUnit, logger, metrics
from omnireel.webhooks.delivery import AttemptResult, post, retry_delay_s, signed_headers
from omnireel.webhooks.signing import delivery_secrets
from omnireel.webhooks.target import (
    Resolver,
    WebhookRefused,
    WebhookUnresolved,
    resolve_target,
    resolve_within,
    system_resolver,
)


@dataclass(frozen=True)
class QueuedEvent:
    url: str
    body: str  # the event exactly as the stack published and recorded it: signed and sent byte for byte
    event_id: str
    event_type: str
    job_id: str | None
    batch_id: str | None = None  # a batch event's batch (its record, which the attempt is recorded on)


_ID_LENGTH = 200  # ids are uuids, hex digests and event type names: anything longer is not one of ours


def _id(event: dict[str, Any], name: str) -> str:
    value = event.get(name)
    if not isinstance(value, str) or not value or len(value) > _ID_LENGTH:
        raise ValueError(f"the event has no valid {name}")
    return value


def _optional_id(event: dict[str, Any], name: str) -> str | None:
    return None if event.get(name) is None else _id(event, name)


def parse_ids(sqs_body: str) -> EventIds:
    """The identifiers in the SNS notification an SQS record carries (raw delivery off). The event body and the
    ``webhook`` attribute in it are ignored: the delivery is rebuilt from the stack's record (``resolve``)."""
    envelope = json.loads(sqs_body)
    event = json.loads(envelope["Message"])
    if not isinstance(event, dict):
        raise ValueError("the event is not an object")
    ids = EventIds(
        _id(event, "event_id"), _id(event, "event_type"), _optional_id(event, "job_id"), _optional_id(event, "batch_id")
    )
    if not (ids.job_id or ids.batch_id):
        raise ValueError("the event names no job and no batch")
    return ids


@dataclass(frozen=True)
class Delivery:
    result: AttemptResult
    retry: bool  # False: delivered, or refused for good


def deliver(
    queued: QueuedEvent,
    attempt: int,
    *,
    # the owner's whsec_ secret(s) (omnireel.webhooks.signing.delivery_secrets), or a callable reading them: an
    # unreadable signing key (SigningKeyUnavailable) is then recorded as a ``not_signed`` attempt and retried
    secret: str | Sequence[str] | Callable[[], Sequence[str]],
    allow_loopback_http: bool,
    jobs: JobStore | None,
    now: Callable[[], datetime],
    batches: BatchStore | None = None,
    deadline: float,
    connect_timeout_s: float = 3.0,
    resolve: Resolver = system_resolver,
    send: Callable[..., AttemptResult] = post,
) -> Delivery:
    """Attempt number ``attempt`` (SQS's receive count) of one event, ended by ``deadline`` (``time.monotonic()``:
    resolution, connection, TLS, request and answer together); record it on the job, or on the batch for a batch
    event (``batches``; a function without the batches table records nothing for those)."""
    refused, started = False, iso(now())  # last_attempt_at: the start (the duration would tell ports apart)
    try:
        if deadline <= time.monotonic():  # the invocation has no time left for it: the next receive tries
            raise TimeoutError
        # Checked again at every attempt: a host may resolve elsewhere now than when the job was submitted.
        bounded = resolve_within(resolve, deadline - time.monotonic())
        target = resolve_target(queued.url, allow_loopback_http=allow_loopback_http, resolve=bounded)
    except TimeoutError:
        result = AttemptResult.unreachable("deadline: no time left for this attempt in the invocation")
    except WebhookUnresolved as exc:  # DNS may answer next time: retried on the schedule
        result = AttemptResult.unreachable(exc.message)
    except WebhookRefused as exc:
        result, refused = AttemptResult.refused(exc.message), True
    else:
        try:
            secrets = secret() if callable(secret) else secret
        except SigningKeyUnavailable as exc:
            result = AttemptResult.not_signed(exc.message)
        else:
            headers = signed_headers(secrets, queued.event_id, queued.body, now())
            result = send(
                target,
                queued.body.encode(),
                headers,
                connect_timeout_s=connect_timeout_s,
                deadline=deadline,
            )
    state: dict[str, Any] = {
        "attempts": attempt,
        "outcome": str(result.outcome),  # one coarse class (omnireel.webhooks.delivery.Outcome); the detail is logged
        "last_status": result.status,
        "last_error": result.error,
        "last_attempt_at": started,
        "delivered_at": iso(now()) if result.delivered else None,
        "refused": refused,
    }
    if jobs is not None and queued.job_id:
        jobs.record_webhook_attempt(queued.job_id, queued.event_type, state)
    elif batches is not None and queued.batch_id:
        batches.record_webhook_attempt(queued.batch_id, queued.event_type, state)
    extra = {"event_id": queued.event_id, "job_id": queued.job_id, "attempt": attempt, "status": result.status}
    if queued.batch_id:
        extra["batch_id"] = queued.batch_id
    if result.delivered:
        logger.info("webhook delivered", extra=extra)
    else:
        logger.warning("webhook attempt failed", extra={**extra, "error": result.log_detail, "refused": refused})
    return Delivery(result, retry=not (result.delivered or refused))


@dataclass(frozen=True)
class DeliveryPolicy:
    """How each attempt runs and how retries are spaced: the delivery function's ``WEBHOOK_*`` settings."""

    allow_loopback_http: bool
    attempt_deadline_s: float  # one deadline per attempt (WEBHOOK_ATTEMPT_DEADLINE_SECONDS)
    connect_timeout_s: float
    retry_base_s: int  # the first retry's delay, doubling (WEBHOOK_RETRY_BASE_SECONDS)
    max_attempts: int  # the queue's maxReceiveCount (WEBHOOK_MAX_ATTEMPTS)


@dataclass(frozen=True)
class Invocation:
    """The delivery function's invocation in ``time.monotonic()`` seconds: its start, and its usable end (the time
    left at the start, less recording an attempt: no attempt runs past it)."""

    started: float
    ends: float


@dataclass(frozen=True)
class ReceivedRecord:
    """One SQS record of the batch: its body, SQS's receive count (the attempt's number) and its receipt handle."""

    body: str
    receive_count: int
    receipt_handle: str


def _utc_now() -> datetime:
    return datetime.now(UTC)


def attempt(
    queued: QueuedEvent,
    number: int,
    *,
    policy: DeliveryPolicy,
    invocation: Invocation,
    master: WebhookMasterKey,
    owners: RecordOwners,
    jobs: JobStore | None,
    batches: BatchStore | None,
    now: Callable[[], datetime] = _utc_now,
    resolve: Resolver = system_resolver,
    send: Callable[..., AttemptResult] = post,
) -> Delivery:
    """Attempt ``number`` of one event, ended by its own deadline and never past the invocation's usable end, signed
    with the secret(s) of the job's (or batch's) owner, two during a rotation's grace period. The secret is read inside
    the attempt: an unreadable key is recorded on the job as a ``not_signed`` attempt (issue 33 item 9)."""
    return deliver(
        queued,
        number,
        secret=lambda: delivery_secrets(queued, master=master, owners=owners, at=now()),
        allow_loopback_http=policy.allow_loopback_http,
        jobs=jobs,
        batches=batches,
        now=now,
        deadline=min(time.monotonic() + policy.attempt_deadline_s, invocation.ends),
        connect_timeout_s=policy.connect_timeout_s,
        resolve=resolve,
        send=send,
    )


def retry_delay(number: int, *, policy: DeliveryPolicy, invocation: Invocation) -> int:
    """How long a record stays invisible after its failed attempt ``number``: the schedule (``retry_delay_s``, within
    SQS's 12 hours from the receive), except after the last attempt: visible at once, so SQS's next receive moves it
    to the dead-letter queue instead of after one more delay."""
    if number >= policy.max_attempts:
        return 0
    invoked_s_ago = time.monotonic() - invocation.started
    return retry_delay_s(number, policy.retry_base_s, invoked_s_ago=invoked_s_ago)


class WebhookAttemptFailed(OmnireelError):
    """The attempt did not deliver the event and may be retried (the record is reported as a batch item failure)."""

    code = "WebhookAttemptFailed"
    retryable = True


def process_record(
    record: ReceivedRecord,
    *,
    published: PublishedEvents,
    queue: WebhookQueue,
    policy: DeliveryPolicy,
    invocation: Invocation,
    master: WebhookMasterKey,
    owners: RecordOwners,
    jobs: JobStore | None,
    batches: BatchStore | None,
    now: Callable[[], datetime] = _utc_now,
    resolve: Resolver = system_resolver,
    send: Callable[..., AttemptResult] = post,
) -> Delivery | None:
    """One SQS record: read its identifiers, rebuild the event from the stack's record (``published``), make attempt
    number ``receive_count`` (``attempt``), and on any failure make the record invisible for its backoff
    (``queue.retry_in``, ``retry_delay``) and raise, so that only this record is retried. None: not a webhook event,
    or an event the stack did not publish (dropped: it would fail the same way every time; a forged one is counted as
    ``webhook_forged_dropped``)."""
    number = record.receive_count

    def backoff() -> None:
        queue.retry_in(record.receipt_handle, retry_delay(number, policy=policy, invocation=invocation))

    try:
        ids = parse_ids(record.body)
    except (ValueError, KeyError, TypeError) as exc:
        logger.error("not a webhook event: dropped", extra={"error": str(exc)})
        return None
    failure: Exception
    try:
        recorded: RecordedDelivery = published.delivery(ids)
    except EventNotPublished as exc:
        named = {"event_id": ids.event_id, "event_type": ids.event_type, "job_id": ids.job_id, "batch_id": ids.batch_id}
        logger.error("webhook event not published by the stack: dropped", extra={**named, "reason": str(exc)})
        metrics.add_metric(name="webhook_forged_dropped", unit=MetricUnit.Count, value=1)
        return None
    except Exception:  # a throttled read of the record, ...: this record only, retried
        logger.exception("webhook record could not be read; it alone is retried", extra={"event_id": ids.event_id})
        backoff()
        raise
    # a batch event was resolved from the record of the batch the message names: its attempts are recorded there
    batch_id = ids.batch_id if record_kind(ids.event_type) == "batch" else None
    queued = QueuedEvent(recorded.url, recorded.body, recorded.event_id, recorded.event_type, recorded.job_id, batch_id)
    try:
        delivery = attempt(
            queued, number, policy=policy, invocation=invocation, master=master, owners=owners, jobs=jobs,
            batches=batches, now=now, resolve=resolve, send=send,
        )  # fmt: skip
    except Exception as exc:  # noqa: BLE001 - a throttle recording the attempt, the secret, ...: this record only
        extra = {"event_id": queued.event_id, "job_id": queued.job_id, "attempt": number}
        logger.exception("webhook record failed; it alone is retried", extra=extra)
        failure = exc
    else:
        if not delivery.retry:
            return delivery
        failure = WebhookAttemptFailed(delivery.result.error or "not delivered")
    backoff()
    raise failure
