"""Counting a batch's terminal jobs and completing it: one ``batch.completed`` with the counts and a manifest.

Fed by the job-events topic (an SQS subscription filtered to terminal events of batch jobs). Each event counts once
(``BatchStore.record_terminal``'s conditional transaction, which also frees the job's in-flight slot). The event that
makes ``terminal == total`` claims the completion (a conditional write: one winner), writes the manifest
(``batches/<id>/manifest.jsonl`` in the artifacts bucket: line, job id, status, video URI, error) and publishes
``batch.completed`` through the job-event publisher (SNS with ``event_type``, EventBridge, and so webhooks). A winner
that dies between its claim and the publish is finished by its message's redelivery (a duplicate event for the
counter, with the batch claimed but not published); the event id is stable per batch, so a rare second delivery can
be de-duplicated as for job events.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from omnireel.aws.artifact_store import ArtifactStore
from omnireel.aws.batch_store import BatchStore
from omnireel.aws.event_publisher import EventPublisher
from omnireel.batches.record import COUNTED_AS, TERMINAL_COUNTERS, Batch
from omnireel.core.clock import iso, now, parse_time
from omnireel.core.records import to_dict
from omnireel.core.s3uri import S3Uri
from omnireel.events.batch_events import BatchEvent, BatchManifest, batch_event_id
from omnireel.runtime.observability import logger

# A claimed, unpublished completion younger than this is left to its claimant (batch_reconcile and the visibility
# timeout, 360 s, are both longer).
PUBLISH_TAKEOVER_S = 60


def manifest_key(batch_id: str) -> str:
    return f"batches/{batch_id}/manifest.jsonl"


@dataclass
class Progress:
    store: BatchStore
    artifacts: ArtifactStore
    publisher: EventPublisher
    presign_seconds: int

    def record(self, event: dict[str, Any]) -> BatchEvent | None:
        """One job event (the topic's JSON body). Returns the ``batch.completed`` published now, if any."""
        batch = event.get("batch") or {}
        status = COUNTED_AS.get(event.get("status") or "", event.get("status"))
        if not batch or status not in TERMINAL_COUNTERS:
            return None
        batch_id, line = batch["batch_id"], int(batch["line"])
        recorded = self.store.line(batch_id, line)
        video = ((event.get("artifacts") or {}).get("video") or {}).get("s3_uri")
        error = (event.get("error") or {}).get("message")
        counted = self.store.record_terminal(
            batch_id,
            line,
            job_id=event["job_id"],
            status=status,
            video=video,
            error=error,
            release_slot=bool(recorded and recorded.get("submitted") == "accepted"),
        )
        return self.complete_if_done(batch_id, redelivery=not counted)

    def complete_if_done(self, batch_id: str, *, redelivery: bool) -> BatchEvent | None:
        batch = self.store.find(batch_id)
        if batch is None or batch.event_published_at:
            return None
        if batch.completed_at is None:
            if batch.terminal < batch.total:
                return None
            uri = str(S3Uri(self.artifacts.bucket, manifest_key(batch_id)))
            if not self.store.claim_completion(batch_id, uri):
                return None  # another invocation completed it
            batch = self.store.find(batch_id) or batch
        elif not redelivery:
            return None  # completed by another invocation that is publishing now
        elif (now() - parse_time(batch.completed_at)).total_seconds() < PUBLISH_TAKEOVER_S:
            # Claimed moments ago: its claimant is publishing now (a duplicate or late event must not publish a
            # second batch.completed). One that died is finished by its message's redelivery, which comes after the
            # queue's visibility timeout, or by the reconciler (omnireel.batches.reconcile).
            return None
        return self._publish(batch)

    def _publish(self, batch: Batch) -> BatchEvent:
        rows = [
            {
                "line": item["line"],
                "job_id": item.get("job_id"),
                "status": item.get("terminal"),
                "video": item.get("video"),
                "error": item.get("error_message"),
            }
            for item in self.store.lines(batch.batch_id)
        ]
        body = "".join(json.dumps(row) + "\n" for row in rows).encode()
        uri = self.artifacts.put(manifest_key(batch.batch_id), body, "application/x-ndjson")
        url, expires_at = self.artifacts.presign(uri, self.presign_seconds)
        event = BatchEvent(
            event_id=batch_event_id(batch.batch_id),
            occurred_at=batch.completed_at or iso(now()),
            batch_id=batch.batch_id,
            source=batch.source,
            source_version=batch.source_version,
            counts=batch.counts(),
            manifest=BatchManifest(s3_uri=str(uri), url=url, expires_at=expires_at),
            truncated=batch.truncated,
        )
        event.with_webhook(batch.webhook)
        self.publisher.publish(event)
        self.store.mark_published(batch.batch_id)
        logger.info("batch completed", extra={"batch_id": batch.batch_id, "counts": to_dict(batch.counts())})
        return event


def batch_view(batch: Batch, artifacts: ArtifactStore, presign_seconds: int) -> dict[str, Any]:
    """GET /batches/{id}."""
    view: dict[str, Any] = {
        "batch_id": batch.batch_id,
        "status": batch.status,
        "source": batch.source,
        "source_version": to_dict(batch.source_version) if batch.source_version else None,
        "created_at": batch.created_at,
        "updated_at": batch.updated_at,
        "completed_at": batch.completed_at,
        "counts": to_dict(batch.counts()),
        "manifest": None,
        "truncated": to_dict(batch.truncated) if batch.truncated else None,
        "webhook": _webhook_view(batch),
    }
    if batch.event_published_at and batch.manifest_uri:
        uri = S3Uri.parse(batch.manifest_uri)
        url, expires_at = artifacts.presign(uri, presign_seconds)
        view["manifest"] = {"s3_uri": batch.manifest_uri, "url": url, "expires_at": expires_at}
    return view


def _webhook_view(batch: Batch) -> dict[str, Any] | None:
    """The batch's webhook and where its ``batch.completed`` delivery stands (written by the delivery function), shaped
    as a job's (``omnireel.jobs.job_view``); null for a batch without a webhook."""
    if batch.webhook is None:
        return None
    deliveries = {k: to_dict(v) for k, v in batch.webhook_deliveries.items()}
    return {"url": batch.webhook, "events": ["batch.completed"], "deliveries": deliveries}
