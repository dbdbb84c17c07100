"""The GenerateImage step as one use case: admission's image slot (the fast path; not admitted: the state machine parks
the job in WaitForImageSlot), the image call (the slot is freed as soon as the endpoint answers), the video request
staged from the PNG bytes just generated, then ``job.image_ready``. The next state, InvokeVideo, queues the render
(``steps.start_render``).

Apart from ``steps`` for the reason ``staging`` is: only the GenerateImage function loads the image and multipart
libraries.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from omnireel.events.progress import publish_image_ready
from omnireel.jobs.staging import stage_video_request
from omnireel.jobs.steps import generate_image
from omnireel.runtime.observability import stage_duration

if TYPE_CHECKING:
    from omnireel.admission.gate import Gate
    from omnireel.aws.artifact_store import ArtifactStore
    from omnireel.aws.event_publisher import EventPublisher
    from omnireel.aws.image_endpoint import ImageEndpoint
    from omnireel.aws.job_store import JobStore


def generate_image_and_stage_video(
    job_id: str,
    *,
    gate: Gate,
    jobs: JobStore,
    artifacts: ArtifactStore,
    endpoint: ImageEndpoint,
    publisher: EventPublisher,
    image_model_id: str | None,
    video_model_id: str | None,
    presign_seconds: int,
    instance_types: list[str] | None = None,
) -> dict[str, object]:
    """The step's output: ``admitted`` (false: ``queue_seconds`` is the wait's timeout), the image and the staged
    video request. Safe to run again: a retry reuses a stored image and a staged request, and publishes
    ``job.image_ready`` only if it was not (``events.progress``)."""
    if not gate.acquire(job_id, "image"):
        return {"job_id": job_id, "admitted": False, "queue_seconds": gate.queue_seconds(job_id)}
    slot = gate.held(job_id, "image")
    try:
        with stage_duration("generate_image"):
            image = generate_image(
                job_id,
                jobs=jobs,
                artifacts=artifacts,
                endpoint=endpoint,
                model_id=image_model_id,
                after_model_call=slot.release,
                instance_types=instance_types,
            )
    finally:
        slot.release()  # the step left before or without the model call
    with stage_duration("stage_video_request"):
        staged = stage_video_request(
            job_id,
            png=image.png,
            jobs=jobs,
            artifacts=artifacts,
            model_id=video_model_id,
            record_artifacts=image.artifacts,
            record_fields={"metering": image.metering} if image.metering else None,
            request=image.request,
        )
    # As soon as the still and the request are stored (also on a retry that found them stored: published once).
    publish_image_ready(job_id, jobs=jobs, artifacts=artifacts, publisher=publisher, presign_seconds=presign_seconds)
    return {"job_id": job_id, "admitted": True, "queue_seconds": 0, "image": image.uri, "video_request": staged.uri}
