"""Progress events: ``job.image_ready`` once the still is stored (GenerateImage publishes it at the end of its state,
with the video request staged; InvokeVideo then queues the render), so a consumer can show it while the video renders.
Published to the job-events topic (``event_type`` attribute) and EventBridge like the terminal events, and to the
job's webhook when the request asked for it (``webhook_events``).

Once per job record in the normal case: the job remembers ``image_ready_published_at``, and a retried GenerateImage
that finds the image stored publishes only if that mark is missing (a crash between publishing and marking sends the
same event again: same ``event_id``, de-duplicate on it as for every event).
"""

from __future__ import annotations

from omnireel.aws.artifact_store import ArtifactStore
from omnireel.aws.event_publisher import EventPublisher
from omnireel.aws.job_store import JobStore
from omnireel.core.clock import iso, now
from omnireel.core.s3uri import S3Uri
from omnireel.events.job_events import ArtifactLink, ImageReadyEvent, build_image_ready_event
from omnireel.jobs.job import JobStatus


def publish_image_ready(
    job_id: str, *, jobs: JobStore, artifacts: ArtifactStore, publisher: EventPublisher, presign_seconds: int
) -> ImageReadyEvent | None:
    """Publish the job's ``job.image_ready`` unless it was; return the event published now (None: nothing to do)."""
    job = jobs.get(job_id)
    if job.image_ready_published_at or not job.artifacts.image:
        return None
    url, expires_at = artifacts.presign(S3Uri.parse(job.artifacts.image), presign_seconds)
    # GenerateImage publishes it after staging the video request; the image was stored just before the job entered
    # staging_video, so that is when it occurred.
    stored_at = job.stage_times.get(JobStatus.STAGING_VIDEO.value) or iso(now())
    event = build_image_ready_event(
        job, ArtifactLink(s3_uri=job.artifacts.image, url=url, expires_at=expires_at), stored_at
    )
    publisher.publish(event)
    jobs.set_fields(job_id, image_ready_published_at=iso(now()))
    return event
