"""The usage table: per caller, the pending-jobs counter and one item per day of finished jobs' usage.

Items (``caller`` partition key, ``item`` sort key; template.yaml UsageTable):

- ``pending``: ``pending`` (jobs accepted and not yet terminal), ``changes`` (every +1/-1 adds one: the heal's
  optimistic lock), ``changed_at``, and ``counter_shard`` (constant: the KEYS_ONLY ``pending-counters`` index lists
  every caller that has a counter; its key never changes, so the counter's updates do not write the index);
- ``day#YYYY-MM-DD`` (UTC, the day the jobs ended): ``jobs``, one count per terminal status, ``queue_ms``, ``image_ms``,
  ``video_ms``, ``cost_micro_usd``, ``unpriced_jobs``; expires after ``USAGE_RETENTION_DAYS``.

The +1 and -1 are not written here: they are items of the job store's own transactions (``counter_increment``,
``counter_decrement``, ``day_update``), so a job record and its count never disagree. Here: reads, and the heal.
"""

from __future__ import annotations

import time
from typing import Any

from botocore.exceptions import ClientError

from omnireel.aws.clients import client
from omnireel.aws.dynamodb_values import from_attributes, to_attributes
from omnireel.usage.metering import UsageRecord

PENDING_ITEM = "pending"
DAY_PREFIX = "day#"
COUNTERS_INDEX = "pending-counters"
COUNTER_SHARD = "p"
USAGE_RETENTION_DAYS = 400  # a year of days and a margin: GET /usage answers at most MAX_RANGE_DAYS at once
# The jobs table's sparse ``caller-open-jobs`` index (template.yaml JobsTable): only open jobs that were counted carry
# ``counted_as``, and the terminal transition removes it with the -1.
CALLER_OPEN_JOBS_INDEX = "caller-open-jobs"


def day_key(day: str) -> str:
    return f"{DAY_PREFIX}{day}"


def counter_increment(table: str, caller: str, limit: int, stamp: str) -> dict[str, Any]:
    """The transaction item that takes one of ``caller``'s ``limit`` pending places (fails at the limit)."""
    return {
        "Update": {
            "TableName": table,
            "Key": to_attributes({"caller": caller, "item": PENDING_ITEM}),
            "UpdateExpression": "ADD pending :one, changes :one "
            "SET changed_at = :now, counter_shard = if_not_exists(counter_shard, :shard)",
            "ConditionExpression": "attribute_not_exists(pending) OR pending < :limit",
            "ExpressionAttributeValues": to_attributes(
                {":one": 1, ":now": stamp, ":limit": limit, ":shard": COUNTER_SHARD}
            ),
        }
    }


def counter_decrement(table: str, caller: str, stamp: str) -> dict[str, Any]:
    """The transaction item that gives one pending place back."""
    return {
        "Update": {
            "TableName": table,
            "Key": to_attributes({"caller": caller, "item": PENDING_ITEM}),
            # Unconditional: a job's end is never refused for its count (a counter healed meanwhile is healed again).
            "UpdateExpression": "ADD pending :minus, changes :one "
            "SET changed_at = :now, counter_shard = if_not_exists(counter_shard, :shard)",
            "ExpressionAttributeValues": to_attributes(
                {":minus": -1, ":one": 1, ":now": stamp, ":shard": COUNTER_SHARD}
            ),
        }
    }


def day_update(table: str, caller: str, day: str, status: str, usage: UsageRecord) -> dict[str, Any]:
    """The transaction item that adds one finished job's usage to its caller's day."""
    adds = {"jobs": 1, status: 1, "queue_ms": usage.queue_ms or 0, "image_ms": usage.image_ms or 0,
            "video_ms": usage.video_ms or 0, "cost_micro_usd": usage.cost_micro_usd or 0,
            "unpriced_jobs": 1 if usage.cost_micro_usd is None else 0}  # fmt: skip
    names = {f"#a{i}": name for i, name in enumerate(adds)}
    values: dict[str, Any] = {f":a{i}": value for i, value in enumerate(adds.values())}
    values[":ttl"] = int(time.time()) + USAGE_RETENTION_DAYS * 86400
    return {
        "Update": {
            "TableName": table,
            "Key": to_attributes({"caller": caller, "item": day_key(day)}),
            "UpdateExpression": "ADD "
            + ", ".join(f"#a{i} :a{i}" for i in range(len(adds)))
            + " SET expires_at = if_not_exists(expires_at, :ttl)",
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": to_attributes(values),
        }
    }


class UsageStore:
    def __init__(self, table_name: str):
        self._table_name = table_name
        self._ddb = client("dynamodb")

    def pending(self, caller: str) -> int:
        """The caller's jobs accepted and not yet terminal, as counted (strongly consistent)."""
        item = self._ddb.get_item(
            TableName=self._table_name,
            Key=to_attributes({"caller": caller, "item": PENDING_ITEM}),
            ConsistentRead=True,
            ProjectionExpression="pending",
        ).get("Item")
        return int(from_attributes(item).get("pending", 0)) if item else 0

    def days(self, caller: str, first: str, last: str) -> list[dict[str, Any]]:
        """The caller's day items from ``first`` to ``last`` (YYYY-MM-DD, both included), oldest first."""
        kwargs: dict[str, Any] = {
            "TableName": self._table_name,
            "KeyConditionExpression": "caller = :caller AND item BETWEEN :first AND :last",
            "ExpressionAttributeValues": to_attributes(
                {":caller": caller, ":first": day_key(first), ":last": day_key(last)}
            ),
        }
        found: list[dict[str, Any]] = []
        while True:
            page = self._ddb.query(**kwargs)
            found += [from_attributes(item) for item in page.get("Items", [])]
            if "LastEvaluatedKey" not in page:
                return found
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def counters(self, limit: int = 1000) -> list[str]:
        """Callers that have a pending counter (the ``pending-counters`` index), at most ``limit``."""
        kwargs: dict[str, Any] = {
            "TableName": self._table_name,
            "IndexName": COUNTERS_INDEX,
            "KeyConditionExpression": "counter_shard = :shard",
            "ExpressionAttributeValues": to_attributes({":shard": COUNTER_SHARD}),
        }
        callers: list[str] = []
        while len(callers) < limit:
            page = self._ddb.query(Limit=limit - len(callers), **kwargs)
            callers += [item["caller"]["S"] for item in page.get("Items", [])]
            if "LastEvaluatedKey" not in page:
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return callers

    def counter(self, caller: str) -> dict[str, Any] | None:
        item = self._ddb.get_item(
            TableName=self._table_name,
            Key=to_attributes({"caller": caller, "item": PENDING_ITEM}),
            ConsistentRead=True,
        ).get("Item")
        return from_attributes(item) if item else None

    def set_pending(self, caller: str, pending: int, *, seen_changes: int, quiet_before: str) -> bool:
        """The heal's write: ``pending`` becomes the recount, only if no job was counted or ended since it was read
        (``changes``) and the counter has been quiet since ``quiet_before`` (the index the recount read is eventually
        consistent: a job written just before may not be in it yet). False: left for the next run."""
        try:
            self._ddb.update_item(
                TableName=self._table_name,
                Key=to_attributes({"caller": caller, "item": PENDING_ITEM}),
                UpdateExpression="SET pending = :pending",
                ConditionExpression="changes = :seen AND changed_at < :quiet",
                ExpressionAttributeValues=to_attributes(
                    {":pending": pending, ":seen": seen_changes, ":quiet": quiet_before}
                ),
            )
            return True
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "ConditionalCheckFailedException":
                return False
            raise
