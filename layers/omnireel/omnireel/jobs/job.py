"""The job record and its lifecycle rules (pure: no AWS here).

accepted [-> queued] -> generating_image -> staging_video -> rendering_video -> succeeded | failed | cancelled
accepted | queued -> expired (not admitted within the request's max_queue_seconds: nothing rendered, nothing billed)

``queued`` is entered only when a job waits for its first slot (``omnireel.admission``); a job admitted at once goes
from ``accepted`` to ``generating_image``. A stage may be entered again (a retried Lambda re-enters its own stage) but
never from a later stage, so a duplicate or stale step cannot move a job backwards. ``failed`` can be reached from any
non-terminal state; terminal states are final.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from enum import StrEnum
from typing import Annotated

import msgspec
from msgspec.structs import force_setattr

from omnireel.core.bounded import bounded
from omnireel.core.clock import parse_time
from omnireel.core.s3uri import SourceVersion
from omnireel.jobs.request import JobRequest
from omnireel.usage.metering import Metering, UsageRecord


class JobStatus(StrEnum):
    ACCEPTED = "accepted"
    QUEUED = "queued"  # waiting for a slot on the image endpoint (issue 34)
    GENERATING_IMAGE = "generating_image"
    STAGING_VIDEO = "staging_video"
    RENDERING_VIDEO = "rendering_video"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    EXPIRED = "expired"  # never admitted within max_queue_seconds: no model was called

    @property
    def terminal(self) -> bool:
        return self in TERMINAL_STATUSES


TERMINAL_STATUSES = (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED, JobStatus.EXPIRED)

ORDER = [
    JobStatus.ACCEPTED,
    JobStatus.QUEUED,
    JobStatus.GENERATING_IMAGE,
    JobStatus.STAGING_VIDEO,
    JobStatus.RENDERING_VIDEO,
    JobStatus.SUCCEEDED,
]

# Stage name used in error reports, keyed by the status the job was in when it failed.
STAGE_OF_STATUS = {
    JobStatus.ACCEPTED: "accept",
    JobStatus.QUEUED: "queue",
    JobStatus.GENERATING_IMAGE: "generate_image",
    JobStatus.STAGING_VIDEO: "stage_video_request",
    JobStatus.RENDERING_VIDEO: "render_video",
}


def allowed_sources(target: JobStatus) -> list[JobStatus]:
    """Statuses from which ``target`` may be entered (including itself, for retries)."""
    if target in (JobStatus.FAILED, JobStatus.CANCELLED):
        return [s for s in ORDER if not s.terminal]
    if target is JobStatus.SUCCEEDED:
        return [JobStatus.RENDERING_VIDEO]
    if target is JobStatus.EXPIRED:  # only a job that was never admitted
        return [JobStatus.ACCEPTED, JobStatus.QUEUED]
    index = ORDER.index(target)
    sources: list[JobStatus] = [target]
    while index > 0:  # the previous stage, and the one before an optional stage (queued: only when a job waits)
        index -= 1
        sources.insert(0, ORDER[index])
        if ORDER[index] not in OPTIONAL_STATUSES:
            break
    return sources


OPTIONAL_STATUSES = (JobStatus.QUEUED,)


class JobError(msgspec.Struct, frozen=True, kw_only=True):
    stage: str
    code: str
    message: str

    def __post_init__(self) -> None:
        # Failure reasons may quote caller input (a field name, a file name) or a model's error text: the job
        # record, GET /jobs/{id} and the job.failed event carry at most MAX_MESSAGE_CHARS of it.
        force_setattr(self, "code", bounded(self.code, 128))
        force_setattr(self, "message", bounded(self.message, 1024))


class Artifacts(msgspec.Struct, kw_only=True):
    """S3 URIs of what the job produced so far."""

    image: str | None = None
    video_request: str | None = None
    video: str | None = None


# Where a job's artifacts are written in the artifacts bucket.
def job_prefix(job_id: str) -> str:
    return f"jobs/{job_id}/"


def image_key(job_id: str) -> str:
    return f"{job_prefix(job_id)}image.png"


def video_request_key(job_id: str) -> str:
    return f"{job_prefix(job_id)}video-request.multipart"


def video_key(job_id: str) -> str:
    return f"{job_prefix(job_id)}video.mp4"


class AsyncInvocation(msgspec.Struct, kw_only=True):
    """What SageMaker said when it accepted the async video request."""

    inference_id: str
    output_location: str
    failure_location: str | None = None


class WebhookDelivery(msgspec.Struct, kw_only=True):
    """Where the delivery of one event type to the job's webhook stands (written by the delivery function)."""

    attempts: int  # attempts so far (SQS receives of the event)
    # how the last attempt ended: delivered | rejected | unreachable | refused | not_signed (webhooks.delivery.Outcome);
    # null on records written before issue 33
    outcome: str | None = None
    last_status: int | None = None  # the consumer's last HTTP status (null: no answer)
    last_error: str | None = None  # why the last attempt failed, one coarse sentence per outcome (null when delivered)
    last_attempt_at: str
    delivered_at: str | None = None  # when the consumer answered 2xx
    refused: bool = False  # the target was refused at delivery (SSRF checks): no retry


