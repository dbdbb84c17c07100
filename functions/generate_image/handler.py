"""GenerateImage step (a synchronous task): take an image slot (admission's fast path: one DynamoDB transaction; not
admitted: answer ``admitted: false`` and the state machine parks the job in WaitForImageSlot), call the real-time
image endpoint and free the slot as soon as it answers, store the PNG in jobs/<id>/image.png,
build the video request from those bytes and stage it in jobs/<id>/video-request.multipart (no S3 round trip of the
PNG), then publish job.image_ready. The next state, InvokeVideo, queues the staged request and waits for the render.
"""

from aws_lambda_powertools.utilities.typing import LambdaContext

from omnireel.admission.gate import Gate
from omnireel.aws import adapters
from omnireel.events.progress import publish_image_ready
from omnireel.jobs.staging import stage_video_request
from omnireel.jobs.steps import generate_image
from omnireel.runtime.handler import lambda_handler, parse_step_input
from omnireel.runtime.observability import logger, stage_duration
from omnireel.runtime.settings import ImageSettings

settings = ImageSettings.from_env()
jobs = adapters.job_store(settings)
artifacts = adapters.artifact_store(settings)
endpoint = adapters.image_endpoint(settings)
publisher = adapters.event_publisher(settings, eager=True)  # job.image_ready
gate = Gate(store=adapters.admission_store(settings), jobs=jobs, callbacks=adapters.task_callbacks())


@lambda_handler(stage="generate_image")
def handler(event: dict, context: LambdaContext) -> dict:
    step = parse_step_input(event)
    logger.append_keys(job_id=step.job_id)
    if not gate.acquire(step.job_id, "image"):
        return {"job_id": step.job_id, "admitted": False, "queue_seconds": gate.queue_seconds(step.job_id)}
    slot = gate.held(step.job_id, "image")
    try:
        with stage_duration("generate_image"):
            image = generate_image(
                step.job_id,
                jobs=jobs,
                artifacts=artifacts,
                endpoint=endpoint,
                model_id=settings.image_model_id,
                after_model_call=slot.release,
                instance_types=settings.image_instance_types.split(",") if settings.image_instance_types else None,
            )
    finally:
        slot.release()  # the step left before or without the model call
    with stage_duration("stage_video_request"):
        staged = stage_video_request(
            step.job_id,
            png=image.png,
            jobs=jobs,
            artifacts=artifacts,
            model_id=settings.video_model_id,
            record_artifacts=image.artifacts,
            record_fields={"metering": image.metering} if image.metering else None,
            request=image.request,
        )
    # As soon as the still and the request are stored (also on a retry that found them stored: published once,
    # omnireel.events.progress).
    publish_image_ready(
        step.job_id, jobs=jobs, artifacts=artifacts, publisher=publisher, presign_seconds=settings.presign_seconds
    )
    return {
        "job_id": step.job_id,
        "admitted": True,
        "queue_seconds": 0,
        "image": image.uri,
        "video_request": staged.uri,
    }
