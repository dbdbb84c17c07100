"""Who owns a job or a batch, read from its record: the delivery function signs each webhook with the owner's secret.

One strongly consistent GetItem projected to the key and ``owner`` (the record's other attributes, prompts included,
are not read). A record without ``owner`` is a dropped file's (no owner); a missing record is ``WebhookOwnerUnknown``.

``PublishedEvents``: what the delivery function delivers, read from the same records (never from the queued message).
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

import msgspec

from omnireel.aws.clients import client
from omnireel.aws.dynamodb_values import from_attributes
from omnireel.core.errors import WebhookOwnerUnknown
from omnireel.events.published import (
    EventIds,
    EventNotPublished,
    RecordedDelivery,
    published_attribute,
    record_kind,
)
from omnireel.jobs.request import JobRequest

BATCH_ITEM = "batch"  # omnireel.aws.batch_store: the batch record's sort key


class RecordOwners:
    def __init__(self, jobs_table: str, batches_table: str | None = None):
        self._jobs_table = jobs_table
        self._batches_table = batches_table

    @cached_property
    def _ddb(self) -> Any:
        return client("dynamodb")

    def _owner(self, table: str, key: dict[str, Any], key_name: str, what: str) -> str | None:
        found = self._ddb.get_item(
            TableName=table,
            Key=key,
            ConsistentRead=True,
            ProjectionExpression="#key, #owner",
            ExpressionAttributeNames={"#key": key_name, "#owner": "owner"},
        ).get("Item")
        if not found:
            raise WebhookOwnerUnknown(f"{what} has no record (expired or never written): no owner to sign for")
        owner = found.get("owner", {}).get("S")
        return str(owner) if owner else None

    def of_job(self, job_id: str) -> str | None:
        return self._owner(self._jobs_table, {"job_id": {"S": job_id}}, "job_id", f"job {job_id}")

    def of_batch(self, batch_id: str) -> str | None:
        if not self._batches_table:
            raise WebhookOwnerUnknown(f"batch {batch_id}: this function has no batches table (BATCHES_TABLE)")
        key = {"batch_id": {"S": batch_id}, "item": {"S": BATCH_ITEM}}
        return self._owner(self._batches_table, key, "batch_id", f"batch {batch_id}")


class PublishedEvents:
    """The delivery of a queued message, rebuilt from the stack's records (issue 33 item 1): the event the stack
    recorded when it published it (``omnireel.events.published``) and the URL of the record's own request (a job's
    ``request.webhook``, if it asked for this event type; a batch's ``webhook``). One strongly consistent GetItem
    projected to what is needed. ``EventNotPublished`` when the record, the recorded event or its webhook is missing, or
    the recorded event is another one than the message names."""

    def __init__(self, jobs_table: str, batches_table: str | None = None):
        self._jobs_table = jobs_table
        self._batches_table = batches_table

    @cached_property
    def _ddb(self) -> Any:
        return client("dynamodb")

    def _read(self, table: str, key: dict[str, Any], fields: list[str]) -> dict[str, Any] | None:
        names = {f"#f{i}": name for i, name in enumerate(fields)}
        found = self._ddb.get_item(
            TableName=table,
            Key=key,
            ConsistentRead=True,
            ProjectionExpression=", ".join(names),
            ExpressionAttributeNames=names,
        ).get("Item")
        return from_attributes(found) if found else None

    def delivery(self, ids: EventIds) -> RecordedDelivery:
        attribute = published_attribute(ids.event_type)
        if record_kind(ids.event_type) == "batch":
            if not ids.batch_id:
                raise EventNotPublished("a batch event that names no batch")
            if not self._batches_table:
                raise WebhookOwnerUnknown(f"batch {ids.batch_id}: this function has no batches table (BATCHES_TABLE)")
            key = {"batch_id": {"S": ids.batch_id}, "item": {"S": BATCH_ITEM}}
            record = self._read(self._batches_table, key, ["batch_id", "webhook", attribute])
            what, url = f"batch {ids.batch_id}", (record or {}).get("webhook")
            job_id = None
        else:
            if not ids.job_id:
                raise EventNotPublished("a job event that names no job")
            record = self._read(self._jobs_table, {"job_id": {"S": ids.job_id}}, ["job_id", "request_json", attribute])
            what, url, job_id = f"job {ids.job_id}", None, ids.job_id
            raw = (record or {}).get("request_json")
            if raw:
                request = msgspec.json.decode(raw, type=JobRequest)
                url = request.webhook if request.webhook_wants(ids.event_type) else None
        if record is None:
            raise EventNotPublished(f"{what} has no record")
        published = record.get(attribute)
        if not isinstance(published, dict) or published.get("event_id") != ids.event_id:
            raise EventNotPublished(f"{what} has no published {ids.event_type} with this event id")
        if not url:
            raise EventNotPublished(f"{what} asked for no webhook for {ids.event_type}")
        return RecordedDelivery(str(url), str(published["body"]), ids.event_id, ids.event_type, job_id)
