"""GenerateImage step (a synchronous task): take an image slot (admission's fast path: one DynamoDB transaction; not
admitted: answer ``admitted: false`` and the state machine parks the job in WaitForImageSlot), call the real-time
image endpoint and free the slot as soon as it answers, store the PNG in jobs/<id>/image.png,
build the video request from those bytes and stage it in jobs/<id>/video-request.multipart (no S3 round trip of the
PNG), then publish job.image_ready (one use case: ``omnireel.jobs.staging``). The next state, InvokeVideo, queues
the staged request and waits for the render.
"""

from aws_lambda_powertools.utilities.typing import LambdaContext

from omnireel.admission.gate import Gate
from omnireel.aws import adapters
from omnireel.jobs.staging import generate_image_and_stage_video
from omnireel.runtime.handler import lambda_handler, parse_step_input
from omnireel.runtime.observability import logger
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
    return generate_image_and_stage_video(
        step.job_id,
        gate=gate,
        jobs=jobs,
        artifacts=artifacts,
        endpoint=endpoint,
        publisher=publisher,
        image_model_id=settings.image_model_id,
        video_model_id=settings.video_model_id,
        presign_seconds=settings.presign_seconds,
        instance_types=settings.image_instance_types.split(",") if settings.image_instance_types else None,
    )
