"""Job events for consumers: ``job.succeeded`` / ``job.failed`` / ``job.cancelled`` / ``job.expired`` (terminal: exactly
one per job) and ``job.queued`` / ``job.image_ready`` (progress), version 1.

The same body goes to the job-events SNS topic (with message attributes for filter policies) and
to EventBridge (``source = omnireel``, ``detail-type`` = event type). The JSON Schemas in ``docs/events/`` are the
contract: tests check that the fields here are the schema's and that the events built here validate against it.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Literal, cast

import msgspec

from omnireel.core.clock import iso
from omnireel.core.ids import job_id_for
from omnireel.core.s3uri import SourceVersion
from omnireel.events.event_types import TerminalEventType
from omnireel.jobs.job import BatchRef, Job, JobError, JobStatus
from omnireel.jobs.request import JobRequest
from omnireel.usage.metering import usage_view

if TYPE_CHECKING:
    from omnireel.events.batch_events import BatchEvent

EVENT_VERSION: Literal[1] = 1
TerminalStatus = Literal["succeeded", "failed", "cancelled", "expired"]
EVENT_SOURCE = "omnireel"


class ArtifactLink(msgspec.Struct, kw_only=True):
    s3_uri: str
    url: str  # presigned HTTPS GET URL
    expires_at: str  # when the presigned URL stops working (ISO 8601, UTC)


class EventArtifacts(msgspec.Struct, kw_only=True):
    image: ArtifactLink | None = None
    video_request: ArtifactLink | None = None
    video: ArtifactLink | None = None


class EventTimings(msgspec.Struct, kw_only=True):
    image_s: float | None = None
    staging_s: float | None = None
    video_queue_and_render_s: float | None = None
    total_s: float | None = None


class EventUsage(msgspec.Struct, kw_only=True):
    """What the job used (omnireel.usage.metering): model seconds, the instance types, an estimated cost."""

    queue_seconds: float | None = None
    image_seconds: float | None = None
    video_seconds: float | None = None
    instance_types: dict[str, list[str]] = msgspec.field(default_factory=dict)
    estimated_cost_usd: float | None = None  # null: an instance type that served it has no price in the table
    unpriced_instance_types: list[str] = msgspec.field(default_factory=list)
    prices_as_of: str | None = None
    estimate: bool = True


class JobEvent(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The terminal event (title "omnireel job event" in its schema). Field descriptions: the schema."""

    version: Literal[1] = EVENT_VERSION
    event_id: str  # stable per job record and type: consumers can de-duplicate on it
    event_type: TerminalEventType
    occurred_at: str  # when the job reached its terminal status (the same in every delivery)
    job_id: str
    status: TerminalStatus
    prompt: str | None  # null when the submitted file could not be read as a request
    request: JobRequest | None
    source: str  # api, or s3://<inbox bucket>/<key> for a dropped file
    source_version: SourceVersion | None = None  # for a dropped file: the object version this job read
    artifacts: EventArtifacts
    timings: EventTimings
    error: JobError | None = None
    batch: BatchRef | None = None  # for a job of a batch: the batch id and the job's line
    usage: EventUsage | None = None  # issue 34 item 8: null for records written before it


class ImageArtifacts(msgspec.Struct, kw_only=True):
    image: ArtifactLink


