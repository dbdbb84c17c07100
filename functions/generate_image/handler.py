"""GenerateImage step: call the real-time image endpoint, store the PNG in jobs/<id>/image.png, publish job.image_ready,
then build the video request from those bytes and stage it in jobs/<id>/video-request.multipart (no S3 round trip, no
extra hop)."""

from aws_lambda_powertools.utilities.typing import LambdaContext

from omnireel.aws.artifact_store import ArtifactStore
from omnireel.aws.event_publisher import EventPublisher
from omnireel.aws.job_store import JobStore
from omnireel.aws.sagemaker import ImageEndpoint
from omnireel.observability import logger, metrics, stage_duration, tracer
from omnireel.progress import publish_image_ready
from omnireel.settings import ImageSettings
from omnireel.step_handler import StepInput, step_errors
from omnireel.steps import generate_image, stage_video_request

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
        image = generate_image(
            step.job_id, jobs=jobs, artifacts=artifacts, endpoint=endpoint, model_id=settings.image_model_id
        )
    # As soon as the still is stored (also on a retry that found it stored: published once, omnireel.progress).
    publish_image_ready(
        step.job_id, jobs=jobs, artifacts=artifacts, publisher=publisher, presign_seconds=settings.presign_seconds
    )
    with stage_duration("stage_video_request"):
        staged = stage_video_request(
            step.job_id, png=image.png, jobs=jobs, artifacts=artifacts, model_id=settings.video_model_id
        )
    return {"job_id": step.job_id, "image": image.uri, "video_request": staged}
