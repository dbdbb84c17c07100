"""The job as the API shows it: GET /jobs/{id}."""

from __future__ import annotations

from typing import Any, Protocol

from omnireel.aws.artifact_store import ArtifactStore
from omnireel.core.clock import now
from omnireel.core.errors import JobNotFound
from omnireel.core.records import to_dict
from omnireel.events.event_types import DEFAULT_WEBHOOK_EVENTS
from omnireel.events.job_events import QueuePosition, build_job_event
from omnireel.jobs.artifact_links import artifact_links
from omnireel.jobs.job import Job
from omnireel.usage.metering import usage_view


class AdmissionQueue(Protocol):
    """Where a waiting job stands in admission's queue (``omnireel.admission.gate.Gate``)."""

    def position(self, job: Job) -> QueuePosition | None: ...


def job_view(
    job: Job, artifacts: ArtifactStore, presign_seconds: int, gate: AdmissionQueue | None = None
) -> dict[str, Any]:
    """GET /jobs/{id}: status, per-stage timings, artifacts with presigned URLs, error; ``queue``: where a job waiting
    for a slot stands (read from admission: ``gate``, ``Gate.position``), null when it does not wait."""
    queue: QueuePosition | None = gate.position(job) if gate is not None and job.waiting_entry else None
    return {
        "job_id": job.job_id,
        "status": job.status.value,
        "created_at": job.created_at,
        "updated_at": job.updated_at,
        "source": job.source,
        "source_version": to_dict(job.source_version) if job.source_version else None,
        "request": to_dict(job.request) if job.request else None,
        "stage_times": job.stage_times,
        "timings": job.timings(),
        "artifacts": to_dict(artifact_links(job, artifacts, presign_seconds), omit_none=True),
        "error": to_dict(job.error) if job.error else None,
        "webhook": _webhook_view(job),
        # issue 34 item 8: what the finished job used, an estimate (null until it ends, and for older records)
        "usage": usage_view(job.usage),
        "queue": to_dict(queue) if queue is not None else None,
        # When the terminal event went out (null until then). A job's status turns terminal a moment before its event
        # is published and recorded (omnireel.jobs.outcome.finish_job): a waiter that wants the event waits for this.
        "event_published_at": job.event_published_at or None,
    }


def _webhook_view(job: Job) -> dict[str, Any] | None:
    """The job's webhook and, per event type, where its delivery stands (written by the delivery function)."""
    if job.request is None or job.request.webhook is None:
        return None
    events: list[str] = list(job.request.webhook_events or DEFAULT_WEBHOOK_EVENTS)
    deliveries = {k: to_dict(v) for k, v in job.webhook_deliveries.items()}
    return {"url": job.request.webhook, "events": events, "deliveries": deliveries}


def terminal_event_view(job: Job, artifacts: ArtifactStore, presign_seconds: int) -> dict[str, Any]:
    """GET /jobs/{id}/event: the job's terminal event as consumers received it (``build_job_event`` rebuilds the same
    event: same id, same ``occurred_at``; only the presigned URLs are fresh), for a consumer that missed it and for
    the page's download. A job whose event is not out yet: ``EventNotPublished`` (404)."""
    if not job.event_published_at:
        raise JobNotFound(
            f"job {job.job_id} has no terminal event yet (status {job.status.value})", code="EventNotPublished"
        )
    return to_dict(build_job_event(job, artifact_links(job, artifacts, presign_seconds), now()))
