"""Finishing a job: the terminal transition and its one event (the API's view of a job is ``job_view``)."""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

from omnireel.aws.artifact_store import ArtifactStore
from omnireel.aws.event_publisher import EventPublisher
from omnireel.aws.job_store import JobStore
from omnireel.core.clock import now
from omnireel.core.errors import JobConflict, decode_step_failure
from omnireel.core.records import to_dict
from omnireel.events.job_events import JobEvent, build_job_event
from omnireel.jobs.artifact_links import artifact_links
from omnireel.jobs.job import STAGE_OF_STATUS, Job, JobError, JobStatus
from omnireel.runtime.observability import logger


class AdmissionExit(Protocol):
    """What a job's end asks of admission (``omnireel.admission.gate.Gate``): out of its queue, its slots freed."""

    def leave(self, job: Job) -> None: ...


def failure_from_step(job: Job, step_error: dict[str, Any] | None) -> JobError:
    """The job's error record from the state machine's caught ``{Error, Cause}``."""
    step_error = step_error or {}
    decoded = decode_step_failure(step_error.get("Error"), step_error.get("Cause"))
    stage = STAGE_OF_STATUS.get(job.status, "finish")
    return JobError(stage=stage, code=decoded["code"], message=decoded["message"][:2000])


class Finished(NamedTuple):
    """What ``finish_job`` did: the record as it ended it, and the event it published now (None: it already was)."""

    job: Job
    event: JobEvent | None


def finish_job(
    job_id: str,
    outcome: JobStatus,
    *,
    step_error: dict[str, Any] | None,
    jobs: JobStore,
    artifacts: ArtifactStore,
    publisher: EventPublisher,
    presign_seconds: int,
    job: Job | None = None,
    fields: dict[str, Any] | None = None,
) -> Finished:
    """Move the job to its terminal status and publish its event exactly once.

    If the job is already terminal, its recorded outcome wins. ``job``: the record as the caller just read it (saves a
    read); ``fields``: set with the terminal transition (async_result: the video artifact). The publication is claimed
    on this incarnation of the record only: once the event is out, a consumer may see it, TTL (or an operator) may
    delete the record and the same Idempotency-Key make a new one, all before this call claims; that new record's own
    event must still go out. Returns the record as this call ended it (what ``leave`` must act on, not a re-read) and
    the event published now (None: it already was).
    """
    job = job or jobs.get(job_id)
    if not job.status.terminal:
        fields = dict(fields or {})
        if outcome is JobStatus.FAILED:
            fields["error"] = to_dict(failure_from_step(job, step_error))
        try:
            job = jobs.transition(job_id, outcome, **fields)
        except JobConflict:
            job = jobs.get(job_id)
            logger.warning("terminal transition lost a race", extra={"job_id": job_id, "status": job.status})
    if job.event_published_at:
        logger.info("terminal event already published", extra={"job_id": job_id})
        return Finished(job, None)
    event = build_job_event(job, artifact_links(job, artifacts, presign_seconds), now())
    publisher.publish(event)
    if not jobs.claim_publication(job):
        logger.warning("publication not claimed: published concurrently, or a new record", extra={"job_id": job_id})
    return Finished(job, event)


def of_execution(job: Job, execution: str | None) -> bool:
    """Whether ``job`` is the record of the step's ``execution`` (None: a caller outside the state machine)."""
    if execution is None or job.execution == execution:
        return True
    logger.warning(
        "a step of an earlier record of the job: nothing to do",
        extra={"job_id": job.job_id, "execution": execution, "record_execution": job.execution},
    )
    return False


def finish_and_leave(
    job_id: str,
    outcome: JobStatus,
    *,
    execution: str | None = None,
    step_error: dict[str, Any] | None,
    gate: AdmissionExit,
    jobs: JobStore,
    artifacts: ArtifactStore,
    publisher: EventPublisher,
    presign_seconds: int,
    job: Job | None = None,
    fields: dict[str, Any] | None = None,
) -> JobEvent | None:
    """The finishing steps (PublishSucceeded, RecordFailure, RecordExpired: ``admission.expiry``): ``finish_job``,
    then the job leaves admission (its waiting entry, any slot it still holds). Returns the event published now (None:
    it was already). ``job`` and ``fields`` as for ``finish_job``.

    ``execution``: the step's own execution; a record of another one (made again for the job id after TTL deleted
    this execution's record, e.g. by a consumer that acted on the event this job already sent) is left alone."""
    job = job or jobs.get(job_id)
    if not of_execution(job, execution):
        return None
    finished = finish_job(
        job_id,
        outcome,
        job=job,
        fields=fields,
        step_error=step_error,
        jobs=jobs,
        artifacts=artifacts,
        publisher=publisher,
        presign_seconds=presign_seconds,
    )
    # The record as it ended, not a re-read: after the event a new record of the same job id may stand there, waiting
    # for a slot (its entry and slots are its own).
    gate.leave(finished.job)
    return finished.event
