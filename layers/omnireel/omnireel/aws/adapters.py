"""The adapters a function builds at cold start, from its settings: one place that knows which setting configures which
adapter (the handlers in ``functions/`` call these instead of repeating the constructors; no handler constructs an
adapter or a client itself: tests/unit/architecture/test_handlers_only_wire.py).

Each factory imports its adapter when called, so a function loads only the adapters it builds (cold start:
``bench/cold_start.py``). ``settings`` is any object with the fields a factory reads (``omnireel.runtime.settings``'
classes have them; a Protocol states which), so the adapters layer does not depend on the runtime's settings module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from omnireel.aws.admission_store import AdmissionMetrics, AdmissionStore, EndpointInstances
    from omnireel.aws.artifact_store import ArtifactStore
    from omnireel.aws.batch_queue import BatchQueue, DeadLetters
    from omnireel.aws.batch_store import BatchStore
    from omnireel.aws.batch_uploads import BatchUploads
    from omnireel.aws.event_publisher import EventPublisher
    from omnireel.aws.image_endpoint import ImageEndpoint
    from omnireel.aws.inbox_retry import InboxRetryQueue
    from omnireel.aws.inbox_store import InboxStore
    from omnireel.aws.job_store import JobStore
    from omnireel.aws.record_owners import PublishedEvents, RecordOwners
    from omnireel.aws.secrets import WebhookMasterKey
    from omnireel.aws.usage_store import UsageStore
    from omnireel.aws.video_endpoint import VideoEndpoint
    from omnireel.aws.webhook_queue import WebhookQueue
    from omnireel.aws.workflow import TaskCallbacks, Workflow


class _Jobs(Protocol):
    @property
    def jobs_table(self) -> str: ...
    @property
    def job_ttl_days(self) -> int: ...


class _Artifacts(Protocol):
    @property
    def artifacts_bucket(self) -> str: ...


class _Events(Protocol):
    @property
    def job_events_topic_arn(self) -> str: ...
    @property
    def event_bus_name(self) -> str: ...


class _Workflow(Protocol):
    @property
    def state_machine_arn(self) -> str: ...


class _Batches(Protocol):
    @property
    def batches_table(self) -> str | None: ...
    @property
    def job_ttl_days(self) -> int: ...


class _BatchQueue(Protocol):
    @property
    def batch_queue_url(self) -> str | None: ...


class _WebhookKey(Protocol):
    @property
    def webhook_secret_arn(self) -> str: ...
    @property
    def webhook_key_cache_seconds(self) -> float: ...
    @property
    def webhook_pickup_margin_seconds(self) -> float: ...


def _required(value: str | None, variable: str) -> str:
    if not value:  # a wiring mistake in the template, caught at cold start rather than on the first batch
        raise ValueError(f"{variable} is not set: this function is not wired to the batches")
    return value


def job_store(settings: _Jobs) -> JobStore:
    from omnireel.aws.job_store import JobStore

    # Accounting (omnireel.usage.limits): with a usage table, jobs count against their caller's CallerMaxPendingJobs.
    usage_table = getattr(settings, "usage_table", None)
    return JobStore(
        settings.jobs_table,
        settings.job_ttl_days,
        usage_table=usage_table,
        max_pending=getattr(settings, "caller_max_pending_jobs", 0) if usage_table else 0,
    )


def artifact_store(settings: _Artifacts) -> ArtifactStore:
    from omnireel.aws.artifact_store import ArtifactStore

    return ArtifactStore(settings.artifacts_bucket)


def event_publisher(settings: _Events, *, eager: bool = False) -> EventPublisher:
    """``eager``: the function publishes on (nearly) every call, so its clients are created at cold start."""
    from omnireel.aws.event_publisher import EventPublisher

    # Events bound for a webhook are recorded on their job's or batch's record first (omnireel.events.published).
    return EventPublisher(
        settings.job_events_topic_arn,
        settings.event_bus_name,
        eager=eager,
        jobs_table=getattr(settings, "jobs_table", None),
        batches_table=getattr(settings, "batches_table", None),
    )


def workflow(settings: _Workflow) -> Workflow:
    from omnireel.aws.workflow import Workflow

    return Workflow(settings.state_machine_arn)


def batch_store(settings: _Batches, *, eager: bool = False) -> BatchStore:
    from omnireel.aws.batch_store import BatchStore

    return BatchStore(_required(settings.batches_table, "BATCHES_TABLE"), settings.job_ttl_days, eager=eager)


def batch_queue(settings: _BatchQueue, *, eager: bool = False) -> BatchQueue:
    from omnireel.aws.batch_queue import BatchQueue

    return BatchQueue(_required(settings.batch_queue_url, "BATCH_QUEUE_URL"), eager=eager)


class _Admission(Protocol):
    @property
    def admission_table(self) -> str | None: ...


def admission_store(settings: _Admission) -> AdmissionStore:
    from omnireel.aws.admission_store import AdmissionStore

    if not settings.admission_table:  # a wiring mistake, caught at cold start
        raise ValueError("ADMISSION_TABLE is not set: this function is not wired to admission")
    return AdmissionStore(settings.admission_table)


def webhook_master_key(settings: _WebhookKey) -> WebhookMasterKey:
    from omnireel.aws.secrets import WebhookMasterKey

    return WebhookMasterKey(
        settings.webhook_secret_arn,
        ttl_s=settings.webhook_key_cache_seconds,
        margin_s=settings.webhook_pickup_margin_seconds,
    )


def usage_store(settings: object) -> UsageStore | None:
    """The usage table's reads (pending counts, days), or None when this stack does not count (no USAGE_TABLE)."""
    table = getattr(settings, "usage_table", None)
    if not table:
        return None
    from omnireel.aws.usage_store import UsageStore

    return UsageStore(table)


