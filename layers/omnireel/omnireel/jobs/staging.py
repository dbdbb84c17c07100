"""Staging the video request: the generated image becomes the /v1/videos/sync request, stored in S3 for the async
endpoint. GenerateImage runs it right after the image; the next state, InvokeVideo, queues it (``steps.start_render``).
The GenerateImage step as one use case is here too (``generate_image_and_stage_video``): admission's image slot, the
image call, staging and ``job.image_ready``.

Its own module so that only the function that stages imports the image library (libvips): the other step functions'
cold starts do not pay for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from msgspec.structs import replace

from omnireel.aws.artifact_store import ArtifactStore
from omnireel.aws.job_store import JobStore
from omnireel.core.errors import JobConflict
from omnireel.core.records import to_dict
from omnireel.core.s3uri import S3Uri
from omnireel.events.progress import publish_image_ready
from omnireel.jobs.job import JobStatus, video_request_key
from omnireel.jobs.request import JobRequest
from omnireel.jobs.steps import AdmissionSlots, generate_image, require_request, side_thread
from omnireel.media.reference_image import VideoReference, prepare_video_reference
from omnireel.media.video_request import VideoRequestBody, build_video_request
from omnireel.runtime.observability import logger, stage_duration

if TYPE_CHECKING:
    from concurrent.futures import Future

    from omnireel.aws.event_publisher import EventPublisher
    from omnireel.aws.image_endpoint import ImageEndpoint


@dataclass(frozen=True)
class StagedRequest:
    uri: str  # jobs/<id>/video-request.multipart
    content_type: str | None  # multipart/form-data; boundary=...; None when a retry found it staged and queued


def _build(png: bytes, request: JobRequest, model_id: str | None) -> tuple[VideoReference, VideoRequestBody]:
    reference = prepare_video_reference(png, request.video.width, request.video.height)
    return reference, build_video_request(request, reference, model_id=model_id)


def stage_video_request(
    job_id: str,
    *,
    png: bytes | None,
    jobs: JobStore,
    artifacts: ArtifactStore,
    model_id: str | None,
    record_artifacts: dict[str, str] | None = None,
    request: JobRequest | None = None,
    record_fields: dict[str, object] | None = None,
) -> StagedRequest:
    """Build the /v1/videos/sync request from the still and stage it in S3 for InvokeEndpointAsync.

    Runs in GenerateImage, right after the image, on the PNG bytes it already holds (``png``): no S3 round trip of
    the 1.6-2.7 MB PNG and no extra Lambda hop. Only a retry (``png`` None) reads the stored image back; a retry that
    finds the job rendering already (it crashed after storing the task token) keeps the staged request.
    ``record_artifacts`` (the job's artifacts with the image just stored) is written with the staging transition; the
    staged request is recorded before this returns (GenerateImage's state ends here; InvokeVideo reads it).
    ``request``: the job's request as GenerateImage read it; with ``png`` the JPEG reference and the multipart body
    are built on a second thread while the staging transition is written (libvips releases the GIL), and used only
    if the transition succeeds.
    """
    fields: dict[str, object] = {"artifacts": record_artifacts} if record_artifacts else {}
    fields.update(record_fields or {})  # ``record_fields``: also written with the transition (the image's metering)
    building: Future[tuple[VideoReference, VideoRequestBody]] | None = None
    if png is not None and request is not None:
        building = side_thread().submit(_build, png, request, model_id)
    try:
        job = jobs.transition(job_id, JobStatus.STAGING_VIDEO, **fields)
    except JobConflict:
        job = jobs.get(job_id)
        if job.status is not JobStatus.RENDERING_VIDEO or not job.artifacts.video_request:
            raise
        return StagedRequest(job.artifacts.video_request, None)
    if building is not None:
        reference, staged = building.result()
    else:
        request = require_request(job)
        if png is None:
            if not job.artifacts.image:
                raise JobConflict(f"job {job_id} has no image to build the video request from")
            png = artifacts.read(S3Uri.parse(job.artifacts.image))
        reference, staged = _build(png, request, model_id)
    uri = str(artifacts.put(video_request_key(job_id), staged.body, staged.content_type))
    logger.info(
        "video request staged",
        extra={"job_id": job_id, "bytes": len(staged.body), "jpeg_quality": reference.quality},
    )
    jobs.set_fields(job_id, artifacts=to_dict(replace(job.artifacts, video_request=uri), omit_none=True))
    return StagedRequest(uri, staged.content_type)


def generate_image_and_stage_video(
    job_id: str,
    *,
    gate: AdmissionSlots,
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
