"""GenerateImage step: the real-time image endpoint -> jobs/<id>/image.png, then job.image_ready."""

from aws_lambda_powertools.utilities.typing import LambdaContext

from omnireel.aws.artifact_store import ArtifactStore
from omnireel.aws.event_publisher import EventPublisher
from omnireel.aws.job_store import JobStore
from omnireel.aws.sagemaker import ImageEndpoint
from omnireel.observability import logger, metrics, stage_duration, tracer
from omnireel.progress import publish_image_ready
from omnireel.settings import ImageSettings
from omnireel.step_handler import StepInput, step_errors
from omnireel.steps import generate_image

settings = ImageSettings.from_env()
jobs = JobStore(settings.jobs_table, settings.job_ttl_days)
artifacts = ArtifactStore(settings.artifacts_bucket)
endpoint = ImageEndpoint(settings.image_endpoint_name)
publisher = EventPublisher(settings.job_events_topic_arn, settings.event_bus_name)


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
@step_errors("generate_image")
def handler(event: dict, context: LambdaContext) -> dict:
    step = StepInput.model_validate(event)
    logger.append_keys(job_id=step.job_id)
    with stage_duration("generate_image"):
        uri = generate_image(
            step.job_id, jobs=jobs, artifacts=artifacts, endpoint=endpoint, model_id=settings.image_model_id
        )
    # Also on a retry that found the image stored: published once (omnireel.progress).
    publish_image_ready(
        step.job_id, jobs=jobs, artifacts=artifacts, publisher=publisher, presign_seconds=settings.presign_seconds
    )
    return {"job_id": step.job_id, "image": uri}
