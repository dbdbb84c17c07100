"""The pipeline's steps, one function each, called by the step Lambdas (staging the video request is in ``staging``,
with the GenerateImage step as a whole: it alone needs the image and multipart libraries).
InvokeVideo calls ``start_render`` (its video slot, then ``invoke_video``), AsyncResult ``settle_render``
(``complete_video``, then the slot is free) and ReconcileVideo ``reconcile_video``.

Each step is safe to run again: it re-enters its own stage (a retry), skips work whose result is
already recorded, and refuses to move a job backwards.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Literal, Protocol

from msgspec.structs import replace

from omnireel.aws.artifact_store import ArtifactStore
from omnireel.aws.event_publisher import EventPublisher
from omnireel.aws.job_store import JobStore
from omnireel.aws.workflow import TaskCallbacks
from omnireel.core.clock import iso, now
from omnireel.core.errors import (
    JobConflict,
    MalformedModelOutput,
    OmnireelError,
    VideoExpired,
    VideoRenderFailed,
    VideoTimedOut,
)
from omnireel.core.records import to_dict
from omnireel.core.s3uri import S3Uri
from omnireel.events.progress import publish_image_ready
from omnireel.jobs.job import Job, JobStatus, image_key, video_key
from omnireel.jobs.outcome import finish_job
from omnireel.jobs.request import JobRequest
from omnireel.media.image_request import image_request_body
from omnireel.media.mp4 import BLOCK_BYTES, block_reader, check_mp4_boxes
from omnireel.media.notification import AsyncInferenceNotification, InvocationStatus
from omnireel.runtime.observability import logger, stage_duration
from omnireel.usage.metering import Metering, video_ms_from_notification

if TYPE_CHECKING:  # each step Lambda imports only its own endpoint adapter (and its dependencies)
    from collections.abc import Callable
    from concurrent.futures import Future, ThreadPoolExecutor

    from omnireel.aws.image_endpoint import ImageEndpoint
    from omnireel.aws.video_endpoint import VideoEndpoint

# Error names async_result sends with SendTaskFailure. The InvokeVideo state must never retry them (a retry
# would wait for a render that is not coming): its first retrier lists exactly these (a test keeps the two in step).
CALLBACK_FAILURE_CODES = (VideoRenderFailed.code, VideoExpired.code, MalformedModelOutput.code)


class HeldSlot(Protocol):
    def release(self) -> None: ...


class AdmissionSlots(Protocol):
    """What a step asks of admission (``omnireel.admission.gate.Gate``): a slot on its model endpoint before it calls
    it, freed when the call is over."""

    def acquire(self, job_id: str, kind: Literal["image", "video"]) -> bool: ...
    def held(self, job_id: str, kind: Literal["image", "video"]) -> HeldSlot: ...
    def release(self, job_id: str, kind: Literal["image", "video"]) -> bool: ...
    def queue_seconds(self, job_id: str) -> int: ...


def require_request(job: Job) -> JobRequest:
    if job.request is None:
        raise JobConflict(f"job {job.job_id} has no request to run")
    return job.request


@dataclass(frozen=True)
class GeneratedImage:
    uri: str  # jobs/<id>/image.png, kept for consumers (presigned link, job.image_ready)
    png: bytes | None  # the bytes just generated; None when a retry found the image already stored
    # The job's artifacts with the image: written with the staging transition (one write instead of two).
    artifacts: dict[str, str] | None = None
    request: JobRequest | None = None  # the job's request as read here: staging builds the video request from it
    # What the image call used (omnireel.usage.metering), written with the staging transition as ``artifacts`` is.
    metering: dict[str, object] | None = None


def generate_image(
    job_id: str,
    *,
    jobs: JobStore,
    artifacts: ArtifactStore,
    endpoint: ImageEndpoint,
    model_id: str | None,
    after_model_call: Callable[[], object] | None = None,
    instance_types: list[str] | None = None,
) -> GeneratedImage:
    """``after_model_call``: run as soon as the image endpoint answered (success or failure): admission frees the
    image slot there, before the image is stored and the video request staged."""
    try:
        job = jobs.transition(job_id, JobStatus.GENERATING_IMAGE)
    except JobConflict:
        # GenerateImage also stages the video request: a retry after the image was stored finds the job staging
        # (rendering only if InvokeVideo already ran: never from the state machine, which runs GenerateImage first).
        job = jobs.get(job_id)
        if job.status not in (JobStatus.STAGING_VIDEO, JobStatus.RENDERING_VIDEO) or not job.artifacts.image:
            raise
        return GeneratedImage(job.artifacts.image, None)
    if job.artifacts.image and artifacts.size(S3Uri.parse(job.artifacts.image)):
        logger.info("image already generated", extra={"job_id": job_id})
        return GeneratedImage(job.artifacts.image, None)
    request = require_request(job)
    started = time.monotonic()
    try:
        png = endpoint.generate(image_request_body(request, model_id))
    finally:
        if after_model_call is not None:
            after_model_call()
    # ``instance_types``: the image endpoint config's (ImageInstanceTypes); the call's own duration is its model time.
    measured = Metering(
        image_ms=round((time.monotonic() - started) * 1000), image_instance_types=instance_types or None
    )
    uri = str(artifacts.put(image_key(job_id), png, "image/png"))
    # Recorded by the staging transition that follows at once (a crash in between regenerates the image on retry).
    return GeneratedImage(
        uri, png, to_dict(replace(job.artifacts, image=uri), omit_none=True), request, to_dict(measured)
    )


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
    content_type: str | None = None,
    record_artifacts: dict[str, str] | None = None,
    instance_type: str | None = None,
) -> None:
    """Store the task token with the job, then hand the staged request to the async endpoint.

    Runs in InvokeVideo, after GenerateImage staged and recorded the request (``content_type``: None reads it from the
    staged object). ``record_artifacts``: artifacts to write with this transition (None: leave them). A retried
    attempt (a crash after the render was queued, a lost Lambda response) stores its new token and finds the
    recorded ``async_invocation``: the render is never requested twice.
    """
    fields = {"artifacts": record_artifacts} if record_artifacts else {}
    job = jobs.transition(job_id, JobStatus.RENDERING_VIDEO, task_token=task_token, **fields)
    if job.async_invocation is not None:
        # A retried attempt: the request is already queued; never render twice.
        logger.info("video already requested", extra={"job_id": job_id})
    else:
        if not job.artifacts.video_request:
            raise JobConflict(f"job {job_id} has no staged video request")
        uri = S3Uri.parse(job.artifacts.video_request)
        content_type = content_type or artifacts.content_type(uri)
        invocation = endpoint.invoke_async(
            input_location=str(uri),
            content_type=content_type,
            inference_id=job_id,
            invocation_timeout_seconds=invocation_timeout_seconds,
            request_ttl_seconds=request_ttl_seconds,
        )
        # Usage: the render's model time runs from this acceptance (``instance_type``: VideoInstanceType).
        metering = replace(job.metering or Metering(), video_invoked_at=iso(now()), video_instance_type=instance_type)
        jobs.set_fields(job_id, async_invocation=to_dict(invocation, omit_none=True), metering=to_dict(metering))
    callbacks.heartbeat(task_token)


def start_render(
    job_id: str,
    task_token: str,
    *,
    gate: AdmissionSlots,
    jobs: JobStore,
    endpoint: VideoEndpoint,
    callbacks: TaskCallbacks,
    artifacts: ArtifactStore,
    invocation_timeout_seconds: int,
    request_ttl_seconds: int,
    instance_type: str | None = None,
) -> dict[str, object]:
    """The InvokeVideo step: take a video slot first (admission's fast path). Not admitted: answer this task's own
    token with ``admitted: false`` and the state machine parks the job in WaitForVideoSlot; else queue the render
    (``invoke_video``). The slot is freed when the render's result arrives (``settle_render``) or the job ends.
    Returns the step's output."""
    if not gate.acquire(job_id, "video"):
        callbacks.succeed(task_token, {"job_id": job_id, "admitted": False})
        return {"job_id": job_id, "queued": False, "admitted": False}
    with stage_duration("invoke_video"):
        invoke_video(
            job_id,
            task_token,
            jobs=jobs,
            endpoint=endpoint,
            callbacks=callbacks,
            artifacts=artifacts,
            invocation_timeout_seconds=invocation_timeout_seconds,
            request_ttl_seconds=request_ttl_seconds,
            instance_type=instance_type,
        )
    return {"job_id": job_id, "queued": True}


@cache
def side_thread() -> ThreadPoolExecutor:
    """One extra thread per execution environment, created on first use: a step runs a read or a build on it while it
    waits on another request (async_result reads the output's first block while it reads the job; GenerateImage
    builds the video request while the staging transition is written)."""
    from concurrent.futures import ThreadPoolExecutor  # on first use, not in the cold start

    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="step")