class ImageReadyEvent(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Progress: the still is stored, while the video is still to come (``job.image_ready``, version 1)."""

    version: Literal[1] = EVENT_VERSION
    event_id: str  # stable per job record: consumers can de-duplicate on it
    event_type: Literal["job.image_ready"] = "job.image_ready"
    occurred_at: str  # when the image was stored (the same in every delivery)
    job_id: str
    status: str  # the job's status when the image was stored (generating_image)
    prompt: str | None
    request: JobRequest | None
    source: str  # api, or s3://<inbox bucket>/<key> for a dropped file
    source_version: SourceVersion | None = None
    artifacts: ImageArtifacts  # the still: S3 URI and a presigned URL


def build_image_ready_event(job: Job, image: ArtifactLink, stored_at: str) -> ImageReadyEvent:
    return ImageReadyEvent(
        event_id=job_id_for(f"{job.execution}/job.image_ready"),
        occurred_at=stored_at,
        job_id=job.job_id,
        status=JobStatus.GENERATING_IMAGE.value,  # when the image was stored (published once the render is queued)
        prompt=job.request.prompt if job.request else None,
        request=job.request,
        source=job.source,
        source_version=job.source_version,
        artifacts=ImageArtifacts(image=image),
    )


def event_type_for(status: JobStatus) -> TerminalEventType:
    if status is JobStatus.SUCCEEDED:
        return "job.succeeded"
    if status is JobStatus.FAILED:
        return "job.failed"
    if status is JobStatus.CANCELLED:
        return "job.cancelled"
    if status is JobStatus.EXPIRED:
        return "job.expired"
    raise ValueError(f"no event for non-terminal status {status}")


class QueuePosition(msgspec.Struct, kw_only=True):
    """Where a waiting job stands (``omnireel.admission``): the endpoint kind it waits for, how many of its caller's
    own jobs are ahead of it, and how many callers have waiting work."""

    kind: Literal["image", "video"]
    position: int
    callers: int
    enqueued_at: str


class QueuedEvent(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Progress: the job waits for a slot on a model endpoint (``job.queued``, version 1). Sent only when a job waits,
    once per job record."""

    version: Literal[1] = EVENT_VERSION
    event_id: str  # stable per job record: consumers can de-duplicate on it
    event_type: Literal["job.queued"] = "job.queued"
    occurred_at: str  # when the job started waiting
    job_id: str
    status: str  # queued
    prompt: str | None
    request: JobRequest | None
    source: str
    source_version: SourceVersion | None = None
    queue: QueuePosition
    batch: BatchRef | None = None


def build_queued_event(job: Job, queue: QueuePosition) -> QueuedEvent:
    return QueuedEvent(
        event_id=job_id_for(f"{job.execution}/job.queued"),
        occurred_at=queue.enqueued_at,
        job_id=job.job_id,
        status=JobStatus.QUEUED.value,
        prompt=job.request.prompt if job.request else None,
        request=job.request,
        source=job.source,
        source_version=job.source_version,
        queue=queue,
        batch=job.batch,
    )


def build_job_event(job: Job, artifacts: EventArtifacts, built_at: datetime) -> JobEvent:
    """The job's terminal event. Rebuilt on a retry, it is the same event: same id, same ``occurred_at`` (the
    terminal transition's time); only the presigned URLs are fresh."""
    event_type = event_type_for(job.status)
    occurred_at = job.stage_times.get(job.status.value) or iso(built_at)
    return JobEvent(
        # Per record (its execution name), not per job id: a record made again after TTL gets events of its own.
        event_id=job_id_for(f"{job.execution}/{event_type}"),
        event_type=event_type,
        occurred_at=occurred_at,
        job_id=job.job_id,
        status=cast(TerminalStatus, job.status.value),  # a non-terminal status fails validation
        prompt=job.request.prompt if job.request else None,
        request=job.request,
        source=job.source,
        source_version=job.source_version,
        artifacts=artifacts,
        timings=EventTimings(**job.timings()),
        error=job.error,
        batch=job.batch,
        usage=msgspec.convert(view, EventUsage) if (view := usage_view(job.usage)) else None,
    )


def sns_message_attributes(event: JobEvent | ImageReadyEvent | QueuedEvent | BatchEvent) -> dict[str, dict[str, str]]:
    attributes = {
        "event_type": {"DataType": "String", "StringValue": event.event_type},
        "status": {"DataType": "String", "StringValue": event.status},
        "version": {"DataType": "Number", "StringValue": str(event.version)},
    }
    batch_id = event.batch.batch_id if isinstance(event, JobEvent) and event.batch else getattr(event, "batch_id", None)
    if batch_id:  # the batch tracker's subscription filters on it
        attributes["batch_id"] = {"DataType": "String", "StringValue": batch_id}
    # The webhook queue's subscription filters on this attribute (omnireel.webhooks.dispatch): only the event types the
    # job's request asked for reach its webhook.
    request = getattr(event, "request", None)
    if request is not None and request.webhook_wants(event.event_type):
        attributes["webhook"] = {"DataType": "String", "StringValue": request.webhook or ""}
    elif batch_webhook := getattr(event, "webhook_url", None):  # batch.completed of a batch that named a webhook
        attributes["webhook"] = {"DataType": "String", "StringValue": batch_webhook}
    return attributes


# The progress events (job.image_ready, job.queued): read from the structs themselves, so a new one is counted here.
PROGRESS_EVENT_TYPES: frozenset[str] = frozenset(
    field.default
    for struct in (ImageReadyEvent, QueuedEvent)
    for field in msgspec.structs.fields(struct)
    if field.name == "event_type"
)
