"""The batch record: one per batch (many job requests in one submission), and how its counters count a job's end.

The batches table holds it (``omnireel.aws.batch_store``: the item ``batch`` of the batch's partition); the line
items and the in-flight counter are the store's own.
"""

from __future__ import annotations

import msgspec

from omnireel.core.s3uri import SourceVersion
from omnireel.events.batch_events import BatchCounts, BatchTruncation
from omnireel.jobs.job import WebhookDelivery

# The counters a terminal job adds to (``Batch.succeeded`` ...): each line is counted once, as one of them.
TERMINAL_COUNTERS = {"succeeded", "failed", "cancelled"}
# A line whose job expired (never admitted within its max_queue_seconds, issue 34) counts as failed: its error says why.
COUNTED_AS = {"expired": "failed"}


class Batch(msgspec.Struct, kw_only=True):
    batch_id: str
    source: str
    source_version: SourceVersion | None = None
    owner: str | None = None  # the API caller's scope (omnireel.core.caller), which keys access
    owner_arn: str | None = None  # that caller's ARN at POST /batches, for people reading the record; never a key
    natural_key: str
    fingerprint: str | None = None
    webhook: str | None = None  # POST /batches: where batch.completed is delivered
    created_at: str
    updated_at: str
    total: int
    accepted: int = 0
    rejected: int = 0
    succeeded: int = 0
    failed: int = 0
    cancelled: int = 0
    terminal: int = 0
    size: int | None = None  # bytes of the dropped file (the splitter's end)
    split_offset: int = 0
    split_line: int = 0
    split_done: bool = False
    emitted: int = 0  # job lines the splitter has queued (checkpointed with its cursor)
    truncated: BatchTruncation | None = None
    completed_at: str | None = None
    manifest_uri: str | None = None
    event_published_at: str | None = None
    expires_at: int | None = None
    # batch.completed -> where its delivery to ``webhook`` stands (written by the delivery function, as on a job)
    webhook_deliveries: dict[str, WebhookDelivery] = msgspec.field(default_factory=dict)

    @property
    def status(self) -> str:
        return "completed" if self.event_published_at else "running"

    def counts(self) -> BatchCounts:
        return BatchCounts(**{name: getattr(self, name) for name in BatchCounts.__struct_fields__})
