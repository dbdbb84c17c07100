"""A job not admitted within its ``max_queue_seconds`` (its WaitForImageSlot state timed out): it ends ``expired``
with exactly one ``job.expired`` event, leaves the queue, and no model was ever called for it.

A wait for a slot of a job admitted before (a retried image call, the video stage) that times out is a failure
(``AdmissionTimedOut``), not an expiry: the job had started.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from omnireel.core.records import to_dict
from omnireel.jobs.job import JobError, JobStatus
from omnireel.jobs.outcome import finish_and_leave
from omnireel.jobs.request import DEFAULT_MAX_QUEUE_SECONDS

if TYPE_CHECKING:
    from omnireel.admission.gate import Gate
    from omnireel.aws.artifact_store import ArtifactStore
    from omnireel.aws.event_publisher import EventPublisher
    from omnireel.aws.job_store import JobStore
    from omnireel.events.job_events import JobEvent

NOT_STARTED = "no model was called: nothing was rendered or billed"


def expire_job(
    job_id: str,
    *,
    execution: str | None = None,
    gate: Gate,
    jobs: JobStore,
    artifacts: ArtifactStore,
    publisher: EventPublisher,
    presign_seconds: int,
) -> JobEvent | None:
    """End the job ``expired`` (or ``failed`` if it had been admitted before); return the event published now.
    ``execution``: the step's own; a record of another execution is left alone (``outcome.finish_and_leave``)."""
    job = jobs.get(job_id)
    step_error: dict[str, str] | None = None
    fields: dict[str, Any] | None = None
    if job.status in (JobStatus.ACCEPTED, JobStatus.QUEUED):
        limit = job.request.queue_limit_seconds if job.request else DEFAULT_MAX_QUEUE_SECONDS
        error = JobError(
            stage="queue",
            code="QueueTimeExceeded",
            message=f"not admitted to a model endpoint within max_queue_seconds={limit}: {NOT_STARTED}",
        )
        outcome, fields = JobStatus.EXPIRED, {"error": to_dict(error)}
    else:
        message = "waited longer than its wait state allows for a model endpoint slot, after it had started"
        cause = json.dumps({"code": "AdmissionTimedOut", "message": message})
        outcome, step_error = JobStatus.FAILED, {"Error": "AdmissionTimedOut", "Cause": cause}
    # The incarnation check, the transition, the one event and the exit from admission: the other finishing steps'.
    return finish_and_leave(
        job_id,
        outcome,
        execution=execution,
        step_error=step_error,
        gate=gate,
        jobs=jobs,
        artifacts=artifacts,
        publisher=publisher,
        presign_seconds=presign_seconds,
        job=job,
        fields=fields,
    )
