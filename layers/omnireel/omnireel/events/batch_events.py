"""The ``batch.completed`` event, version 1: once every job of a batch is terminal, with the counts and the manifest.

It goes where job events go (the job-events SNS topic with an ``event_type`` message attribute, EventBridge with
``detail-type`` = event type, and so to webhooks). ``docs/events/batch-event.v1.schema.json`` is the contract: tests
check that the fields here are the schema's and that the events built here validate against it.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from omnireel.core.ids import job_id_for
from omnireel.core.s3uri import SourceVersion


class BatchCounts(msgspec.Struct, kw_only=True):
    total: int  # job lines (blank lines are not counted)
    accepted: int  # lines that became running jobs
    rejected: int  # lines that failed validation: each is a failed job whose reason names its line
    succeeded: int
    failed: int  # jobs that ended failed, rejected lines included
    cancelled: int


class BatchManifest(msgspec.Struct, kw_only=True):
    s3_uri: str  # JSONL, one object per line: line, job_id, status, video (S3 URI or null), error
    url: str  # presigned HTTPS GET URL
    expires_at: str  # when the presigned URL stops working (ISO 8601, UTC)


class BatchTruncation(msgspec.Struct, kw_only=True):
    """Why a dropped file's batch ended before its last line: the splitter could no longer read the file version
    (``SourceVersionGone``), or reading / queueing it failed on every attempt (``SplitFailed``: its work item's last
    receive, or the reconciler finding the splitter stopped)."""

    code: Literal["SourceVersionGone", "SplitFailed"] = "SourceVersionGone"
    message: str  # bounded, e.g. the file version was deleted while its lines were being read
    truncated_at_line: int  # the first line of the file that was not read: lines before it are the batch


class BatchEvent(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, dict=True):
    version: Literal[1] = 1
    event_id: str  # stable per batch: consumers can de-duplicate on it
    event_type: Literal["batch.completed"] = "batch.completed"
    occurred_at: str  # when the batch's last job became terminal (the same in every delivery)
    batch_id: str
    status: Literal["completed"] = "completed"
    source: str  # api, or s3://<inbox bucket>/<key> for a dropped .jsonl file
    source_version: SourceVersion | None = None
    counts: BatchCounts
    manifest: BatchManifest
    truncated: BatchTruncation | None = None  # set when the file version went away mid-split: the lines read

    @property
    def webhook_url(self) -> str | None:
        """Not in the body: where the batch asked batch.completed to be delivered (POST /batches "webhook"); published
        as the SNS ``webhook`` attribute, which the webhook queue's subscription filters on
        (omnireel.webhooks.dispatch). Set with ``with_webhook``: an attribute outside the struct's fields
        (``dict=True``), never encoded."""
        return getattr(self, "_webhook", None)

    def with_webhook(self, url: str | None) -> BatchEvent:
        self._webhook = url
        return self


def batch_event_id(batch_id: str) -> str:
    return job_id_for(f"{batch_id}/batch.completed")
