"""Ending a job: the terminal transition and its one event; and the job as the API shows it."""

from __future__ import annotations

from typing import Any

from omnireel.aws.artifact_store import ArtifactStore
from omnireel.aws.event_publisher import EventPublisher
from omnireel.aws.job_store import JobStore
from omnireel.errors import JobConflict, decode_step_failure
from omnireel.events import ArtifactLink, EventArtifacts, JobEvent, build_job_event
from omnireel.job import STAGE_OF_STATUS, Job, JobError, JobStatus, now
from omnireel.observability import logger
from omnireel.request import DEFAULT_WEBHOOK_EVENTS
from omnireel.s3uri import S3Uri


def artifact_links(job: Job, artifacts: ArtifactStore, seconds: int) -> EventArtifacts:
    links: dict[str, ArtifactLink] = {}
    for name, uri in job.artifacts.model_dump(exclude_none=True).items():
        url, expires_at = artifacts.presign(S3Uri.parse(uri), seconds)
        links[name] = ArtifactLink(s3_uri=uri, url=url, expires_at=expires_at)
    return EventArtifacts(**links)


def failure_from_step(job: Job, step_error: dict[str, Any] | None) -> JobError:
    """The job's error record from the state machine's caught ``{Error, Cause}``."""
    step_error = step_error or {}
    decoded = decode_step_failure(step_error.get("Error"), step_error.get("Cause"))
    stage = STAGE_OF_STATUS.get(job.status, "finish")
    return JobError(stage=stage, code=decoded["code"], message=decoded["message"][:2000])


def finish_job(
    job_id: str,
    outcome: JobStatus,
    *,
    step_error: dict[str, Any] | None,
    jobs: JobStore,
    artifacts: ArtifactStore,
    publisher: EventPublisher,
    presign_seconds: int,
) -> JobEvent | None:
    """Move the job to its terminal status and publish its event exactly once.

    Returns the event published now, or None if it had already been published (a retry or a
    duplicate). If the job is already terminal, its recorded outcome wins.
    """
    job = jobs.get(job_id)
    if not job.status.terminal:
        fields: dict[str, Any] = {}
        if outcome is JobStatus.FAILED:
            fields["error"] = failure_from_step(job, step_error).model_dump()
        try:
            job = jobs.transition(job_id, outcome, **fields)
        except JobConflict:
            job = jobs.get(job_id)
            logger.warning("terminal transition lost a race", extra={"job_id": job_id, "status": job.status})
    if job.event_published_at:
        logger.info("terminal event already published", extra={"job_id": job_id})
        return None
    event = build_job_event(job, artifact_links(job, artifacts, presign_seconds), now())
    publisher.publish(event)
    if not jobs.claim_publication(job_id):
        logger.warning("terminal event published concurrently", extra={"job_id": job_id})
    return event


def job_view(job: Job, artifacts: ArtifactStore, presign_seconds: int) -> dict[str, Any]:
    """GET /jobs/{id}: status, per-stage timings, artifacts with presigned URLs, error."""
    return {
        "job_id": job.job_id,
        "status": job.status.value,
        "created_at": job.created_at,
        "updated_at": job.updated_at,
        "source": job.source,
        "source_version": job.source_version.model_dump() if job.source_version else None,
        "request": job.request.model_dump(mode="json") if job.request else None,
        "stage_times": job.stage_times,
        "timings": job.timings(),
        "artifacts": artifact_links(job, artifacts, presign_seconds).model_dump(mode="json", exclude_none=True),
        "error": job.error.model_dump() if job.error else None,
        "webhook": _webhook_view(job),
    }


def _webhook_view(job: Job) -> dict[str, Any] | None:
    if job.request is None or job.request.webhook is None:
        return None
    events = job.request.webhook_events or list(DEFAULT_WEBHOOK_EVENTS)
    deliveries = {k: v.model_dump() for k, v in job.webhook_deliveries.items()}
    return {"url": job.request.webhook, "events": events, "deliveries": deliveries}
