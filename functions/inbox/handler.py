"""S3 ObjectCreated under prompts/: .txt = the prompt, .json = a full request -> start the job; .jsonl = a batch
(one request per line) -> the batch record and its splitter (``omnireel.batches.intake``).

Each event is processed with exactly the object version it names (``versionId``; ``eTag`` where the bucket is
not versioned), and the job id derives from that version: two uploads of one key are two jobs, each with its own
prompt, and the same event delivered twice starts one execution. An unreadable file, or a version deleted before
it was read, becomes a failed job with a ``job.failed`` event; the version is tagged with the job id and outcome,
never deleted.

A file whose caller is at ``CallerMaxPendingJobs`` (issue 34 item 5) waits: its S3 record goes to the inbox retry
queue with a growing delay, and comes back here as an SQS record, until a place is free; after
``BATCH_MAX_DEFERRAL_SECONDS`` of waiting it fails with the reason (its job.failed), never silently
(``omnireel.jobs.inbox.accept_dropped_file``).
"""

import json

from aws_lambda_powertools.utilities.typing import LambdaContext

from omnireel.aws import adapters
from omnireel.batches.intake import BatchIntake
from omnireel.jobs.inbox import accept_dropped_file
from omnireel.runtime.handler import lambda_handler
from omnireel.runtime.observability import MetricUnit, metrics
from omnireel.runtime.settings import InboxSettings

settings = InboxSettings.from_env()
jobs = adapters.job_store(settings)
workflow = adapters.workflow(settings)
inbox = adapters.inbox_store()
artifacts = adapters.artifact_store(settings)
publisher = adapters.event_publisher(settings)
batches = (
    BatchIntake(adapters.batch_store(settings), adapters.batch_queue(settings))
    if settings.batches_table and settings.batch_queue_url
    else None
)
uploads = adapters.batch_uploads(settings) if settings.batches_table else None  # POST /batches/uploads
retry = adapters.inbox_retry_queue(settings) if settings.inbox_retry_queue_url else None


@lambda_handler()
def handler(event: dict, context: LambdaContext) -> dict:
    results = []
    # The S3 notification as a dict (Powertools' data classes would import every event type at cold start); the
    # key is still URL-encoded here, accept_inbox_object decodes it.
    for entry in event["Records"]:
        record, attempt, first_waited_at = _s3_record(entry)
        outcome = accept_dropped_file(
            record,
            attempt=attempt,
            first_waited_at=first_waited_at,
            retry=retry,
            max_deferral_s=settings.batch_max_deferral_seconds,
            inbox=inbox,
            jobs=jobs,
            workflow=workflow,
            artifacts=artifacts,
            publisher=publisher,
            presign_seconds=settings.presign_seconds,
            default_video_steps=settings.default_video_steps,
            allow_loopback_http=settings.webhook_allow_loopback_http,
            batches=batches,
            uploads=uploads,
        )
        metrics.add_metric(name=f"inbox_{outcome.status}", unit=MetricUnit.Count, value=1)
        results.append(outcome.as_dict())
    return {"results": results}


def _s3_record(entry: dict) -> tuple[dict, int, int | None]:
    """(S3 record, waits so far, epoch of the first wait) of an S3 event record or of a waiting drop's SQS record."""
    if entry.get("eventSource") != "aws:sqs":
        return entry, 0, None
    body = json.loads(entry["body"])
    return body["record"], int(body["attempt"]), int(body["first_waited_at"])