def _read_head(artifacts: ArtifactStore, output_location: str) -> tuple[bytes, int] | None:
    return artifacts.read_head(S3Uri.parse(output_location), BLOCK_BYTES)


def finalize_video(
    job: Job,
    output_location: str,
    *,
    jobs: JobStore,
    artifacts: ArtifactStore,
    record: bool = True,
    head_read: Future[tuple[bytes, int] | None] | None = None,
) -> str:
    """Check the async output is a whole MP4 and copy it to jobs/<id>/video.mp4 (idempotent); ``record``: store the
    artifact on the job now (async_result sets it with the terminal transition instead). ``head_read``: the output's
    first block, already being read (async_result starts it before it reads the job)."""
    output = S3Uri.parse(output_location)
    # The size and the first block in one ranged GET.
    head = head_read.result() if head_read is not None else artifacts.read_head(output, BLOCK_BYTES)
    if head is None:
        raise MalformedModelOutput(f"the async output {output} does not exist")
    first, size = head
    check_mp4_boxes(
        block_reader(lambda offset, length: artifacts.read_range(output, offset, length), first=first), size
    )
    uri = str(artifacts.copy(output, video_key(job.job_id), "video/mp4"))
    if record:
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
    notification: AsyncInferenceNotification,
    *,
    jobs: JobStore,
    artifacts: ArtifactStore,
    callbacks: TaskCallbacks,
    publisher: EventPublisher,
    presign_seconds: int,
) -> str:
    """Resolve the waiting callback task from a SageMaker async notification.

    On success the job's terminal transition and its one ``job.succeeded`` event happen here, before the task is
    answered (``published: true`` in the task output: the state machine then ends without a PublishSucceeded step).
    Returns what happened ("succeeded", "failed", "ignored"). Repeated deliveries are harmless: the copy is
    idempotent, ``finish_job`` publishes once, and a second answer to a resolved task is ignored. A delivery retried
    after a crash between the event and the answer finds the job succeeded and answers the task.
    """
    head_read = None
    if notification.succeeded and notification.output_location:  # read while the job is read: one hop, not two
        head_read = side_thread().submit(_read_head, artifacts, notification.output_location)
    job, token = jobs.find_with_token(notification.inference_id)
    if job is None:
        logger.warning("notification for an unknown job", extra={"inference_id": notification.inference_id})
        return "ignored"
    waiting = job.status is JobStatus.RENDERING_VIDEO or (notification.succeeded and job.status is JobStatus.SUCCEEDED)
    if not waiting or not token:
        logger.info("notification for a job not waiting on video", extra={"job_id": job.job_id, "status": job.status})
        return "ignored"
    if notification.succeeded:
        uri = job.artifacts.video
        if job.status is JobStatus.RENDERING_VIDEO or not uri:
            location = notification.output_location or (job.async_invocation and job.async_invocation.output_location)
            prefetched = head_read if location == notification.output_location else None
            try:
                uri = finalize_video(
                    job, location or "", jobs=jobs, artifacts=artifacts, record=False, head_read=prefetched
                )
            except (MalformedModelOutput, ValueError) as exc:
                error = exc if isinstance(exc, OmnireelError) else MalformedModelOutput(str(exc))
                callbacks.fail(token, error.code, error.code, error.message)
                return "failed"
        if not job.image_ready_published_at:
            # A render done before GenerateImage's job.image_ready was recorded (a crash or a lost write there):
            # the still's event goes first, so a consumer never sees the terminal event before it (same event_id if
            # both publish; SNS itself does not order deliveries).
            publish_image_ready(
                job.job_id, jobs=jobs, artifacts=artifacts, publisher=publisher, presign_seconds=presign_seconds
            )
        # Usage: SageMaker's own measure (receivedTime -> eventTime) when the notification has it, else from the
        # acceptance InvokeVideo recorded to now (omnireel.usage.metering).
        metering = job.metering or Metering()
        video_ms = video_ms_from_notification(notification.received_time, notification.event_time)
        if video_ms is None and metering.video_invoked_at:
            video_ms = video_ms_from_notification(metering.video_invoked_at, iso(now()))
        metering = replace(metering, video_ms=metering.video_ms if metering.video_ms is not None else video_ms)
        # One write: the terminal transition records the video too (no separate artifact update, no re-read).
        finish_job(
            job.job_id,
            JobStatus.SUCCEEDED,
            step_error=None,
            jobs=jobs,
            artifacts=artifacts,
            publisher=publisher,
            presign_seconds=presign_seconds,
            job=job,
            fields={
                "artifacts": to_dict(replace(job.artifacts, video=uri), omit_none=True),
                "metering": to_dict(metering),
            },
        )
        answered = callbacks.succeed(token, {"job_id": job.job_id, "video": uri, "published": True})
        return "succeeded" if answered or job.status is JobStatus.RENDERING_VIDEO else "ignored"
    error_cls = VideoExpired if notification.invocation_status is InvocationStatus.EXPIRED else VideoRenderFailed
    location = notification.error_location or (job.async_invocation.failure_location if job.async_invocation else None)
    detail = notification.failure_reason or _failure_text(artifacts, location) or notification.invocation_status.value
    failure = error_cls(f"the video endpoint reported {notification.invocation_status.value}: {detail}")
    callbacks.fail(token, failure.code, failure.code, failure.message)
    return "failed"


def settle_render(
    notification: AsyncInferenceNotification,
    *,
    gate: AdmissionSlots,
    jobs: JobStore,
    artifacts: ArtifactStore,
    callbacks: TaskCallbacks,
    publisher: EventPublisher,
    presign_seconds: int,
) -> str:
    """The AsyncResult step: answer the render's waiting task (``complete_video``), then free its video slot: the
    render is over (success or error, also for a job cancelled meanwhile) and the next waiting job gets the slot."""
    outcome = complete_video(
        notification,
        jobs=jobs,
        artifacts=artifacts,
        callbacks=callbacks,
        publisher=publisher,
        presign_seconds=presign_seconds,
    )
    gate.release(notification.inference_id, "video")
    return outcome


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
