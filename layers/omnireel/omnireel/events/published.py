"""What the stack records of an event it publishes to a webhook, so that the delivery function signs only those.

The webhook queue's messages come from the job-events topic, but a queue or a topic accepts a message from any
principal its policies allow: the delivery function cannot take the message's word for the event or the target. So
``EventPublisher.publish`` records every event that carries a ``webhook`` attribute on the record of its job (the jobs
table) or its batch (the batch item of the batches table) BEFORE publishing it: one attribute per event type,
``published#<event_type>`` = ``{"event_id", "body", "recorded_at"}``. The delivery function takes only identifiers
from a message (event id, type, job or batch id), reads that attribute, and delivers the recorded body to the URL of
the record's own request (``omnireel.aws.record_owners.PublishedEvents``); an event the stack did not record is
dropped, never signed (issue 33 item 1).

A retried publication (new presigned URLs, the same event id) overwrites the record, so every delivery of that event
carries the latest body.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

PUBLISHED_PREFIX = "published#"
RecordKind = Literal["job", "batch"]


def published_attribute(event_type: str) -> str:
    """The record's attribute that holds the last publication of ``event_type`` (job.succeeded, batch.completed)."""
    return f"{PUBLISHED_PREFIX}{event_type}"


def record_kind(event_type: str) -> RecordKind:
    """Which record an event type is recorded on: batch events on their batch, every other event on its job."""
    return "batch" if event_type.startswith("batch.") else "job"


@dataclass(frozen=True)
class EventIds:
    """What a queued message is allowed to say: which event of which record (nothing of its body or target is used)."""

    event_id: str
    event_type: str
    job_id: str | None
    batch_id: str | None


@dataclass(frozen=True)
class RecordedDelivery:
    """A delivery as the stack's records define it: the recorded body, sent to the URL of the record's own request."""

    url: str
    body: str
    event_id: str
    event_type: str
    job_id: str | None


class EventNotPublished(Exception):
    """The message names an event the stack has no record of publishing (forged, or its record is gone): dropped."""
