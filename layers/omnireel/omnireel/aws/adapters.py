"""The adapters a function builds at cold start, from its settings: one place that knows which setting configures which
adapter (the handlers in ``functions/`` call these instead of repeating the constructors).

Each factory imports its adapter when called, so a function loads only the adapters it builds (cold start:
``bench/cold_start.py``). ``settings`` is any object with the fields a factory reads (``omnireel.runtime.settings``'
classes have them; a Protocol states which), so the adapters layer does not depend on the runtime's settings module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from omnireel.aws.admission_store import AdmissionStore
    from omnireel.aws.artifact_store import ArtifactStore
    from omnireel.aws.batch_queue import BatchQueue
    from omnireel.aws.batch_store import BatchStore
    from omnireel.aws.event_publisher import EventPublisher
    from omnireel.aws.job_store import JobStore
    from omnireel.aws.secrets import WebhookMasterKey
    from omnireel.aws.usage_store import UsageStore
    from omnireel.aws.workflow import Workflow


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

    return WebhookMasterKey(settings.webhook_secret_arn, ttl_s=settings.webhook_key_cache_seconds)


def usage_store(settings: object) -> UsageStore | None:
    """The usage table's reads (pending counts, days), or None when this stack does not count (no USAGE_TABLE)."""
    table = getattr(settings, "usage_table", None)
    if not table:
        return None
    from omnireel.aws.usage_store import UsageStore

    return UsageStore(table)
