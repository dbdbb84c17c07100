"""Cancelling a job (``DELETE /jobs/{id}``): the terminal ``cancelled`` transition, its one ``job.cancelled`` event,
and StopExecution.

The transition is the same conditional write as every terminal transition, so a cancel racing with success or failure
has one winner: whichever lands first is the job's outcome and its only terminal event. After it, the execution's own
steps find a terminal job (their transitions fail, ``finish_job`` publishes nothing new) and ``workflow_ended`` sees an
``ABORTED`` execution whose job event was published. SageMaker async inference has no cancel: a render already queued
still runs and is billed; its late notification finds a job that is not ``rendering_video`` and is ignored.

A job waiting for its first slot (``queued``, or ``accepted``) leaves admission's queue: no model was called, nothing
was rendered or billed, and the answer says so. A cancelled job frees the slots it holds (``Gate.leave``), except the
video slot of a render SageMaker still runs.
"""

from __future__ import annotations

from omnireel.aws.artifact_store import ArtifactStore
from omnireel.aws.event_publisher import EventPublisher
from omnireel.aws.job_store import JobStore
from omnireel.aws.workflow import Workflow
from omnireel.core.errors import JobConflict, JobFinished
from omnireel.core.records import to_dict
from omnireel.jobs.job import STAGE_OF_STATUS, Job, JobError, JobStatus
from omnireel.jobs.outcome import AdmissionExit, finish_job

CANCELLED_MESSAGE = "cancelled by its owner (DELETE /jobs/{id})"
QUEUED_RENDER_NOTE = (
    "the video render was already queued at the SageMaker async endpoint, which has no cancel: it still runs and is"
    " billed; its result is discarded"
)
NOT_STARTED_NOTE = "the job was waiting for a model endpoint slot: no model was called, nothing was rendered or billed"
NOT_STARTED_STAGES = (STAGE_OF_STATUS[JobStatus.ACCEPTED], STAGE_OF_STATUS[JobStatus.QUEUED])


def cancel_job(
    job: Job,
    *,
    jobs: JobStore,
    workflow: Workflow,
    artifacts: ArtifactStore,
    publisher: EventPublisher,
    presign_seconds: int,
    gate: AdmissionExit | None = None,
) -> Job:
    """Cancel ``job`` (already checked to be the caller's); return the cancelled job.

    Raises ``JobFinished`` (with the status) if the job had ended before - also when it was cancelled before, after
    making sure that earlier cancellation's event and StopExecution happened (a retried DELETE completes a crashed one).
    """
    first = not job.status.terminal
    if first:
        error = JobError(stage=STAGE_OF_STATUS[job.status], code="Cancelled", message=CANCELLED_MESSAGE)
        try:
            job = jobs.transition(job.job_id, JobStatus.CANCELLED, error=to_dict(error))
        except JobConflict:
            job, first = jobs.get(job.job_id), False  # something else ended it first
    if job.status is not JobStatus.CANCELLED:
        raise JobFinished(f"job {job.job_id} has already {job.status.value}", status=job.status.value)
    # The event before StopExecution: workflow_ended, woken by the ABORTED execution, then finds it published.
    finish_job(
        job.job_id,
        JobStatus.CANCELLED,
        step_error=None,
        jobs=jobs,
        artifacts=artifacts,
        publisher=publisher,
        presign_seconds=presign_seconds,
    )
    workflow.stop(job.execution, CANCELLED_MESSAGE)
    if gate is not None:  # out of admission's queue, its slots freed (a retried DELETE does it again: harmless)
        gate.leave(jobs.get(job.job_id))
    if not first:
        raise JobFinished(f"job {job.job_id} was already cancelled", status=job.status.value)
    return jobs.get(job.job_id)


def cancellation_view(job: Job) -> dict[str, object]:
    """The DELETE answer: what was stopped, and what could not be."""
    stage = job.error.stage if job.error else None
    # In render_video the async request may be on its way even if the record does not show it yet.
    may_run = job.async_invocation is not None or stage == STAGE_OF_STATUS[JobStatus.RENDERING_VIDEO]
    if stage in NOT_STARTED_STAGES:
        return {
            "job_id": job.job_id,
            "status": job.status.value,
            "cancelled_at_stage": stage,
            "video_render_may_run": False,
            "model_called": False,
            "note": NOT_STARTED_NOTE,
        }
    return {
        "job_id": job.job_id,
        "status": job.status.value,
        "cancelled_at_stage": stage,
        "video_render_may_run": may_run,
        "note": QUEUED_RENDER_NOTE if may_run else "no video render had been queued: nothing more runs for this job",
    }
