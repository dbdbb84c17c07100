"""Subscribed to the video endpoint's async success and error topics: answer the waiting task token.

Either way the render's video slot is freed (admission: the next waiting job gets it). On success it also makes the
job's terminal transition and publishes its one ``job.succeeded`` event (SNS +
EventBridge) before answering, so the event leaves without another Step Functions hop (``steps.settle_render``).

Routes on the notification body (``invocationStatus``), never on the topic ARN, so the same code
serves both topics. Repeated deliveries are harmless. A notification that cannot be parsed fails the
invocation, so Lambda's retries and then the on-failure destination keep it.
"""

from aws_lambda_powertools.utilities.typing import LambdaContext

from omnireel.admission.gate import Gate
from omnireel.aws import adapters
from omnireel.jobs.steps import settle_render
from omnireel.media.notification import notifications_from_sns
from omnireel.runtime.handler import lambda_handler
from omnireel.runtime.observability import MetricUnit, logger, metrics
from omnireel.runtime.settings import PublishSettings

settings = PublishSettings.from_env()
jobs = adapters.job_store(settings)
artifacts = adapters.artifact_store(settings)
callbacks = adapters.task_callbacks()
gate = Gate(store=adapters.admission_store(settings), jobs=jobs, callbacks=callbacks)
publisher = adapters.event_publisher(settings, eager=True)  # job.succeeded


@lambda_handler()
def handler(event: dict, context: LambdaContext) -> dict:
    results = []
    for notification in notifications_from_sns(event):
        logger.info(
            "async notification",
            extra={"job_id": notification.inference_id, "invocation_status": notification.invocation_status},
        )
        # The render is over (success or error, also for a job cancelled meanwhile): its video slot is freed too.
        outcome = settle_render(
            notification,
            gate=gate,
            jobs=jobs,
            artifacts=artifacts,
            callbacks=callbacks,
            publisher=publisher,
            presign_seconds=settings.presign_seconds,
        )
        metrics.add_metric(name=f"video_{outcome}", unit=MetricUnit.Count, value=1)
        results.append({"job_id": notification.inference_id, "outcome": outcome})
    return {"results": results}
