"""The pipeline's steps, one function each, called by the step Lambdas.

Each step is safe to run again: it re-enters its own stage (a retry), skips work whose result is
already recorded, and refuses to move a job backwards.
"""

from __future__ import annotations

from dataclasses import dataclass

from omnireel.aws.artifact_store import ArtifactStore
from omnireel.aws.job_store import JobStore
from omnireel.aws.sagemaker import ImageEndpoint, VideoEndpoint
from omnireel.aws.workflow import TaskCallbacks
from omnireel.errors import (
    JobConflict,
    MalformedModelOutput,
    OmnireelError,
    VideoExpired,
    VideoRenderFailed,
    VideoTimedOut,
)
from omnireel.image_request import image_request_body
from omnireel.job import Job, JobStatus
from omnireel.media import check_mp4_boxes
from omnireel.notification import AsyncInferenceNotification, InvocationStatus
from omnireel.observability import logger
from omnireel.reference_image import prepare_video_reference
from omnireel.request import JobRequest
from omnireel.s3uri import S3Uri, image_key, video_key, video_request_key
from omnireel.video_request import build_video_request

# Error names async_result sends with SendTaskFailure. The InvokeVideo state must never retry them (a retry would
# wait for a render that is not coming): its first retrier lists exactly these (a test keeps the two in step).
CALLBACK_FAILURE_CODES = (VideoRenderFailed.code, VideoExpired.code, MalformedModelOutput.code)


def _require_request(job: Job) -> JobRequest:
    if job.request is None:
        raise JobConflict(f"job {job.job_id} has no request to run")
    return job.request


@dataclass(frozen=True)
class GeneratedImage:
    uri: str  # jobs/<id>/image.png, kept for consumers (presigned link, job.image_ready)
    png: bytes | None  # the bytes just generated; None when a retry found the image already stored


def generate_image(
    job_id: str, *, jobs: JobStore, artifacts: ArtifactStore, endpoint: ImageEndpoint, model_id: str | None
) -> GeneratedImage:
    try:
        job = jobs.transition(job_id, JobStatus.GENERATING_IMAGE)
    except JobConflict:
        # GenerateImage also stages the video request: a retry after the image was stored finds the job staging.
        job = jobs.get(job_id)
        if job.status is not JobStatus.STAGING_VIDEO or not job.artifacts.image:
            raise
        return GeneratedImage(job.artifacts.image, None)
    if job.artifacts.image and artifacts.size(S3Uri.parse(job.artifacts.image)):
        logger.info("image already generated", extra={"job_id": job_id})
        return GeneratedImage(job.artifacts.image, None)
    png = endpoint.generate(image_request_body(_require_request(job), model_id))
    uri = str(artifacts.put(image_key(job_id), png, "image/png"))
    jobs.set_artifact(job_id, "image", uri)
    return GeneratedImage(uri, png)


def stage_video_request(
    job_id: str, *, png: bytes | None, jobs: JobStore, artifacts: ArtifactStore, model_id: str | None
) -> str:
    """Build the /v1/videos/sync request from the still and stage it in S3 for InvokeEndpointAsync.

    Runs in GenerateImage, right after the image, on the PNG bytes it already holds (``png``): no S3 round trip of
    the 1.6-2.7 MB PNG and no extra Lambda hop. Only a retry (``png`` None) reads the stored image back.
    """
    job = jobs.transition(job_id, JobStatus.STAGING_VIDEO)
    request = _require_request(job)
    if png is None:
        if not job.artifacts.image:
            raise JobConflict(f"job {job_id} has no image to build the video request from")
        png = artifacts.read(S3Uri.parse(job.artifacts.image))
    reference = prepare_video_reference(png, request.video.width, request.video.height)
    staged = build_video_request(request, reference, model_id=model_id)
    uri = str(artifacts.put(video_request_key(job_id), staged.body, staged.content_type))
    jobs.set_artifact(job_id, "video_request", uri)
    logger.info(
        "video request staged",
        extra={"job_id": job_id, "bytes": len(staged.body), "jpeg_quality": reference.quality},
    )
    return uri


