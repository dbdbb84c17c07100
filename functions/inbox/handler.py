"""S3 ObjectCreated under prompts/: .txt = the prompt, .json = a full request -> start the job; .jsonl = a batch
(one request per line) -> the batch record and its splitter (``omnireel.batch_intake``).

Each event is processed with exactly the object version it names (``versionId``; ``eTag`` where the bucket is
not versioned), and the job id derives from that version: two uploads of one key are two jobs, each with its own
prompt, and the same event delivered twice starts one execution. An unreadable file, or a version deleted before
it was read, becomes a failed job with a ``job.failed`` event; the version is tagged with the job id and outcome,
never deleted.
"""

from aws_lambda_powertools.utilities.typing import LambdaContext

from omnireel.aws.artifact_store import ArtifactStore
from omnireel.aws.batch_queue import BatchQueue
from omnireel.aws.batch_store import BatchStore
from omnireel.aws.event_publisher import EventPublisher
from omnireel.aws.inbox_store import InboxStore
from omnireel.aws.job_store import JobStore
from omnireel.aws.workflow import Workflow
from omnireel.batch_intake import BatchIntake
from omnireel.inbox import accept_inbox_object
from omnireel.job import SourceVersion
from omnireel.observability import MetricUnit, logger, metrics, tracer
from omnireel.settings import InboxSettings

settings = InboxSettings.from_env()
jobs = JobStore(settings.jobs_table, settings.job_ttl_days)
workflow = Workflow(settings.state_machine_arn)
inbox = InboxStore()
artifacts = ArtifactStore(settings.artifacts_bucket)
publisher = EventPublisher(settings.job_events_topic_arn, settings.event_bus_name)
batches = (
    BatchIntake(BatchStore(settings.batches_table, settings.job_ttl_days), BatchQueue(settings.batch_queue_url))
    if settings.batches_table and settings.batch_queue_url
    else None
)


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict, context: LambdaContext) -> dict:
    results = []
    # The S3 notification as a dict (Powertools' data classes would import every event type at cold start); the
    # key is still URL-encoded here, accept_inbox_object decodes it.
    for record in event["Records"]:
        s3 = record["s3"]
        obj = s3["object"]
        outcome = accept_inbox_object(
            bucket=s3["bucket"]["name"],
            key=obj["key"],
            version=SourceVersion(version_id=obj.get("versionId"), etag=obj.get("eTag") or None),
            sequencer=obj["sequencer"],
            size=int(obj["size"]),
            inbox=inbox,
            jobs=jobs,
            workflow=workflow,
            artifacts=artifacts,
            publisher=publisher,
            presign_seconds=settings.presign_seconds,
            default_video_steps=settings.default_video_steps,
            allow_loopback_http=settings.webhook_allow_loopback_http,
            batches=batches,
        )
        metrics.add_metric(name=f"inbox_{outcome.status}", unit=MetricUnit.Count, value=1)
        results.append(outcome.as_dict())
    return {"results": results}
