"""Webhook delivery: fed by the webhook queue (SQS, subscribed to the job-events topic with a filter on the event's
``webhook`` attribute); one signed POST per event and attempt (``omnireel.webhooks``).

A failed attempt stays in the queue, invisible for an exponentially growing delay (ChangeMessageVisibility), and is
reported as a batch item failure; after ``WEBHOOK_MAX_ATTEMPTS`` receives SQS moves it to the dead-letter queue. A
consumer's 2xx ends it, and so does a target refused at delivery (it would be refused again).
"""

from datetime import UTC, datetime

from aws_lambda_powertools.utilities.typing import LambdaContext

from omnireel.aws.clients import client
from omnireel.aws.job_store import JobStore
from omnireel.aws.record_owners import RecordOwners
from omnireel.aws.secrets import WebhookMasterKey
from omnireel.observability import MetricUnit, logger, metrics, tracer
from omnireel.settings import WebhookSettings
from omnireel.webhook_delivery import retry_delay_s
from omnireel.webhook_signing import delivery_secrets
from omnireel.webhooks import deliver, parse_queued

settings = WebhookSettings.from_env()
jobs = JobStore(settings.jobs_table, settings.job_ttl_days)
sqs = client("sqs")
master_key = WebhookMasterKey(settings.webhook_secret_arn, ttl_s=settings.webhook_key_cache_seconds)
owners = RecordOwners(settings.jobs_table, settings.batches_table)


def _now() -> datetime:
    return datetime.now(UTC)


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict, context: LambdaContext) -> dict:
    failures = []
    for record in event.get("Records", []):
        try:
            queued = parse_queued(record["body"])
        except (ValueError, KeyError, TypeError) as exc:
            logger.error(
                "not a webhook event: dropped", extra={"message_id": record.get("messageId"), "error": str(exc)}
            )
            continue
        attempt = int(record.get("attributes", {}).get("ApproximateReceiveCount", "1"))
        delivery = deliver(
            queued,
            attempt,
            secret=delivery_secrets(queued, master=master_key, owners=owners, at=_now()),
            allow_loopback_http=settings.webhook_allow_loopback_http,
            jobs=jobs,
            now=_now,
            connect_timeout_s=settings.webhook_connect_timeout_seconds,
            read_timeout_s=settings.webhook_read_timeout_seconds,
        )
        metrics.add_metric(
            name="webhook_delivered" if delivery.result.delivered else "webhook_attempt_failed",
            unit=MetricUnit.Count,
            value=1,
        )
        if delivery.retry:
            sqs.change_message_visibility(
                QueueUrl=settings.webhook_queue_url,
                ReceiptHandle=record["receiptHandle"],
                VisibilityTimeout=retry_delay_s(attempt, settings.webhook_retry_base_seconds),
            )
            failures.append({"itemIdentifier": record["messageId"]})
    return {"batchItemFailures": failures}