def task_callbacks() -> TaskCallbacks:
    """Answers to the state machine's waiting tasks (SendTaskSuccess / Failure / Heartbeat)."""
    from omnireel.aws.workflow import TaskCallbacks

    return TaskCallbacks()


class _ImageEndpoint(Protocol):
    @property
    def image_endpoint_name(self) -> str: ...


class _VideoEndpoint(Protocol):
    @property
    def video_endpoint_name(self) -> str: ...


def image_endpoint(settings: _ImageEndpoint) -> ImageEndpoint:
    from omnireel.aws.image_endpoint import ImageEndpoint

    return ImageEndpoint(settings.image_endpoint_name)


def video_endpoint(settings: _VideoEndpoint) -> VideoEndpoint:
    from omnireel.aws.video_endpoint import VideoEndpoint

    return VideoEndpoint(settings.video_endpoint_name)


def endpoint_instances() -> EndpointInstances:
    """The endpoints' instances in service (DescribeEndpoint): admission's capacity."""
    from omnireel.aws.admission_store import EndpointInstances

    return EndpointInstances()


def admission_metrics() -> AdmissionMetrics:
    """The queue's depth and the slots in use, per endpoint (``omnireel/Admission``)."""
    from omnireel.aws.admission_store import AdmissionMetrics

    return AdmissionMetrics()


def inbox_store() -> InboxStore:
    """The inbox bucket's dropped files, read at the exact version an event names (any bucket: the event says which)."""
    from omnireel.aws.inbox_store import InboxStore

    return InboxStore()


def batch_uploads(settings: _Batches) -> BatchUploads:
    """POST /batches/uploads' reservations (in the batches table) and their presigned PUTs to the inbox bucket
    (``INBOX_BUCKET``, where the function has it: the inbox only reads reservations)."""
    from omnireel.aws.batch_uploads import BatchUploads

    table = _required(settings.batches_table, "BATCHES_TABLE")
    return BatchUploads(table, getattr(settings, "inbox_bucket", None), settings.job_ttl_days)


class _InboxRetry(Protocol):
    @property
    def inbox_retry_queue_url(self) -> str | None: ...


def inbox_retry_queue(settings: _InboxRetry) -> InboxRetryQueue:
    from omnireel.aws.inbox_retry import InboxRetryQueue

    if not settings.inbox_retry_queue_url:  # a wiring mistake, caught at cold start
        raise ValueError("INBOX_RETRY_QUEUE_URL is not set: this function is not wired to the inbox retry queue")
    return InboxRetryQueue(settings.inbox_retry_queue_url)


class _DeadLetters(Protocol):
    @property
    def batch_dead_letter_queue_url(self) -> str | None: ...


def dead_letters(settings: _DeadLetters) -> DeadLetters:
    from omnireel.aws.batch_queue import DeadLetters

    if not settings.batch_dead_letter_queue_url:  # a wiring mistake, caught at cold start
        raise ValueError("BATCH_DEAD_LETTER_QUEUE_URL is not set: this function is not wired to the dead letters")
    return DeadLetters(settings.batch_dead_letter_queue_url)


class _Records(Protocol):
    @property
    def jobs_table(self) -> str: ...
    @property
    def batches_table(self) -> str | None: ...


def record_owners(settings: _Records) -> RecordOwners:
    """Who owns a job or a batch (its owner's secret signs the webhook deliveries)."""
    from omnireel.aws.record_owners import RecordOwners

    return RecordOwners(settings.jobs_table, settings.batches_table)


def published_events(settings: _Records) -> PublishedEvents:
    """The events the stack published and where each may be delivered, read from the records (issue 33 item 1)."""
    from omnireel.aws.record_owners import PublishedEvents

    return PublishedEvents(settings.jobs_table, settings.batches_table)


class _WebhookQueue(Protocol):
    @property
    def webhook_queue_url(self) -> str: ...


def webhook_queue(settings: _WebhookQueue) -> WebhookQueue:
    """The webhook queue's retries: a failed attempt's record comes back after its backoff."""
    from omnireel.aws.webhook_queue import WebhookQueue

    return WebhookQueue(settings.webhook_queue_url)
