"""The jobs table: one item per job, every transition a conditional write."""

from __future__ import annotations

import time
from typing import Any

import msgspec
from botocore.exceptions import ClientError
from msgspec.structs import replace

from omnireel.aws.clients import client
from omnireel.aws.delivery_state import record_delivery_state
from omnireel.aws.dynamodb_values import from_attributes, to_attributes
from omnireel.aws.usage_store import (
    CALLER_OPEN_JOBS_INDEX,
    counter_decrement,
    counter_increment,
    day_update,
)
from omnireel.core.clock import iso, now, parse_time
from omnireel.core.errors import JobConflict, JobNotFound, TooManyPendingJobs
from omnireel.core.records import to_dict, to_json
from omnireel.jobs.job import OPEN_SHARDS, Job, JobStatus, allowed_sources, open_shard_for
from omnireel.jobs.request import JobRequest
from omnireel.usage.metering import Metering, UsageRecord, job_usage


def _to_item(job: Job) -> dict[str, Any]:
    item = to_dict(job, omit_none=True)
    item.pop("request", None)
    if job.request is not None:
        item["request_json"] = to_json(job.request)
    return item


def _from_item(item: dict[str, Any]) -> Job:
    data = from_attributes(item)
    raw = data.pop("request_json", None)
    data["request"] = None  # set below, from the JSON it is stored as
    job = msgspec.convert(data, Job)  # attributes Job does not name (task_token) are ignored
    if raw:
        job.request = msgspec.json.decode(raw, type=JobRequest)
    return job


# Sparse global secondary index of the jobs that are not terminal yet (template.yaml: JobsTable): only items that
# carry ``open_shard`` are in it, and the terminal transition removes the attribute.
OPEN_JOBS_INDEX = "open-jobs"
# Jobs per API caller, newest first (template.yaml: JobsTable): jobs from dropped files have no owner and are not in it.
OWNER_JOBS_INDEX = "owner-jobs"
_LIST_PAGES = 10  # queries per listing page when a status filter skips items: bounded work per request


def _cancelled_by(exc: ClientError, index: int) -> bool:
    """Did item ``index`` of a cancelled transaction fail its condition?"""
    reasons = exc.response.get("CancellationReasons") or []
    return len(reasons) > index and (reasons[index] or {}).get("Code") == "ConditionalCheckFailed"


