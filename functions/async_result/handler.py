"""Subscribed to the video endpoint's async success and error topics: answer the waiting task token.

On success it also makes the job's terminal transition and publishes its one ``job.succeeded`` event (SNS +
EventBridge) before answering, so the event leaves without another Step Functions hop (``steps.complete_video``).

Routes on the notification body (``invocationStatus``), never on the topic ARN, so the same code
serves both topics. Repeated deliveries are harmless. A notification that cannot be parsed fails the
invocation, so Lambda's retries and then the on-failure destination keep it.
"""

from aws_lambda_powertools.utilities.typing import LambdaContext

from omnireel.aws.artifact_store import ArtifactStore
from omnireel.aws.event_publisher import EventPublisher
from omnireel.aws.job_store import JobStore
from omnireel.aws.workflow import TaskCallbacks
from omnireel.notification import notifications_from_sns
from omnireel.observability import MetricUnit, logger, metrics, tracer
from omnireel.settings import PublishSettings
from omnireel.steps import complete_video

settings = PublishSettings.from_env()
jobs = JobStore(settings.jobs_table, settings.job_ttl_days)
artifacts = ArtifactStore(settings.artifacts_bucket)
callbacks = TaskCallbacks()
publisher = EventPublisher(settings.job_events_topic_arn, settings.event_bus_name, eager=True)  # job.succeeded


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict, context: LambdaContext) -> dict:
    results = []
    for notification in notifications_from_sns(event):
        logger.info(
            "async notification",
            extra={"job_id": notification.inference_id, "invocation_status": notification.invocation_status},
        )
        outcome = complete_video(
            notification,
            jobs=jobs,
            artifacts=artifacts,
            callbacks=callbacks,
            publisher=publisher,
            presign_seconds=settings.presign_seconds,
        )
        metrics.add_metric(name=f"video_{outcome}", unit=MetricUnit.Count, value=1)
        results.append({"job_id": notification.inference_id, "outcome": outcome})
    return {"results": results}
