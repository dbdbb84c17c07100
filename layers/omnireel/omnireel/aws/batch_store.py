"""The batches table: one record per batch, one item per line, and the in-flight counter, all race-safe.

Keys (``batch_id``, ``item``): the batch record is ``item = "batch"``, a line is ``item = "line#00042"``, and the
count of the batch's jobs in flight is the item (``<batch id>``, ``#in-flight``): a per-batch cap since issue 34 (the
GPUs' fair share across callers is admission's, ``omnireel.admission``; one caller's batch no longer holds back every
other caller's). Every count changes in one
DynamoDB transaction with the line item whose condition makes the change happen once: a line is submitted once
(``attribute_not_exists(submitted)``) and counted terminal once (``attribute_not_exists(terminal)``), so a retried
message or a duplicate terminal event never counts twice and never releases an in-flight slot twice.

Open items: a batch record until its ``batch.completed`` is published, and a line from its submission until it is
counted terminal, carry ``open_shard`` (the batch id's first hex digit) and ``opened_at``: the sparse ``open-items``
index (template.yaml: BatchesTable) on which the reconciler (``omnireel.batches.reconcile``) finds, oldest first,
lines whose terminal event never arrived and batches whose intake stopped, without scanning the table.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from functools import cached_property
from typing import Any

import msgspec
from botocore.exceptions import ClientError
from msgspec.structs import replace

from omnireel.aws.clients import client
from omnireel.aws.delivery_state import record_delivery_state
from omnireel.aws.dynamodb_values import from_attributes, to_attributes
from omnireel.batches.record import TERMINAL_COUNTERS, Batch
from omnireel.core.clock import iso, now
from omnireel.core.records import to_dict
from omnireel.events.batch_events import BatchTruncation

BATCH_ITEM = "batch"
IN_FLIGHT = "#in-flight"
OPEN_ITEMS_INDEX = "open-items"
OPEN_SHARDS = tuple("0123456789abcdef")
_CONFLICT_RETRIES = 8


def open_shard(batch_id: str) -> str:
    """The open-items index partition of a batch's items: the batch id's first hex digit (16 partitions)."""
    return batch_id[0]


def line_item(line: int) -> str:
    return f"line#{line:05d}"


class BatchStore:
    def __init__(self, table_name: str, ttl_days: int = 30, *, eager: bool = False):
        self._name = table_name
        self._ttl_seconds = ttl_days * 86400
        # eager: the batch functions use the table on every call, so they create its clients at cold start; the API
        # and the inbox touch batches on some requests only and create them on first use.
        if eager:
            _ = self._ddb

    @cached_property
    def _ddb(self):
        return client("dynamodb")

    def _key(self, batch_id: str, item: str) -> dict[str, Any]:
        return {"batch_id": {"S": batch_id}, "item": {"S": item}}

    def _get(self, batch_id: str, item: str) -> dict[str, Any] | None:
        found = self._ddb.get_item(TableName=self._name, Key=self._key(batch_id, item), ConsistentRead=True)
        return from_attributes(found["Item"]) if "Item" in found else None

    # ------------------------------------------------------------ batch record
    def create(self, batch: Batch) -> tuple[Batch, bool]:
        batch = replace(batch, expires_at=int(time.time()) + self._ttl_seconds)
        item = {
            **to_dict(batch, omit_none=True),
            "item": BATCH_ITEM,
            "open_shard": open_shard(batch.batch_id),
            "opened_at": batch.created_at,
        }
        try:
            self._ddb.put_item(
                TableName=self._name, Item=to_attributes(item), ConditionExpression="attribute_not_exists(batch_id)"
            )
            return batch, True
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
        found = self.find(batch.batch_id)
        assert found is not None
        return found, False

    def find(self, batch_id: str) -> Batch | None:
        item = self._get(batch_id, BATCH_ITEM)
        return msgspec.convert(item, Batch) if item else None  # the key attribute ``item`` is ignored

    def advance_split(
        self, batch_id: str, *, offset: int, to_offset: int, to_line: int, done: bool, emitted: int = 0
    ) -> bool:
        """Checkpoint the splitter: move the cursor from ``offset`` (only if it is still there) to ``to_offset``,
        counting the ``emitted`` job lines the step queued."""
        try:
            self._ddb.update_item(
                TableName=self._name,
                Key=self._key(batch_id, BATCH_ITEM),
                UpdateExpression="SET split_offset = :to, split_line = :line, split_done = :done, updated_at = :now "
                "ADD emitted :emitted",
                ConditionExpression="split_offset = :from AND split_done = :false",
                ExpressionAttributeValues=to_attributes({
                    ":to": to_offset, ":line": to_line, ":done": done, ":now": iso(now()), ":from": offset,
                    ":false": False, ":emitted": emitted,
                }),
            )  # fmt: skip
            return True
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            return False

    def truncate_split(
        self, batch_id: str, *, offset: int, line: int, message: str, code: str = "SourceVersionGone"
    ) -> bool:
        """The file version is gone at the cursor ``offset`` (file line ``line`` + 1 was not read): end the split
        there, once. From now on no line at or after it can be submitted (``submit_line``'s condition); lines of a
        step that queued them but died before its checkpoint and were submitted already stay in the batch, so
        ``total`` is the checkpointed lines plus those."""
        truncation = BatchTruncation(code=code, message=message, truncated_at_line=line + 1)  # type: ignore[arg-type]
        try:
            self._ddb.update_item(
                TableName=self._name,
                Key=self._key(batch_id, BATCH_ITEM),
                UpdateExpression="SET truncated = :t, updated_at = :now",
                ConditionExpression="split_offset = :from AND split_done = :false AND attribute_not_exists(truncated)",
                ExpressionAttributeValues=to_attributes({
                    ":t": to_dict(truncation), ":now": iso(now()), ":from": offset, ":false": False,
                }),
            )  # fmt: skip
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            batch = self.find(batch_id)  # a redelivery of a step that died between these two writes goes on
            if batch is None or batch.split_done or batch.truncated is None or batch.split_offset != offset:
                return False
        batch = self.find(batch_id)
        assert batch is not None and batch.truncated is not None
        beyond = sum(
            1
            for item in self.lines(batch_id)
            if item["line"] >= batch.truncated.truncated_at_line and item.get("submitted")
        )
        try:
            self._ddb.update_item(
                TableName=self._name,
                Key=self._key(batch_id, BATCH_ITEM),
                UpdateExpression="SET #total = :total, split_done = :true, updated_at = :now",
                ConditionExpression="split_offset = :from AND split_done = :false",
                ExpressionAttributeNames={"#total": "total"},
                ExpressionAttributeValues=to_attributes({
                    ":total": batch.emitted + beyond, ":true": True, ":now": iso(now()), ":from": offset,
                    ":false": False,
                }),
            )  # fmt: skip
            return True
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            return False

    def touch(self, batch_id: str) -> None:
        """Say the batch moved (``updated_at``) without changing a count: lines re-queued for lack of an in-flight
        slot are waiting, not lost (the reconciler fails unrecorded lines only of a batch silent for long)."""
        try:
            self._ddb.update_item(
                TableName=self._name,
                Key=self._key(batch_id, BATCH_ITEM),
                UpdateExpression="SET updated_at = :now",
                ConditionExpression="attribute_exists(batch_id)",
                ExpressionAttributeValues=to_attributes({":now": iso(now())}),
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise

    # ------------------------------------------------------------ lines
    def line(self, batch_id: str, line: int) -> dict[str, Any] | None:
        return self._get(batch_id, line_item(line))

    def lines(self, batch_id: str) -> Iterator[dict[str, Any]]:
        """Every line item, in line order (paged)."""
        kwargs: dict[str, Any] = {
            "KeyConditionExpression": "batch_id = :b AND begins_with(#item, :line)",
            "ExpressionAttributeNames": {"#item": "item"},
            "ExpressionAttributeValues": to_attributes({":b": batch_id, ":line": "line#"}),
            "ConsistentRead": True,
        }
        while True:
            page = self._ddb.query(TableName=self._name, **kwargs)
            for item in page.get("Items", []):
                yield from_attributes(item)
            if "LastEvaluatedKey" not in page:
                return
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def submit_line(self, batch_id: str, line: int, job_id: str, *, accepted: bool, max_in_flight: int | None) -> bool:
        """Record the line as submitted (accepted or rejected) and count it, once. An accepted line takes one of the
        ``max_in_flight`` slots in the same transaction. False: the line was already submitted, or (accepted) no
        slot is free; ``line()`` tells which."""
        stamp = iso(now())
        state = "accepted" if accepted else "rejected"
        items: list[dict[str, Any]] = [
            {
                "Update": {
                    "TableName": self._name,
                    "Key": self._key(batch_id, line_item(line)),
                    # open until counted terminal (the open-items index; a line already counted stays closed)
                    "UpdateExpression": "SET submitted = :s, job_id = :j, line = :n, submitted_at = :now, "
                    "expires_at = :exp, open_shard = :shard, opened_at = :now",
                    "ConditionExpression": "attribute_not_exists(submitted)",
                    "ExpressionAttributeValues": to_attributes(
                        {
                            ":s": state,
                            ":j": job_id,
                            ":n": line,
                            ":now": stamp,
                            ":exp": self._expiry(),
                            ":shard": open_shard(batch_id),
                        }
                    ),
                }
            },
            {
                "Update": {
                    "TableName": self._name,
                    "Key": self._key(batch_id, BATCH_ITEM),
                    "UpdateExpression": f"ADD {state} :one SET updated_at = :now",
                    # a batch whose file went away mid-split takes no line at or after the first unread one
                    "ConditionExpression": "attribute_exists(batch_id) AND "
                    "(attribute_not_exists(truncated) OR truncated.truncated_at_line > :n)",
                    "ExpressionAttributeValues": to_attributes({":one": 1, ":now": stamp, ":n": line}),
                }
            },
        ]
        if accepted and max_in_flight is not None:
            items.append(
                {
                    "Update": {
                        "TableName": self._name,
                        "Key": self._key(batch_id, IN_FLIGHT),
                        "UpdateExpression": "ADD in_flight :one",
                        "ConditionExpression": "attribute_not_exists(in_flight) OR in_flight < :max",
                        "ExpressionAttributeValues": to_attributes({":one": 1, ":max": max_in_flight}),
                    }
                }
            )
        return self._transact(items)

    def record_terminal(
        self,
        batch_id: str,
        line: int,
        *,
        job_id: str,
        status: str,
        video: str | None,
        error: str | None,
        release_slot: bool,
    ) -> bool:
        """Count the line's job as terminal (``status``: succeeded | failed | cancelled) once; release its in-flight
        slot in the same transaction. False: it was already counted (a duplicate event)."""
        if status not in TERMINAL_COUNTERS:
            raise ValueError(f"not a terminal status: {status}")
        stamp = iso(now())
        values: dict[str, Any] = {":t": status, ":j": job_id, ":n": line, ":now": stamp, ":exp": self._expiry()}
        sets = "terminal = :t, job_id = :j, line = :n, terminal_at = :now, expires_at = :exp"
        if video:
            sets += ", video = :v"
            values[":v"] = video
        if error:
            sets += ", error_message = :e"
            values[":e"] = error[:500]
        items: list[dict[str, Any]] = [
            {
                "Update": {
                    "TableName": self._name,
                    "Key": self._key(batch_id, line_item(line)),
                    "UpdateExpression": f"SET {sets} REMOVE open_shard",
                    "ConditionExpression": "attribute_not_exists(terminal)",
                    "ExpressionAttributeValues": to_attributes(values),
                }
            },
            {
                "Update": {
                    "TableName": self._name,
                    "Key": self._key(batch_id, BATCH_ITEM),
                    "UpdateExpression": f"ADD {status} :one, terminal :one SET updated_at = :now",
                    "ConditionExpression": "attribute_exists(batch_id)",
                    "ExpressionAttributeValues": to_attributes({":one": 1, ":now": stamp}),
                }
            },
        ]
        if release_slot:
            items.append(
                {
                    "Update": {
                        "TableName": self._name,
                        "Key": self._key(batch_id, IN_FLIGHT),
                        "UpdateExpression": "ADD in_flight :minus",
                        "ExpressionAttributeValues": to_attributes({":minus": -1}),
                    }
                }
            )
        return self._transact(items)

    def in_flight(self, batch_id: str) -> int:
        """The batch's jobs in flight (its cap: BatchMaxInFlightJobs)."""
        item = self._get(batch_id, IN_FLIGHT)
        return int(item.get("in_flight", 0)) if item else 0

    # ------------------------------------------------------------ completion
    def claim_completion(self, batch_id: str, manifest_uri: str) -> bool:
        """Mark the batch completed, once, when every line is terminal. False: not yet, or already claimed."""
        try:
            self._ddb.update_item(
                TableName=self._name,
                Key=self._key(batch_id, BATCH_ITEM),
                UpdateExpression="SET completed_at = :now, manifest_uri = :m, updated_at = :now",
                ConditionExpression="attribute_not_exists(completed_at) AND #terminal = #total",
                ExpressionAttributeNames={"#terminal": "terminal", "#total": "total"},
                ExpressionAttributeValues=to_attributes({":now": iso(now()), ":m": manifest_uri}),
            )
            return True
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            return False

    def mark_published(self, batch_id: str) -> None:
        self._ddb.update_item(
            TableName=self._name,
            Key=self._key(batch_id, BATCH_ITEM),
            UpdateExpression="SET event_published_at = :now REMOVE open_shard",
            ExpressionAttributeValues=to_attributes({":now": iso(now())}),
        )

    def record_webhook_attempt(self, batch_id: str, event_type: str, state: dict[str, Any]) -> None:
        """Store the delivery state of ``event_type`` (``batch.completed``) on the batch record, as the job store does
        on a job (``JobStore.record_webhook_attempt``): never on a record that is gone (expired or deleted), which the
        update would otherwise create; records written before this get the map first."""
        record_delivery_state(
            self._ddb, self._name, self._key(batch_id, BATCH_ITEM), "batch_id", event_type, state,
            still_there=lambda: self.find(batch_id) is not None,
        )  # fmt: skip

    # ------------------------------------------------------------ reconciliation
    def open_items(self, cutoff: str, per_shard: int = 100) -> list[dict[str, Any]]:
        """Open items (batch records not yet published, lines not yet counted terminal) opened before ``cutoff``
        (ISO time): the oldest ``per_shard`` of each shard of the open-items index."""
        found: list[dict[str, Any]] = []
        for shard in OPEN_SHARDS:
            kwargs: dict[str, Any] = {
                "IndexName": OPEN_ITEMS_INDEX,
                "KeyConditionExpression": "open_shard = :shard AND opened_at < :cutoff",
                "ExpressionAttributeValues": to_attributes({":shard": shard, ":cutoff": cutoff}),
            }
            taken = 0
            while taken < per_shard:
                page = self._ddb.query(TableName=self._name, Limit=per_shard - taken, **kwargs)
                items = page.get("Items", [])
                found.extend(from_attributes(item) for item in items)
                taken += len(items)
                if "LastEvaluatedKey" not in page:
                    break
                kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return found

    def mark_split_done(self, batch_id: str) -> bool:
        """End an API batch's intake whose lines were not all queued (the reconciler failed the rest)."""
        try:
            self._ddb.update_item(
                TableName=self._name,
                Key=self._key(batch_id, BATCH_ITEM),
                UpdateExpression="SET split_done = :true, updated_at = :now",
                ConditionExpression="attribute_exists(batch_id) AND split_done = :false",
                ExpressionAttributeValues=to_attributes({":true": True, ":false": False, ":now": iso(now())}),
            )
            return True
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            return False

    # ------------------------------------------------------------ internals
    def _expiry(self) -> int:
        return int(time.time()) + self._ttl_seconds

    def _transact(self, items: list[dict[str, Any]]) -> bool:
        """True if the transaction applied; False if a condition failed. Conflicts with a concurrent transaction on
        the same items (the batch record and the in-flight counter are hot) are retried with jittered backoff."""
        for attempt in range(_CONFLICT_RETRIES):
            try:
                self._ddb.transact_write_items(TransactItems=items)
                return True
            except ClientError as exc:
                error = exc.response["Error"]
                if error["Code"] not in {"TransactionCanceledException", "TransactionConflictException"}:
                    raise
                reasons = [r.get("Code") for r in exc.response.get("CancellationReasons", [])]
                conflict = (
                    error["Code"] == "TransactionConflictException"
                    or "TransactionConflict" in reasons
                    or (not reasons and "TransactionConflict" in error.get("Message", ""))
                )
                if not conflict:
                    return False
                time.sleep(random.uniform(0, 0.02 * 2**attempt))
        raise RuntimeError(f"transaction still conflicting after {_CONFLICT_RETRIES} attempts")
