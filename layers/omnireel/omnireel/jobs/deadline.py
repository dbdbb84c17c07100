"""The job deadline: a job that no execution will end is failed, with its one ``job.failed`` event.

Everything else in the pipeline ends a job through its execution (RecordFailure, PublishSucceeded, or
``workflow_ended`` when the execution itself fails). This is the net under all of them, run on a schedule:

- a job still ``accepted`` ``START_GRACE_SECONDS`` after it was accepted whose execution does not exist (its
  StartExecution failed - throttled, or the name was held by another input - and the caller never retried) is failed
  with ``WorkflowNotStarted``: nothing could ever move it;
- any job still not terminal ``JobDeadlineSeconds`` after it was admitted (its first slot: time spent waiting for it
  within its ``max_queue_seconds`` does not count; issue 34) is failed with ``JobDeadlineExceeded``.
  The deadline is longer than any execution can run (the template test derives the bound from the state machine's
  timeouts and retries), so a job that is still running normally is never cut short.

``finish_job`` keeps it exactly-once: the transition is conditional and the event is claimed once. The schedule runs
``sweep_open_jobs``: these failures, then the recount of the callers' pending counters (``omnireel.usage.heal``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from omnireel.aws.artifact_store import ArtifactStore
from omnireel.aws.event_publisher import EventPublisher
from omnireel.aws.job_store import JobStore
from omnireel.aws.usage_store import UsageStore
from omnireel.aws.workflow import Workflow
from omnireel.core.clock import iso, now, parse_time
from omnireel.core.errors import JobDeadlineExceeded, OmnireelError, WorkflowNotStarted
from omnireel.jobs.job import Job, JobStatus
from omnireel.jobs.outcome import finish_job
from omnireel.runtime.observability import logger
from omnireel.usage.heal import heal_pending_counters

# Far longer than the moment between writing a job record and starting its execution (one API or inbox invocation,
# with the client's retries), and two sweeps long.
START_GRACE_SECONDS = 600


def fail_overdue_jobs(
    *,
    deadline_seconds: int,
    jobs: JobStore,
    workflow: Workflow,
    artifacts: ArtifactStore,
    publisher: EventPublisher,
    presign_seconds: int,
) -> list[str]:
    """Fail the jobs that no execution will end (see the module docstring); return the ids failed now."""
    moment = now()
    failed: list[str] = []
    for job_id in jobs.open_before(iso(moment - timedelta(seconds=min(START_GRACE_SECONDS, deadline_seconds)))):
        job = jobs.find(job_id)
        if job is None or job.status.terminal:  # the index is eventually consistent; the record is not
            continue
        error = _why_overdue(job, moment, deadline_seconds, workflow)
        if error is None:
            continue
        event = finish_job(
            job_id,
            JobStatus.FAILED,
            step_error={"Error": error.code, "Cause": json.dumps(error.to_dict())},
            jobs=jobs,
            artifacts=artifacts,
            publisher=publisher,
            presign_seconds=presign_seconds,
        ).event
        if event is not None:
            logger.warning("overdue job failed", extra={"job_id": job_id, "status": job.status, "code": error.code})
            failed.append(job_id)
    return failed


@dataclass(frozen=True)
class Sweep:
    failed: list[str]  # the jobs failed now
    pending_counters_healed: dict[str, int] = field(default_factory=dict)  # omnireel.usage.heal: counters corrected


def sweep_open_jobs(
    *,
    deadline_seconds: int,
    jobs: JobStore,
    workflow: Workflow,
    artifacts: ArtifactStore,
    publisher: EventPublisher,
    presign_seconds: int,
    usage: UsageStore | None,
) -> Sweep:
    """The safety net's schedule: fail the jobs no execution will end (``fail_overdue_jobs``), then, where the stack
    counts pending jobs per caller (``usage``), recount those counters from the open jobs
    (``heal_pending_counters``)."""
    failed = fail_overdue_jobs(
        deadline_seconds=deadline_seconds,
        jobs=jobs,
        workflow=workflow,
        artifacts=artifacts,
        publisher=publisher,
        presign_seconds=presign_seconds,
    )
    healed = heal_pending_counters(jobs=jobs, usage=usage) if usage is not None else {}
    return Sweep(failed, healed)


def running_s(job: Job, moment: datetime) -> float:
    """How long the job has run against its deadline: from its first admission (the time it spent waiting for a slot,
    within its max_queue_seconds, does not count: issue 34); a job never admitted, from the end of its queue limit."""
    admitted = job.stage_times.get(JobStatus.GENERATING_IMAGE.value)
    if admitted:
        return (moment - parse_time(admitted)).total_seconds()
    limit = job.request.queue_limit_seconds if job.request is not None else 0
    return (moment - parse_time(job.created_at)).total_seconds() - limit


def _why_overdue(job: Job, moment: datetime, deadline_seconds: int, workflow: Workflow) -> OmnireelError | None:
    age_s = (moment - parse_time(job.created_at)).total_seconds()
    if running_s(job, moment) > deadline_seconds:
        return JobDeadlineExceeded(
            f"no terminal event {deadline_seconds} s after the job was admitted (its deadline): it was still "
            f"{job.status.value} and its execution {job.execution} never ended it"
        )
    if job.status is JobStatus.ACCEPTED and not workflow.started(job.job_id, job.execution):
        return WorkflowNotStarted(
            f"the job's execution {job.execution} never started ({int(age_s)} s after the job was accepted): "
            "StartExecution failed and was not retried; submit the job again"
        )
    return None
