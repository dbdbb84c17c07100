"""What the API answers, as typed values: jobs, their stages, artifacts and errors; batches; webhook secrets and events.

``JobState`` / ``BatchState`` hold the fields and are shared by the blocking ``Job`` / ``Batch`` (``client.py``) and the
asyncio ``AsyncJob`` / ``AsyncBatch`` (``aio.py``), which add the calls.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

TERMINAL = ("succeeded", "failed", "cancelled", "expired")  # expired: never admitted within max_queue_seconds
# The stages a job passes through, in order (GET /jobs/{id} ``status``; ``stage_times`` has one entry per stage).
STAGES = ("accepted", "generating_image", "staging_video", "rendering_video")


def parse_time(value: str | None) -> datetime | None:
    """An API timestamp (ISO 8601, UTC, ``Z`` or ``+00:00``) as an aware datetime."""
    if not value:
        return None
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))  # 3.10's fromisoformat does not read "Z"
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


@dataclass(frozen=True)
class Artifact:
    """A job's file: where it lives, a presigned HTTPS URL, and when that URL stops working."""

    name: str
    s3_uri: str
    url: str
    expires_at: datetime | None

    @property
    def expired(self) -> bool:
        return self.expires_at is not None and datetime.now(timezone.utc) >= self.expires_at

    @classmethod
    def from_api(cls, name: str, data: dict[str, Any]) -> Artifact:
        return cls(name, str(data.get("s3_uri", "")), str(data.get("url", "")), parse_time(data.get("expires_at")))


@dataclass(frozen=True)
class JobError:
    """Why a job failed (or was cancelled): the stage, a stable code and a message."""

    stage: str | None
    code: str
    message: str

    @classmethod
    def from_api(cls, data: dict[str, Any] | None) -> JobError | None:
        if not data:
            return None
        return cls(data.get("stage"), str(data.get("code", "")), str(data.get("message", "")))


@dataclass
class JobState:
    """A job as ``GET /jobs/{id}`` shows it."""

    job_id: str
    status: str
    created_at: datetime | None = None
    updated_at: datetime | None = None
    source: str | None = None
    request: dict[str, Any] | None = None
    stage_times: dict[str, datetime] = field(default_factory=dict)
    timings: dict[str, float | None] = field(default_factory=dict)
    artifacts: dict[str, Artifact] = field(default_factory=dict)
    error: JobError | None = None
    webhook: dict[str, Any] | None = None
    # while the job waits for a GPU slot: {kind, position (its caller's own jobs ahead), callers, enqueued_at}
    queue: dict[str, Any] | None = None
    event_published_at: datetime | None = None  # when the terminal event went out (None until then)
    idempotency_key: str | None = None  # the key ``submit`` sent (kept for a retry by the app itself)
    cancellation: Cancellation | None = None  # what ``cancel`` stopped (None until this client cancelled it)
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)  # the API's last answer, as sent

    @property
    def done(self) -> bool:
        """Ended, and its terminal event is out (what ``wait`` waits for). The status turns terminal a moment before
        the event is published and recorded; an API that does not report ``event_published_at`` (one from before the
        field) is taken at its status."""
        if self.status not in TERMINAL:
            return False
        return "event_published_at" not in self.raw or self.event_published_at is not None

    @property
    def succeeded(self) -> bool:
        return self.status == "succeeded"

    @property
    def image(self) -> Artifact | None:
        return self.artifacts.get("image")

    @property
    def video(self) -> Artifact | None:
        return self.artifacts.get("video")

    def _update(self, data: dict[str, Any]) -> None:
        self.raw = data
        self.status = str(data.get("status", self.status))
        self.created_at = parse_time(data.get("created_at")) or self.created_at
        self.updated_at = parse_time(data.get("updated_at")) or self.updated_at
        self.source = data.get("source", self.source)
        self.request = data.get("request", self.request)
        times = {k: parse_time(v) for k, v in (data.get("stage_times") or {}).items()}
        self.stage_times = {k: v for k, v in times.items() if v is not None} or self.stage_times
        self.timings = dict(data.get("timings") or self.timings)
        links = data.get("artifacts") or {}
        self.artifacts = {name: Artifact.from_api(name, link) for name, link in links.items()} or self.artifacts
        self.error = JobError.from_api(data.get("error")) or self.error
        self.webhook = data.get("webhook", self.webhook)
        self.queue = data.get("queue")
        self.event_published_at = parse_time(data.get("event_published_at"))


