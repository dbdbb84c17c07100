"""StageVideoRequest: the generated image becomes the video request, staged in S3 for the async endpoint.

Its own module so that only the staging step imports the image and multipart libraries (cold start of the others).
"""

from __future__ import annotations

from omnireel.aws.artifact_store import ArtifactStore
from omnireel.aws.job_store import JobStore
from omnireel.errors import JobConflict
from omnireel.job import JobStatus
from omnireel.media import prepare_video_reference
from omnireel.observability import logger
from omnireel.s3uri import S3Uri, video_request_key
from omnireel.steps import require_request
from omnireel.video_request import build_video_request


def stage_video_request(job_id: str, *, jobs: JobStore, artifacts: ArtifactStore, model_id: str | None) -> str:
    job = jobs.transition(job_id, JobStatus.STAGING_VIDEO)
    request = require_request(job)
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