class JobStore:
    """``usage_table``/``max_pending``: with both, a job that counts against a caller (``counted_as``) takes one of its
    ``max_pending`` places in the transaction that writes it and gives it back in the one that ends it; a job's end
    also adds its usage to its caller's day (``omnireel.aws.usage_store``). Without them (a stack before issue 34's
    accounting) jobs are written alone, as before."""

    def __init__(self, table_name: str, ttl_days: int = 30, usage_table: str | None = None, max_pending: int = 0):
        self._table_name = table_name
        self._ttl_seconds = ttl_days * 86400
        self._usage_table = usage_table
        self._max_pending = max_pending
        # Created with the store, at the cold start of every function that builds one: they use it on every call, and
        # creating it on first use would only move its cost into the first call. The low-level client, not a boto3
        # Table resource (omnireel.aws.dynamodb_values).
        self._ddb = client("dynamodb")

    def _key(self, job_id: str) -> dict[str, Any]:
        return {"job_id": {"S": job_id}}

    def create(self, job: Job) -> tuple[Job, bool]:
        """Insert ``job`` unless an item with its id exists; return (stored job, created?)."""
        update: dict[str, Any] = {"expires_at": int(time.time()) + self._ttl_seconds}
        update["open_shard"] = None if job.status.terminal else open_shard_for(job.job_id)
        counted = bool(self._usage_table and self._max_pending and job.counted_as and not job.status.terminal)
        update["counted_as"] = job.counted_as if counted else None
        job = replace(job, **update)
        if counted:
            return self._create_counted(job)
        try:
            self._ddb.put_item(
                TableName=self._table_name,
                Item=to_attributes(_to_item(job)),
                ConditionExpression="attribute_not_exists(job_id)",
            )
            return job, True
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
        return self.get(job.job_id), False

    def _create_counted(self, job: Job) -> tuple[Job, bool]:
        """The job record and its caller's +1 in one transaction: over the limit nothing is written."""
        assert self._usage_table and job.counted_as
        put = {
            "Put": {
                "TableName": self._table_name,
                "Item": to_attributes(_to_item(job)),
                "ConditionExpression": "attribute_not_exists(job_id)",
            }
        }
        increment = counter_increment(self._usage_table, job.counted_as, self._max_pending, job.created_at)
        try:
            self._ddb.transact_write_items(TransactItems=[put, increment])
            return job, True
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "TransactionCanceledException":
                raise
            if _cancelled_by(exc, 0):  # the job exists (a retry, an idempotent replay): it was counted then
                return self.get(job.job_id), False
            if _cancelled_by(exc, 1):
                raise TooManyPendingJobs(
                    f"{self._max_pending} of this caller's jobs are accepted and not yet finished "
                    "(CallerMaxPendingJobs): retry when one of them has ended",
                    caller=job.counted_as,
                    limit=self._max_pending,
                ) from None
            raise

    def get(self, job_id: str) -> Job:
        item = self._ddb.get_item(TableName=self._table_name, Key=self._key(job_id), ConsistentRead=True).get("Item")
        if not item:
            raise JobNotFound(f"no job with id {job_id}")
        return _from_item(item)

    def find(self, job_id: str) -> Job | None:
        try:
            return self.get(job_id)
        except JobNotFound:
            return None

    def transition(self, job_id: str, target: JobStatus, **fields: Any) -> Job:
        """Move the job to ``target`` if allowed from its current status, setting ``fields`` too.

        Re-entering the current stage is allowed (a retried step); going backwards or leaving a
        terminal state raises ``JobConflict``. The first time a status is entered is recorded.
        """
        moment = now()
        stamp = iso(moment)
        current: Job | None = None
        usage = UsageRecord()
        if target.terminal:
            # The job's usage is stored with its end, and a counted job gives its place back in the same transaction.
            current = self.find(job_id)
            if current is not None and not current.status.terminal:
                usage = self._usage(current, moment, fields.get("metering"))
                fields = {**fields, "usage": to_dict(usage, omit_none=True)}
            else:
                current = None  # unknown or already terminal: the conditional write below says which
        names = {"#status": "status", "#target": target.value}
        values: dict[str, Any] = {":target": target.value, ":now": stamp}
        sets = [
            "#status = :target",
            "updated_at = :now",
            "stage_times.#target = if_not_exists(stage_times.#target, :now)",
        ]
        for index, (name, value) in enumerate(fields.items()):
            names[f"#f{index}"] = name
            values[f":f{index}"] = value
            sets.append(f"#f{index} = :f{index}")
        sources = allowed_sources(target)
        for index, source in enumerate(sources):
            values[f":s{index}"] = source.value
        condition = "attribute_exists(job_id) AND #status IN (" + ", ".join(f":s{i}" for i in range(len(sources))) + ")"
        # A terminal job leaves both sparse indexes (open jobs; its caller's open jobs, which the counters' heal reads).
        update = "SET " + ", ".join(sets) + (" REMOVE open_shard, counted_as" if target.terminal else "")
        if current is not None and current.counted_as and self._usage_table:
            return self._finish_counted(job_id, target, current, usage, (update, condition, names, values), stamp)
        try:
            result = self._ddb.update_item(
                TableName=self._table_name,
                Key=self._key(job_id),
                UpdateExpression=update,
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=to_attributes(values),
                ReturnValues="ALL_NEW",
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            current = self.get(job_id)  # raises JobNotFound for an unknown id
            raise JobConflict(f"job {job_id} cannot move from {current.status.value} to {target.value}") from exc
        return _from_item(result["Attributes"])

    @staticmethod
    def _usage(job: Job, moment: Any, metering: dict[str, Any] | None) -> UsageRecord:
        first = job.stage_times.get(JobStatus.GENERATING_IMAGE.value)
        measured = msgspec.convert(metering, Metering) if metering is not None else job.metering
        return job_usage(
            created_at=parse_time(job.created_at),
            first_stage_at=parse_time(first) if first else None,
            ended_at=moment,
            metering=measured,
        )

    def _finish_counted(
        self,
        job_id: str,
        target: JobStatus,
        current: Job,
        usage: UsageRecord,
        expression: tuple[str, str, dict[str, str], dict[str, Any]],
        stamp: str,
    ) -> Job:
        """The terminal transition of a counted job, its caller's -1 and its day's usage: one transaction. The job's
        condition (not terminal yet, still counted as this caller) makes the -1 and the day's sums exactly-once under
        retries, duplicate events and racing ends."""
        assert self._usage_table and current.counted_as
        update, condition, names, values = expression
        values = {**values, ":counted": current.counted_as}
        job_update = {
            "Update": {
                "TableName": self._table_name,
                "Key": self._key(job_id),
                "UpdateExpression": update,
                "ConditionExpression": condition + " AND counted_as = :counted",
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": to_attributes(values),
            }
        }
        items = [
            job_update,
            counter_decrement(self._usage_table, current.counted_as, stamp),
            day_update(self._usage_table, current.counted_as, stamp[:10], target.value, usage),
        ]
        try:
            self._ddb.transact_write_items(TransactItems=items)
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "TransactionCanceledException" or not _cancelled_by(exc, 0):
                raise
            latest = self.get(job_id)
            raise JobConflict(f"job {job_id} cannot move from {latest.status.value} to {target.value}") from exc
        return self.get(job_id)

    def at_limit(self, caller: str) -> bool:
        """Is ``caller`` at its CallerMaxPendingJobs now (a strongly consistent read of its counter)? A hint for the
        batch fan-out, which defers a line before it takes a slot; the limit itself is the transaction's condition."""
        if not (self._usage_table and self._max_pending):
            return False
        item = self._ddb.get_item(
            TableName=self._usage_table,
            Key=to_attributes({"caller": caller, "item": "pending"}),
            ConsistentRead=True,
            ProjectionExpression="pending",
        ).get("Item")
        return bool(item) and int(from_attributes(item).get("pending", 0)) >= self._max_pending

    def count_open(self, caller: str) -> int:
        """How many of ``caller``'s counted jobs are open, from the sparse ``caller-open-jobs`` index (eventually
        consistent: the heal uses it only for a counter that has been quiet for a while)."""
        kwargs: dict[str, Any] = {
            "IndexName": CALLER_OPEN_JOBS_INDEX,
            "KeyConditionExpression": "counted_as = :caller",
            "ExpressionAttributeValues": to_attributes({":caller": caller}),
            "Select": "COUNT",
        }
        total = 0
        while True:
            page = self._ddb.query(TableName=self._table_name, **kwargs)
            total += int(page.get("Count", 0))
            if "LastEvaluatedKey" not in page:
                return total
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def open_before(self, cutoff: str, per_shard: int = 100) -> list[str]:
        """Ids of non-terminal jobs created before ``cutoff`` (ISO time): the oldest ``per_shard`` of each shard."""
        found: list[str] = []
        for shard in OPEN_SHARDS:
            kwargs: dict[str, Any] = {
                "IndexName": OPEN_JOBS_INDEX,
                "KeyConditionExpression": "open_shard = :shard AND created_at < :cutoff",
                "ExpressionAttributeValues": to_attributes({":shard": shard, ":cutoff": cutoff}),
                "ProjectionExpression": "job_id",
            }
            taken = 0
            while taken < per_shard:
                page = self._ddb.query(TableName=self._table_name, Limit=per_shard - taken, **kwargs)
                items = page.get("Items", [])
                found += [item["job_id"]["S"] for item in items]
                taken += len(items)
                if "LastEvaluatedKey" not in page:
                    break
                kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return found

    def list_owned(
        self, owner: str, status: JobStatus | None, limit: int, start: tuple[str, str] | None
    ) -> tuple[list[Job], tuple[str, str] | None]:
        """Up to ``limit`` of ``owner``'s jobs after ``start`` ((created_at, job_id) of the last position seen), newest
        first, and the position to continue from (None: no more). With a status filter a page can come back short:
        each request makes at most ``_LIST_PAGES`` queries."""
        names = {"#owner": "owner"}
        values: dict[str, Any] = {":owner": owner}
        kwargs: dict[str, Any] = {
            "IndexName": OWNER_JOBS_INDEX,
            "KeyConditionExpression": "#owner = :owner",
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
            "ScanIndexForward": False,
        }
        if status is not None:
            kwargs["FilterExpression"] = "#status = :status"
            names["#status"], values[":status"] = "status", status.value
        if start is not None:
            kwargs["ExclusiveStartKey"] = to_attributes({"owner": owner, "created_at": start[0], "job_id": start[1]})
        kwargs["ExpressionAttributeValues"] = to_attributes(values)
        found: list[Job] = []
        last: dict[str, Any] = {}
        for _ in range(_LIST_PAGES):
            page = self._ddb.query(TableName=self._table_name, Limit=limit - len(found), **kwargs)
            found += [_from_item(item) for item in page.get("Items", [])]
            if "LastEvaluatedKey" not in page:
                return found, None
            if len(found) >= limit:
                return found, (found[-1].created_at, found[-1].job_id)
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
            last = from_attributes(page["LastEvaluatedKey"])
        return found, (last["created_at"], last["job_id"])

    def set_fields(self, job_id: str, **fields: Any) -> Job:
        """Record fields (artifacts, async invocation, task token) without changing the status."""
        names = {f"#f{i}": name for i, name in enumerate(fields)}
        values = {f":f{i}": value for i, value in enumerate(fields.values())}
        values[":now"] = iso(now())
        sets = [f"#f{i} = :f{i}" for i in range(len(fields))] + ["updated_at = :now"]
        result = self._ddb.update_item(
            TableName=self._table_name,
            Key=self._key(job_id),
            UpdateExpression="SET " + ", ".join(sets),
            ConditionExpression="attribute_exists(job_id)",
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=to_attributes(values),
            ReturnValues="ALL_NEW",
        )
        return _from_item(result["Attributes"])

    def set_artifact(self, job_id: str, name: str, uri: str) -> None:
        self._ddb.update_item(
            TableName=self._table_name,
            Key=self._key(job_id),
            UpdateExpression="SET artifacts.#name = :uri, updated_at = :now",
            ConditionExpression="attribute_exists(job_id)",
            ExpressionAttributeNames={"#name": name},
            ExpressionAttributeValues=to_attributes({":uri": uri, ":now": iso(now())}),
        )

    def record_webhook_attempt(self, job_id: str, event_type: str, state: dict[str, Any]) -> None:
        """Store the delivery state of ``event_type`` (records written before webhooks get the map first)."""
        record_delivery_state(
            self._ddb, self._table_name, self._key(job_id), "job_id", event_type, state,
            still_there=lambda: self.find(job_id) is not None,
        )  # fmt: skip

    def find_with_token(self, job_id: str) -> tuple[Job | None, str | None]:
        """The job and its stored task token in one consistent read (None, None for an unknown id)."""
        item = self._ddb.get_item(TableName=self._table_name, Key=self._key(job_id), ConsistentRead=True).get("Item")
        if not item:
            return None, None
        return _from_item(item), item["task_token"]["S"] if "task_token" in item else None

    def claim_publication(self, job: Job) -> bool:
        """Mark ``job``'s terminal event as published; False if it already was (exactly-once guard) or if the record
        is no longer this incarnation of the job: TTL deleted it and the same Idempotency-Key made a new one, whose
        own event must not count as sent (its execution name differs: ``new_execution_name``)."""
        values: dict[str, Any] = {":now": iso(now())}
        if job.execution_name is None:  # a record written before execution names were unique: no later incarnation
            incarnation = "attribute_not_exists(execution_name)"
        else:
            incarnation, values[":execution"] = "execution_name = :execution", job.execution_name
        try:
            self._ddb.update_item(
                TableName=self._table_name,
                Key=self._key(job.job_id),
                UpdateExpression="SET event_published_at = :now",
                ConditionExpression=f"attribute_exists(job_id) AND attribute_not_exists(event_published_at) AND "
                f"{incarnation}",
                ExpressionAttributeValues=to_attributes(values),
            )
            return True
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "ConditionalCheckFailedException":
                return False
            raise
