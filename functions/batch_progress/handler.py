"""SQS (terminal job events of batch jobs, from the job-events topic) -> batch counts; the last one completes the
batch (manifest + ``batch.completed``). Partial batch responses through Powertools' ``BatchProcessor``: only a
record that fails is reported (``batchItemFailures``) and retried alone; counting is idempotent per line
(``omnireel.batch_progress``)."""

import json

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from omnireel.aws.artifact_store import ArtifactStore
from omnireel.aws.batch_store import BatchStore
from omnireel.aws.event_publisher import EventPublisher
from omnireel.batch_progress import Progress
from omnireel.observability import MetricUnit, logger, metrics, tracer
from omnireel.settings import BatchProgressSettings

settings = BatchProgressSettings.from_env()
progress = Progress(
    store=BatchStore(settings.batches_table, settings.job_ttl_days, eager=True),
    artifacts=ArtifactStore(settings.artifacts_bucket),
    publisher=EventPublisher(settings.job_events_topic_arn, settings.event_bus_name),
    presign_seconds=settings.presign_seconds,
)
# An entire failed batch is reported record by record too (not raised): the same response shape either way.
processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)


def record_handler(record: SQSRecord) -> None:
    body = json.loads(record.body)
    if "Message" in body and "TopicArn" in body:  # an SNS envelope (subscription without raw delivery)
        body = json.loads(body["Message"])
    completed = progress.record(body)
    if completed is not None:
        metrics.add_metric(name="batches_completed", unit=MetricUnit.Count, value=1)


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict, context: LambdaContext) -> dict:
    return dict(
        process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context)
    )