def invoke_video(
    job_id: str,
    task_token: str,
    *,
    jobs: JobStore,
    endpoint: VideoEndpoint,
    callbacks: TaskCallbacks,
    artifacts: ArtifactStore,
    invocation_timeout_seconds: int,
    request_ttl_seconds: int,
) -> None:
    """Store the task token with the job, then hand the staged request to the async endpoint."""
    job = jobs.transition(job_id, JobStatus.RENDERING_VIDEO, task_token=task_token)
    if job.async_invocation is not None:
        # A retried attempt: the request is already queued; never render twice.
        logger.info("video already requested", extra={"job_id": job_id})
    else:
        if not job.artifacts.video_request:
            raise JobConflict(f"job {job_id} has no staged video request")
        uri = S3Uri.parse(job.artifacts.video_request)
        content_type = artifacts.content_type(uri)
        invocation = endpoint.invoke_async(
            input_location=str(uri),
            content_type=content_type,
            inference_id=job_id,
            invocation_timeout_seconds=invocation_timeout_seconds,
            request_ttl_seconds=request_ttl_seconds,
        )
        jobs.set_fields(job_id, async_invocation=invocation.model_dump(exclude_none=True))
    callbacks.heartbeat(task_token)


def finalize_video(job: Job, output_location: str, *, jobs: JobStore, artifacts: ArtifactStore) -> str:
    """Check the async output is a whole MP4 and copy it to jobs/<id>/video.mp4 (idempotent)."""
    output = S3Uri.parse(output_location)
    size = artifacts.size(output)
    if size is None:
        raise MalformedModelOutput(f"the async output {output} does not exist")
    check_mp4_boxes(lambda offset, length: artifacts.read_range(output, offset, length), size)
    uri = str(artifacts.copy(output, video_key(job.job_id), "video/mp4"))
    jobs.set_artifact(job.job_id, "video", uri)
    return uri


def _failure_text(artifacts: ArtifactStore, location: str | None) -> str | None:
    if not location:
        return None
    try:
        uri = S3Uri.parse(location)
        if artifacts.size(uri) is None:
            return None
        return artifacts.read(uri, max_bytes=4096).decode("utf-8", "replace").strip() or None
    except (ValueError, OSError):
        return None


def complete_video(
    notification: AsyncInferenceNotification, *, jobs: JobStore, artifacts: ArtifactStore, callbacks: TaskCallbacks
) -> str:
    """Resolve the waiting callback task from a SageMaker async notification.

    Returns what happened ("succeeded", "failed", "ignored"). Repeated deliveries are harmless:
    the copy is idempotent and a second answer to a resolved task is ignored.
    """
    job = jobs.find(notification.inference_id)
    if job is None:
        logger.warning("notification for an unknown job", extra={"inference_id": notification.inference_id})
        return "ignored"
    token = jobs.task_token(job.job_id)
    if job.status is not JobStatus.RENDERING_VIDEO or not token:
        logger.info("notification for a job not waiting on video", extra={"job_id": job.job_id, "status": job.status})
        return "ignored"
    if notification.succeeded:
        location = notification.output_location or (job.async_invocation and job.async_invocation.output_location)
        try:
            uri = finalize_video(job, location or "", jobs=jobs, artifacts=artifacts)
        except (MalformedModelOutput, ValueError) as exc:
            error = exc if isinstance(exc, OmnireelError) else MalformedModelOutput(str(exc))
            callbacks.fail(token, error.code, error.code, error.message)
            return "failed"
        callbacks.succeed(token, {"job_id": job.job_id, "video": uri})
        return "succeeded"
    error_cls = VideoExpired if notification.invocation_status is InvocationStatus.EXPIRED else VideoRenderFailed
    location = notification.error_location or (job.async_invocation and job.async_invocation.failure_location)
    detail = notification.failure_reason or _failure_text(artifacts, location) or notification.invocation_status.value
    error = error_cls(f"the video endpoint reported {notification.invocation_status.value}: {detail}")
    callbacks.fail(token, error.code, error.code, error.message)
    return "failed"


def reconcile_video(job_id: str, *, jobs: JobStore, artifacts: ArtifactStore) -> str:
    """After the callback timed out, decide from S3 what really happened (a lost SNS message loses no job)."""
    job = jobs.get(job_id)
    if job.artifacts.video and artifacts.size(S3Uri.parse(job.artifacts.video)):
        return job.artifacts.video
    invocation = job.async_invocation
    if invocation is None:
        raise VideoTimedOut(f"job {job_id}: the video request was never accepted by the endpoint")
    if artifacts.size(S3Uri.parse(invocation.output_location)) is not None:
        logger.info("reconciled: output found after callback timeout", extra={"job_id": job_id})
        return finalize_video(job, invocation.output_location, jobs=jobs, artifacts=artifacts)
    reason = _failure_text(artifacts, invocation.failure_location)
    if reason is not None:
        raise VideoRenderFailed(f"the video endpoint failed (found in S3 after the callback timed out): {reason}")
    raise VideoTimedOut(f"job {job_id}: no video output or failure in S3 when the callback timed out")
