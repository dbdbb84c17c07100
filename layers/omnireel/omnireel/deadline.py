"""The job deadline: a job still not terminal this long after it was accepted is failed, with its one event.

Everything else in the pipeline ends a job through its execution (RecordFailure, PublishSucceeded, or
``workflow_ended`` when the execution itself fails). This is the net under all of them: a job whose execution never
started (StartExecution failed and the caller gave up, or the start collided with another execution's name), or whose
execution stopped moving without an end event, is failed with ``JobDeadlineExceeded`` by a scheduled function.
The deadline (``JobDeadlineSeconds``) is longer than any execution can run (the template test derives the bound
from the state machine's timeouts and retries), so a job that is still running normally is never cut short.
``finish_job`` keeps it exactly-once: the transition is conditional and the event is claimed once.
"""

from __future__ import annotations

import json
from datetime import timedelta

from omnireel.aws.artifact_store import ArtifactStore
from omnireel.aws.event_publisher import EventPublisher
from omnireel.aws.job_store import JobStore
from omnireel.errors import JobDeadlineExceeded
from omnireel.job import JobStatus, iso, now
from omnireel.observability import logger
from omnireel.outcome import finish_job


def fail_overdue_jobs(
    *,
    deadline_seconds: int,
    jobs: JobStore,
    artifacts: ArtifactStore,
    publisher: EventPublisher,
    presign_seconds: int,
    limit: int = 100,
) -> list[str]:
    """Fail every job accepted more than ``deadline_seconds`` ago that is not terminal; return the ids failed now."""
    cutoff = iso(now() - timedelta(seconds=deadline_seconds))
    failed: list[str] = []
    for job_id in jobs.open_before(cutoff, limit):
        job = jobs.find(job_id)
        if job is None or job.status.terminal:  # the index is eventually consistent; the record is not
            continue
        error = JobDeadlineExceeded(
            f"no terminal event {deadline_seconds} s after the job was accepted (its deadline): it was still "
            f"{job.status.value} and its execution {job.execution} never ended it"
        )
        cause = json.dumps(error.to_dict())
        event = finish_job(
            job_id,
            JobStatus.FAILED,
            step_error={"Error": error.code, "Cause": cause},
            jobs=jobs,
            artifacts=artifacts,
            publisher=publisher,
            presign_seconds=presign_seconds,
        )
        if event is not None:
            logger.warning("job failed by its deadline", extra={"job_id": job_id, "status": job.status.value})
            failed.append(job_id)
    return failed
