"""The job event types, defined once: which end a job, which a webhook may ask for, which it gets by default.

Every list of them is derived from the two ``Literal`` types below: the request's ``webhook_events`` check and its
bound (``len(WEBHOOK_EVENT_TYPES)``), the default, and the events' own ``event_type`` fields. docs/openapi.yaml's
``webhook_events`` (enum, maxItems) is checked against them (tests/unit/jobs/test_openapi.py).
"""

from __future__ import annotations

from typing import Literal, get_args

# The event types that end a job: exactly one per job. Every other job event (job.image_ready, job.queued) reports
# progress; a consumer waiting for a job's outcome waits for one of these, never for "anything but image_ready".
TerminalEventType = Literal["job.succeeded", "job.failed", "job.cancelled", "job.expired"]
TERMINAL_EVENT_TYPES: frozenset[str] = frozenset(get_args(TerminalEventType))

# Events a webhook may ask for; without ``webhook_events`` a webhook receives the terminal ones. Issue 34 added
# ``job.queued`` (progress: the job waits for a slot) and ``job.expired`` (terminal: never admitted within its
# max_queue_seconds). A request that lists its events gets only those: a list without job.expired does not hear of a
# job that never started (GET /jobs/{id} and the job-events topic still say it).
WebhookEventType = Literal["job.queued", "job.image_ready", TerminalEventType]
WEBHOOK_EVENT_TYPES: tuple[str, ...] = get_args(WebhookEventType)
DEFAULT_WEBHOOK_EVENTS: tuple[str, ...] = get_args(TerminalEventType)
