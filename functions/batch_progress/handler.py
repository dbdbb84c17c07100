"""SQS (terminal job events of batch jobs, from the job-events topic) -> batch counts; the last one completes the
batch (manifest + ``batch.completed``). Partial batch responses through Powertools' ``BatchProcessor``: only a
record that fails is reported (``batchItemFailures``) and retried alone; counting is idempotent per line
(``omnireel.batches.progress``)."""

import json

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from omnireel.aws import adapters
from omnireel.batches.progress import Progress
from omnireel.runtime.handler import lambda_handler
from omnireel.runtime.observability import MetricUnit, metrics
from omnireel.runtime.settings import BatchProgressSettings

settings = BatchProgressSettings.from_env()
progress = Progress(
    store=adapters.batch_store(settings, eager=True),
    artifacts=adapters.artifact_store(settings),
    publisher=adapters.event_publisher(settings),
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


@lambda_handler()
def handler(event: dict, context: LambdaContext) -> dict:
    return dict(
        process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context)
    )
