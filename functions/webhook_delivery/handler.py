"""Webhook delivery: fed by the webhook queue (SQS, subscribed to the job-events topic with a filter on the event's
``webhook`` attribute); one signed POST per event and attempt (``omnireel.webhooks.dispatch.process_record``).

The batch goes through Powertools' ``AsyncBatchProcessor``: every record is its own task, delivered on a thread of
``WEBHOOK_DELIVERY_CONCURRENCY`` (the attempts wait on receivers, not on the CPU), and only the records that failed
are returned as ``batchItemFailures``. A failed attempt stays in the queue, invisible for an exponentially growing
delay (its own ChangeMessageVisibility through ``omnireel.aws.webhook_queue``, capped within SQS's 12 hours from the
receive); after ``WEBHOOK_MAX_ATTEMPTS`` receives SQS moves it to the dead-letter queue (the last failed attempt makes
it visible at once, so the next receive moves it there instead of after one more delay). A consumer's 2xx ends it,
and so does a target refused at delivery (it would be refused again); a host that does not resolve is retried.

What is delivered comes from the stack's records, never from the message (issue 33 item 1): the message gives only
the event's identifiers; the body is the one the stack recorded when it published the event, the URL the one in the
job's (or batch's) own request (``omnireel.aws.record_owners.PublishedEvents``). A message naming an event the stack
did not publish is dropped unsigned (``webhook_forged_dropped``).

Each attempt has one deadline (``WEBHOOK_ATTEMPT_DEADLINE_SECONDS``, and never past the invocation's own end minus
the time recording it takes), so a batch of receivers that all hang ends inside the function's Timeout.
"""

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from aws_lambda_powertools.utilities.batch import AsyncBatchProcessor, EventType, async_process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from omnireel.aws import adapters
from omnireel.runtime.handler import lambda_handler
from omnireel.runtime.observability import MetricUnit, metrics
from omnireel.runtime.settings import WebhookSettings
from omnireel.webhooks.delivery import RECORD_OVERHEAD_S
from omnireel.webhooks.dispatch import Delivery, DeliveryPolicy, Invocation, ReceivedRecord, process_record

settings = WebhookSettings.from_env()
jobs = adapters.job_store(settings)
# batch.completed: each attempt is recorded on the batch record (GET /batches/{id}), as a job's on its job
batches = adapters.batch_store(settings) if settings.batches_table else None
queue = adapters.webhook_queue(settings)  # a failed attempt's record comes back after its backoff
master_key = adapters.webhook_master_key(settings)
owners = adapters.record_owners(settings)
published = adapters.published_events(settings)  # what may be delivered, and where
policy = DeliveryPolicy(
    allow_loopback_http=settings.webhook_allow_loopback_http,
    attempt_deadline_s=settings.webhook_attempt_deadline_seconds,
    connect_timeout_s=settings.webhook_connect_timeout_seconds,
    retry_base_s=settings.webhook_retry_base_seconds,
    max_attempts=settings.webhook_max_attempts,
)
processor = AsyncBatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
pool = ThreadPoolExecutor(max_workers=settings.webhook_delivery_concurrency, thread_name_prefix="webhook")
# One event loop for the execution environment: Powertools runs each batch on the current loop (asyncio's implicit
# creation of one is deprecated).
asyncio.set_event_loop(asyncio.new_event_loop())
_invocation = {"current": Invocation(started=0.0, ends=0.0)}  # this invocation's start and usable end


def _deliver_record(record: SQSRecord) -> Delivery | None:
    """One record, on a pool thread."""
    received = ReceivedRecord(
        record.body, int(record.attributes.approximate_receive_count or "1"), record.receipt_handle
    )
    return process_record(
        received, published=published, queue=queue, policy=policy, invocation=_invocation["current"],
        master=master_key, owners=owners, jobs=jobs, batches=batches,
    )  # fmt: skip


async def _record_handler(record: SQSRecord) -> None:
    try:
        delivery = await asyncio.get_running_loop().run_in_executor(pool, _deliver_record, record)
    except Exception:
        metrics.add_metric(name="webhook_attempt_failed", unit=MetricUnit.Count, value=1)
        raise
    if delivery is not None:
        delivered = delivery.result.delivered
        metrics.add_metric(
            name="webhook_delivered" if delivered else "webhook_attempt_failed", unit=MetricUnit.Count, value=1
        )


@lambda_handler()
def handler(event: dict, context: LambdaContext) -> dict[str, Any]:
    started = time.monotonic()
    ends = started + context.get_remaining_time_in_millis() / 1000 - RECORD_OVERHEAD_S
    _invocation["current"] = Invocation(started=started, ends=ends)
    response = async_process_partial_response(
        event=event, record_handler=_record_handler, processor=processor, context=context
    )
    return dict(response)