@dataclass(frozen=True)
class Cancellation:
    """The answer to ``DELETE /jobs/{id}``: the stage the job was cancelled at, whether a video render that was
    already queued may still run (its result is then discarded), and the API's note. ``already`` : the job had been
    cancelled before (e.g. this client's own retry after a lost answer)."""

    cancelled_at_stage: str | None
    video_render_may_run: bool
    note: str
    already: bool = False

    @classmethod
    def from_api(cls, data: dict[str, Any] | None) -> Cancellation:
        if data is None:
            return cls(None, False, "the job had already been cancelled", already=True)
        return cls(data.get("cancelled_at_stage"), bool(data.get("video_render_may_run")), str(data.get("note", "")))


@dataclass(frozen=True)
class JobSummary:
    """One entry of ``GET /jobs`` (``Client.jobs``); ``client.job(summary.job_id)`` reads the whole job."""

    job_id: str
    status: str
    created_at: datetime | None
    updated_at: datetime | None
    prompt: str | None

    @classmethod
    def from_api(cls, data: dict[str, Any]) -> JobSummary:
        return cls(
            str(data["job_id"]), str(data.get("status", "")), parse_time(data.get("created_at")),
            parse_time(data.get("updated_at")), data.get("prompt"),
        )  # fmt: skip


@dataclass(frozen=True)
class JobPage:
    """One page of ``GET /jobs``; ``next_cursor`` asks for the next one (None: this was the last)."""

    jobs: tuple[JobSummary, ...]
    next_cursor: str | None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class BatchCounts:
    total: int = 0
    accepted: int = 0  # lines that became running jobs
    rejected: int = 0  # lines that failed validation (each is a failed job)
    succeeded: int = 0
    failed: int = 0  # rejected lines included
    cancelled: int = 0

    @property
    def done(self) -> int:
        return self.succeeded + self.failed + self.cancelled


@dataclass
class BatchState:
    """A batch as ``GET /batches/{id}`` shows it."""

    batch_id: str
    status: str
    source: str | None = None
    counts: BatchCounts = field(default_factory=BatchCounts)
    created_at: datetime | None = None
    completed_at: datetime | None = None
    manifest: Artifact | None = None
    # the batch's webhook and where its batch.completed delivery stands: {url, events, deliveries} (as JobState.webhook)
    webhook: dict[str, Any] | None = None
    idempotency_key: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)  # the API's last answer, as sent

    @property
    def done(self) -> bool:
        return self.status == "completed"

    def _update(self, data: dict[str, Any]) -> None:
        self.raw = data
        self.status = str(data.get("status", self.status))
        self.source = data.get("source", self.source)
        counts = data.get("counts")
        if isinstance(counts, dict):
            self.counts = BatchCounts(**{k: int(v) for k, v in counts.items() if k in BatchCounts.__dataclass_fields__})
        elif "total" in data:
            self.counts = BatchCounts(total=int(data["total"]))
        self.created_at = parse_time(data.get("created_at")) or self.created_at
        self.completed_at = parse_time(data.get("completed_at")) or self.completed_at
        if data.get("manifest"):
            self.manifest = Artifact.from_api("manifest", data["manifest"])
        self.webhook = data.get("webhook", self.webhook)


@dataclass(frozen=True)
class WebhookSecret:
    """``GET /webhooks/secret``: the caller's own ``whsec_`` secret; during a rotation also the previous one, which
    keeps signing (a second signature) until ``previous_until``, and is trusted until then only."""

    secret: str
    previous_secret: str | None = None
    previous_until: datetime | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def secrets(self) -> tuple[str, ...]:
        """Every secret a receiver should accept now (read at each verification, not when the secret was fetched):
        the previous secret only before its ``previous_until`` (never without one)."""
        return self.secrets_at(datetime.now(timezone.utc))

    def secrets_at(self, when: datetime) -> tuple[str, ...]:
        """Every secret a receiver should accept at ``when`` (an aware datetime)."""
        grace = self.previous_secret and self.previous_until is not None and when < self.previous_until
        return (self.secret,) + ((self.previous_secret,) if grace and self.previous_secret else ())


@dataclass(frozen=True)
class WebhookEvent:
    """A verified delivery: ``id`` (``webhook-id``: de-duplicate on it), ``type`` (``job.succeeded``, ...), the
    signed ``timestamp`` and the event itself (``data``: the job event as ``omnireel events`` prints it)."""

    id: str
    type: str
    timestamp: datetime
    data: dict[str, Any]

    @property
    def job_id(self) -> str | None:
        return self.data.get("job_id")

    @property
    def batch_id(self) -> str | None:
        return self.data.get("batch_id")

    @property
    def artifacts(self) -> dict[str, Artifact]:
        return {name: Artifact.from_api(name, link) for name, link in (self.data.get("artifacts") or {}).items()}
