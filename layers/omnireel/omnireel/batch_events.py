"""The ``batch.completed`` event, version 1: once every job of a batch is terminal, with the counts and the manifest.

It goes where job events go (the job-events SNS topic with an ``event_type`` message attribute, EventBridge with
``detail-type`` = event type, and so to webhooks). ``docs/events/batch-event.v1.schema.json`` is generated from
``BatchEvent`` (``scripts/write_event_schema.py``) and checked by a test.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from omnireel.job import SourceVersion, job_id_for


class BatchCounts(BaseModel):
    total: int = Field(description="job lines (blank lines are not counted)")
    accepted: int = Field(description="lines that became running jobs")
    rejected: int = Field(description="lines that failed validation: each is a failed job whose reason names its line")
    succeeded: int
    failed: int = Field(description="jobs that ended failed, rejected lines included")
    cancelled: int


class BatchManifest(BaseModel):
    s3_uri: str = Field(description="JSONL, one object per line: line, job_id, status, video (S3 URI or null), error")
    url: str = Field(description="presigned HTTPS GET URL")
    expires_at: str = Field(description="when the presigned URL stops working (ISO 8601, UTC)")


class BatchTruncation(BaseModel):
    """Why a dropped file's batch ended before its last line: the splitter could no longer read the file version."""

    code: Literal["SourceVersionGone"] = "SourceVersionGone"
    message: str = Field(description="bounded, e.g. the file version was deleted while its lines were being read")
    truncated_at_line: int = Field(
        description="the first line of the file that was not read: lines before it are the batch (counts.total)"
    )


class BatchEvent(BaseModel):
    model_config = ConfigDict(title="omnireel batch event", extra="forbid")

    version: Literal[1] = 1
    event_id: str = Field(description="stable per batch: consumers can de-duplicate on it")
    event_type: Literal["batch.completed"] = "batch.completed"
    occurred_at: str = Field(description="when the batch's last job became terminal (the same in every delivery)")
    batch_id: str
    status: Literal["completed"] = "completed"
    source: str = Field(description="api, or s3://<inbox bucket>/<key> for a dropped .jsonl file")
    source_version: SourceVersion | None = None
    counts: BatchCounts
    manifest: BatchManifest
    truncated: BatchTruncation | None = Field(
        default=None, description="set when the file version went away mid-split: the batch is the lines read"
    )
    # Not in the body: where the batch asked batch.completed to be delivered (POST /batches "webhook"); published as
    # the SNS ``webhook`` attribute, which the webhook queue's subscription filters on (omnireel.webhooks).
    _webhook: str | None = PrivateAttr(default=None)

    @property
    def webhook_url(self) -> str | None:
        return self._webhook


def batch_event_id(batch_id: str) -> str:
    return job_id_for(f"{batch_id}/batch.completed")