class BatchRef(msgspec.Struct, frozen=True, kw_only=True):
    """The batch a job belongs to and its line (1-based as in the JSONL file; POST /batches: the array index + 1)."""

    batch_id: str
    line: Annotated[int, msgspec.Meta(ge=1)]


class Job(msgspec.Struct, kw_only=True):
    """One item of the jobs table (``job_id`` is the partition key). Attributes the struct does not name (the task
    token, ``request_json``) are ignored when an item is read (``omnireel.aws.job_store``)."""

    job_id: str
    status: JobStatus
    request: JobRequest | None  # null for a submission that could not be read as a request
    source: str  # api | s3://<bucket>/<key>
    source_version: SourceVersion | None = None  # for a dropped file: the object version that was read
    owner: str | None = None  # the API caller's scope (omnireel.core.caller: a unique id), which keys access
    owner_arn: str | None = None  # that caller's ARN when it submitted, for people reading the record; never a key
    batch: BatchRef | None = None  # the batch and line this job came from (batches only)
    request_fingerprint: str | None = None
    created_at: str
    updated_at: str
    stage_times: dict[str, str] = msgspec.field(default_factory=dict)  # status -> ISO time first entered
    artifacts: Artifacts = msgspec.field(default_factory=Artifacts)
    async_invocation: AsyncInvocation | None = None
    error: JobError | None = None
    event_published_at: str | None = None
    expires_at: int | None = None
    execution_name: str | None = None  # this record's Step Functions execution (None: written before names were unique)
    open_shard: str | None = None  # set while the job is not terminal: the key of the jobs table's open-jobs index
    image_ready_published_at: str | None = None  # when job.image_ready was published
    webhook_deliveries: dict[str, WebhookDelivery] = msgspec.field(default_factory=dict)  # event type -> state
    # admission (omnireel.admission): when the job started waiting for a slot of each endpoint kind, and the key of its
    # waiting entry while it waits (both set only when it had to wait)
    queued_image_at: str | None = None
    queued_video_at: str | None = None
    waiting_entry: str | None = None
    queued_published_at: str | None = None  # when job.queued was published
    # accounting (omnireel.usage): the caller this job counts against while it is not terminal (removed with the -1 of
    # its terminal transition); what its stages measured; its usage once it ended
    counted_as: str | None = None
    metering: Metering | None = None
    usage: UsageRecord | None = None

    @property
    def execution(self) -> str:
        """The name of this record's execution (records written before unique names used the bare job id)."""
        return self.execution_name or self.job_id

    def timings(self) -> dict[str, float | None]:
        """Seconds spent per stage, as published in job events."""
        times = {k: parse_time(v) for k, v in self.stage_times.items()}

        def span(start: JobStatus, end: str) -> float | None:
            a, b = times.get(start.value), times.get(end)
            return round((b - a).total_seconds(), 3) if a and b else None

        finished = next((s.value for s in TERMINAL_STATUSES if s.value in times), JobStatus.FAILED.value)
        return {
            "image_s": span(JobStatus.GENERATING_IMAGE, JobStatus.STAGING_VIDEO.value),
            "staging_s": span(JobStatus.STAGING_VIDEO, JobStatus.RENDERING_VIDEO.value),
            "video_queue_and_render_s": span(JobStatus.RENDERING_VIDEO, JobStatus.SUCCEEDED.value),
            "total_s": span(JobStatus.ACCEPTED, finished),
        }


def new_execution_name(job_id: str) -> str:
    """A Step Functions execution name unique to one incarnation of the job record.

    AWS keeps an execution name taken for 90 days after the execution closes, longer than the record lives
    (``JobTtlDays``). A record made again for the same job id (the same Idempotency-Key after TTL deleted the old
    record) must start a *new* execution, so the name carries a random suffix; the record stores it, which keeps a
    replay of the same incarnation (a crash between the record write and StartExecution) on the same name.
    49 characters of [0-9a-f-]: within AWS's 80 and safe for CloudWatch Logs.
    """
    return f"{job_id}-{uuid.uuid4().hex[:12]}"


def job_id_of_execution(name: str) -> str:
    """The job id an execution name belongs to (the name starts with it; see ``new_execution_name``)."""
    return name[:36]


def open_shard_for(job_id: str) -> str:
    """Partition of the open-jobs index: the job id's first hex digit, so no single index key takes every write."""
    return job_id[0]


OPEN_SHARDS = "0123456789abcdef"


# Fields added to the request after records were first written: left out of the fingerprint while unset, so a retry
# of a request made before they existed (same Idempotency-Key, same body) still matches its record.
_LATER_FIELDS: dict[str, tuple[str, ...]] = {
    "": ("webhook", "webhook_events", "max_queue_seconds"),
    "video": ("prompt", "negative_prompt"),
}


def fingerprint(request: JobRequest) -> str:
    data = msgspec.to_builtins(request)
    for section, names in _LATER_FIELDS.items():
        target = data[section] if section else data
        for name in names:
            if target.get(name) is None:
                target.pop(name, None)
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()
