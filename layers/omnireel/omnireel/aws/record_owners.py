"""Who owns a job or a batch, read from its record: the delivery function signs each webhook with the owner's secret.

One strongly consistent GetItem projected to the key and ``owner`` (the record's other attributes, prompts included,
are not read). A record without ``owner`` is a dropped file's (no owner); a missing record is ``WebhookOwnerUnknown``.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

from omnireel.aws.clients import client
from omnireel.core.errors import WebhookOwnerUnknown

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
