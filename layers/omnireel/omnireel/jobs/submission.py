"""Accepting work: a validated request becomes a job record and one named execution (``submit_job``; POST /jobs is
``submit_api_job``)."""

from __future__ import annotations

import json

from omnireel.aws.artifact_store import ArtifactStore
from omnireel.aws.event_publisher import EventPublisher
from omnireel.aws.job_store import JobStore
from omnireel.aws.workflow import Workflow
from omnireel.core.clock import iso, now
from omnireel.core.errors import ExecutionNameTaken, IdempotencyConflict
from omnireel.core.ids import job_id_for, new_job_id
from omnireel.core.s3uri import SourceVersion
from omnireel.jobs.job import BatchRef, Job, JobError, JobStatus, fingerprint, new_execution_name
from omnireel.jobs.outcome import finish_job
from omnireel.jobs.request import JobRequest
from omnireel.usage.limits import counted_as


def submit_job(
    request: JobRequest,
    *,
    source: str,
    natural_key: str | None,
    jobs: JobStore,
    workflow: Workflow,
    owner: str | None = None,
    owner_arn: str | None = None,
    source_version: SourceVersion | None = None,
    batch: BatchRef | None = None,
) -> tuple[Job, bool]:
    """Create the job (or find the one this natural key already made) and make sure it runs.

    Returns (job, created). The same natural key with a different request is an
    ``IdempotencyConflict``. Each record names its own execution (``new_execution_name``: the job id
    plus a random suffix, stored with the record), so a replay after a crash between the two writes
    starts the same execution exactly once, and a record made again after TTL deleted the old one
    starts a new execution instead of colliding with the old, closed one.
    """
    job_id = job_id_for(natural_key) if natural_key else new_job_id()
    stamp = iso(now())
    candidate = Job(
        job_id=job_id,
        status=JobStatus.ACCEPTED,
        request=request,
        source=source,
        source_version=source_version,
        owner=owner,
        owner_arn=owner_arn,
        batch=batch,
        request_fingerprint=fingerprint(request),
        created_at=stamp,
        updated_at=stamp,
        stage_times={JobStatus.ACCEPTED.value: stamp},
        execution_name=new_execution_name(job_id),
        counted_as=counted_as(owner),  # its caller's pending place (CallerMaxPendingJobs), taken with the record
    )
    job, created = jobs.create(candidate)  # TooManyPendingJobs: the caller is at its limit, nothing was written
    if not created and job.request_fingerprint != candidate.request_fingerprint:
        raise IdempotencyConflict(f"this idempotency key was already used for a different request (job {job.job_id})")
    if job.status is JobStatus.ACCEPTED:
        workflow.start(job.job_id, job.execution)
    return job, created


def submit_api_job(
    request: JobRequest,
    *,
    owner: str,
    owner_arn: str | None,
    idempotency_key: str | None,
    jobs: JobStore,
    workflow: Workflow,
    artifacts: ArtifactStore,
    publisher: EventPublisher,
    presign_seconds: int,
) -> tuple[Job, bool]:
    """POST /jobs: ``submit_job`` under the caller's ``Idempotency-Key``, if any (the route checked where the request's
    webhook may be sent first: ``omnireel.webhooks.submit_check``).

    A job whose execution name is taken (``ExecutionNameTaken``: recorded, but it can never start under its name) is
    failed at once, with its one ``job.failed`` (a retry with the same key answers that failed job), not left for the
    deadline sweep; the error is raised again for the answer (500, naming the job)."""
    natural_key = f"api:{owner}:{idempotency_key}" if idempotency_key else None
    try:
        return submit_job(
            request,
            source="api",
            natural_key=natural_key,
            jobs=jobs,
            workflow=workflow,
            owner=owner,
            owner_arn=owner_arn,
        )
    except ExecutionNameTaken as exc:
        finish_job(
            exc.job_id, JobStatus.FAILED, step_error={"Error": exc.code, "Cause": json.dumps(exc.to_dict())}, jobs=jobs,
            artifacts=artifacts, publisher=publisher, presign_seconds=presign_seconds,
        )  # fmt: skip
        raise


def reject_submission(
    *,
    natural_key: str,
    source: str,
    error: JobError,
    jobs: JobStore,
    source_version: SourceVersion | None = None,
    owner: str | None = None,
    batch: BatchRef | None = None,
) -> Job:
    """Record an unreadable submission as a failed job so it gets its ``job.failed`` event."""
    stamp = iso(now())
    job = Job(
        job_id=job_id_for(natural_key),
        status=JobStatus.FAILED,
        request=None,
        source=source,
        source_version=source_version,
        owner=owner,
        batch=batch,
        created_at=stamp,
        updated_at=stamp,
        stage_times={JobStatus.FAILED.value: stamp},
        error=error,
    )
    stored, _ = jobs.create(job)
    return stored
