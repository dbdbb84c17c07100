"""The admission table (template.yaml: AdmissionTable): each endpoint kind's pool of slots, its holders and the jobs
waiting for a slot. Every grant and release is one DynamoDB transaction whose conditions make it happen once: a slot is
never granted twice (the holder item is put only if absent, the pool's ``in_use`` only grows below ``capacity``) and a
release frees it once (the holder item is deleted only if present).

Keys (``pk``, ``sk``): the pool ``POOL#<kind>`` / ``POOL``; a holder ``HOLD#<kind>`` / ``<job id>``; a waiting entry
``WAIT#<kind>`` / ``<caller key>#<enqueued_at>#<job id>`` (a caller's entries in arrival order).

Also here: the endpoint's instance count (DescribeEndpoint) and the queue metrics the healing schedule publishes
(``omnireel/Admission``: ``WaitingJobs`` and ``SlotsInUse`` per ``Endpoint``; autoscaling reads ``WaitingJobs``).
"""

from __future__ import annotations

import random
import time
from typing import Any, Literal

import msgspec
from botocore.exceptions import ClientError

from omnireel.admission.metrics import DIMENSION, NAMESPACE, OLDEST_WAIT_SECONDS, SLOTS_IN_USE, WAITING_JOBS
from omnireel.admission.pool import Holder, Kind, Pool, WaitingEntry
from omnireel.aws.clients import client
from omnireel.aws.dynamodb_values import from_attributes, to_attributes

POOL_SK = "POOL"
_CONFLICT_RETRIES = 10
_MAX_ITEMS = 10_000  # a query of holders or waiting entries reads at most this many (bounded work per call)

Grant = Literal["granted", "held", "refused"]


def pool_pk(kind: Kind) -> str:
    return f"POOL#{kind}"


def holder_pk(kind: Kind) -> str:
    return f"HOLD#{kind}"


def waiting_pk(kind: Kind) -> str:
    return f"WAIT#{kind}"


class AdmissionStore:
    def __init__(self, table_name: str):
        self._name = table_name
        self._ddb = client("dynamodb")

    # ------------------------------------------------------------ reads
    def pool(self, kind: Kind) -> Pool | None:
        item = self._ddb.get_item(TableName=self._name, Key=self._key(pool_pk(kind), POOL_SK), ConsistentRead=True).get(
            "Item"
        )
        return _pool(kind, item) if item else None

    def holds(self, kind: Kind, job_id: str) -> bool:
        item = self._ddb.get_item(
            TableName=self._name, Key=self._key(holder_pk(kind), job_id), ConsistentRead=True
        ).get("Item")
        return item is not None

    def holders(self, kind: Kind) -> list[Holder]:
        return [
            Holder(
                kind=kind, job_id=item["sk"], granted_at=item.get("granted_at", ""), task_token=item.get("task_token")
            )
            for item in self._query(holder_pk(kind))
        ]

    def entries(self, kind: Kind) -> list[WaitingEntry]:
        return [_entry(kind, item) for item in self._query(waiting_pk(kind))]

    def head(self, kind: Kind, key: str) -> WaitingEntry | None:
        """The caller's oldest waiting entry."""
        page = self._ddb.query(
            TableName=self._name,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            ExpressionAttributeValues=to_attributes({":pk": waiting_pk(kind), ":prefix": f"{key}#"}),
            Limit=1,
            ConsistentRead=True,
        )
        items = page.get("Items", [])
        return _entry(kind, from_attributes(items[0])) if items else None

    def entry(self, kind: Kind, sk: str) -> WaitingEntry | None:
        item = self._ddb.get_item(TableName=self._name, Key=self._key(waiting_pk(kind), sk), ConsistentRead=True).get(
            "Item"
        )
        return _entry(kind, from_attributes(item)) if item else None

    def ahead(self, kind: Kind, key: str, sk: str) -> int:
        """How many of the caller's entries wait before ``sk`` (its own jobs ahead of it)."""
        total, kwargs = 0, dict[str, Any]()
        for _ in range(20):
            page = self._ddb.query(
                TableName=self._name,
                KeyConditionExpression="pk = :pk AND sk BETWEEN :lo AND :hi",
                ExpressionAttributeValues=to_attributes({":pk": waiting_pk(kind), ":lo": f"{key}#", ":hi": sk}),
                Select="COUNT",
                ConsistentRead=True,
                **kwargs,
            )
            total += page.get("Count", 0)
            if "LastEvaluatedKey" not in page:
                break
            kwargs = {"ExclusiveStartKey": page["LastEvaluatedKey"]}
        return max(0, total - 1)  # the range includes the entry itself

    # ------------------------------------------------------------ pool
    def ensure_pool(
        self, kind: Kind, *, endpoint: str, instances: int, per_instance: int, capacity: int, at: str
    ) -> Pool:
        """Create the pool if missing and set its capacity from the endpoint's instances (counts are kept)."""
        result = self._ddb.update_item(
            TableName=self._name,
            Key=self._key(pool_pk(kind), POOL_SK),
            UpdateExpression="SET #capacity = :capacity, instances = :instances, per_instance = :per, "
            "capacity_at = :at, endpoint = :endpoint, in_use = if_not_exists(in_use, :zero), "
            "waiting = if_not_exists(waiting, :zero), queued = if_not_exists(queued, :empty), "
            "served = if_not_exists(served, :empty)",
            ExpressionAttributeNames={"#capacity": "capacity"},
            ExpressionAttributeValues=to_attributes(
                {
                    ":capacity": capacity,
                    ":instances": instances,
                    ":per": per_instance,
                    ":at": at,
                    ":endpoint": endpoint,
                    ":zero": 0,
                    ":empty": {},
                }
            ),
            ReturnValues="ALL_NEW",
        )
        return _pool(kind, result["Attributes"])

    def recount(self, pool: Pool, *, in_use: int, waiting: int, queued: dict[str, int], served: dict[str, str]) -> bool:
        """Set the pool's counts to what its holder and waiting items say, unless it changed since ``pool`` was read
        (the healing schedule's repair of a lost release or a crash between items: never racing a grant). "Changed"
        is the whole state, the per-caller maps included: a release, a grant and an enqueue in between can bring
        ``in_use`` and ``waiting`` back to the values read (A's slot freed and granted to A's next job while B's job
        arrives), and a recount conditioned on those two alone wrote the stale ``queued`` map, dropping B from the
        round-robin until the next repair. Every grant writes ``served``, every enqueue and grant ``queued``."""
        try:
            self._ddb.update_item(
                TableName=self._name,
                Key=self._key(pool_pk(pool.kind), POOL_SK),
                UpdateExpression="SET in_use = :in_use, waiting = :waiting, queued = :queued, served = :served",
                ConditionExpression="in_use = :old_in_use AND waiting = :old_waiting AND queued = :old_queued "
                "AND served = :old_served",
                ExpressionAttributeValues=to_attributes(
                    {
                        ":in_use": in_use,
                        ":waiting": waiting,
                        ":queued": queued,
                        ":served": served,
                        ":old_in_use": pool.in_use,
                        ":old_waiting": pool.waiting,
                        ":old_queued": pool.queued,
                        ":old_served": pool.served,
                    }
                ),
            )
            return True
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            return False

    # ------------------------------------------------------------ grants and releases
    def try_grant(self, kind: Kind, job_id: str, at: str, *, task_token: str | None = None) -> Grant:
        """The fast path, one call: take a slot if one is free and nobody waits. ``held``: the job holds one already
        (granted while it waited, or by an earlier attempt of the same step). ``task_token``: the wait this grant
        answers, kept on the holder (see ``grant``)."""
        reasons = self._transact(
            [
                {
                    "Update": {
                        "TableName": self._name,
                        "Key": self._key(pool_pk(kind), POOL_SK),
                        "UpdateExpression": "SET in_use = in_use + :one",
                        "ConditionExpression": "in_use < #capacity AND waiting = :zero",
                        "ExpressionAttributeNames": {"#capacity": "capacity"},
                        "ExpressionAttributeValues": to_attributes({":one": 1, ":zero": 0}),
                    }
                },
                self._put_holder(kind, job_id, at, task_token=task_token),
            ]
        )
        if reasons is None:
            return "granted"
        return "held" if reasons[1] == "ConditionalCheckFailed" else "refused"

    def grant(self, entry: WaitingEntry, at: str) -> bool:
        """Grant a slot to a waiting entry: the entry leaves the queue, the pool counts the grant and its caller's turn,
        the job becomes a holder - all or nothing."""
        reasons = self._transact(
            [
                {
                    "Delete": {
                        "TableName": self._name,
                        "Key": self._key(waiting_pk(entry.kind), entry.sk),
                        "ConditionExpression": "attribute_exists(sk)",
                    }
                },
                {
                    "Update": {
                        "TableName": self._name,
                        "Key": self._key(pool_pk(entry.kind), POOL_SK),
                        "UpdateExpression": "SET in_use = in_use + :one, waiting = waiting - :one, "
                        "queued.#caller = if_not_exists(queued.#caller, :one) - :one, served.#caller = :at",
                        "ConditionExpression": "in_use < #capacity",
                        "ExpressionAttributeNames": {"#caller": entry.caller_key, "#capacity": "capacity"},
                        "ExpressionAttributeValues": to_attributes({":one": 1, ":at": at}),
                    }
                },
                self._put_holder(entry.kind, entry.job_id, at, task_token=entry.task_token),
            ]
        )
        return reasons is None

    def release(self, kind: Kind, job_id: str) -> bool:
        """Free the job's slot; False if it held none (released already: a release happens once)."""
        reasons = self._transact(
            [
                {
                    "Delete": {
                        "TableName": self._name,
                        "Key": self._key(holder_pk(kind), job_id),
                        "ConditionExpression": "attribute_exists(sk)",
                    }
                },
                {
                    "Update": {
                        "TableName": self._name,
                        "Key": self._key(pool_pk(kind), POOL_SK),
                        "UpdateExpression": "SET in_use = in_use - :one",
                        "ConditionExpression": "attribute_exists(pk)",
                        "ExpressionAttributeValues": to_attributes({":one": 1}),
                    }
                },
            ]
        )
        return reasons is None

    # ------------------------------------------------------------ waiting entries
    def enqueue(self, entry: WaitingEntry) -> bool:
        """Park a job: its entry and the pool's counts in one transaction. False: the entry was there (a retried
        wait): only its task token is replaced."""
        item: dict[str, Any] = {
            "pk": waiting_pk(entry.kind),
            "sk": entry.sk,
            "job_id": entry.job_id,
            "caller_key": entry.caller_key,
            "task_token": entry.task_token,
            "enqueued_at": entry.enqueued_at,
        }
        if entry.deadline:
            item["deadline"] = entry.deadline
        reasons = self._transact(
            [
                {
                    "Put": {
                        "TableName": self._name,
                        "Item": to_attributes(item),
                        "ConditionExpression": "attribute_not_exists(sk)",
                    }
                },
                {
                    "Update": {
                        "TableName": self._name,
                        "Key": self._key(pool_pk(entry.kind), POOL_SK),
                        "UpdateExpression": "SET waiting = waiting + :one, "
                        "queued.#caller = if_not_exists(queued.#caller, :zero) + :one",
                        "ConditionExpression": "attribute_exists(pk)",
                        "ExpressionAttributeNames": {"#caller": entry.caller_key},
                        "ExpressionAttributeValues": to_attributes({":one": 1, ":zero": 0}),
                    }
                },
            ]
        )
        if reasons is None:
            return True
        if reasons[0] != "ConditionalCheckFailed":
            raise RuntimeError(f"the {entry.kind} pool does not exist: enqueue {entry.job_id} after ensure_pool")
        try:
            self._ddb.update_item(
                TableName=self._name,
                Key=self._key(waiting_pk(entry.kind), entry.sk),
                UpdateExpression="SET task_token = :token",
                ConditionExpression="attribute_exists(sk)",
                ExpressionAttributeValues=to_attributes({":token": entry.task_token}),
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            # granted between the two calls: the grant answered the old token, which the retry replaced. The
            # caller sees the holder (gate.wait checks after enqueue) and answers the new token.
        return False

    def remove(self, kind: Kind, sk: str, key: str) -> bool:
        """Take an entry out of the queue (cancel, expiry, healing); False if it had left already (granted)."""
        reasons = self._transact(
            [
                {
                    "Delete": {
                        "TableName": self._name,
                        "Key": self._key(waiting_pk(kind), sk),
                        "ConditionExpression": "attribute_exists(sk)",
                    }
                },
                {
                    "Update": {
                        "TableName": self._name,
                        "Key": self._key(pool_pk(kind), POOL_SK),
                        "UpdateExpression": "SET waiting = waiting - :one, "
                        "queued.#caller = if_not_exists(queued.#caller, :one) - :one",
                        "ConditionExpression": "attribute_exists(pk)",
                        "ExpressionAttributeNames": {"#caller": key},
                        "ExpressionAttributeValues": to_attributes({":one": 1}),
                    }
                },
            ]
        )
        return reasons is None

    # ------------------------------------------------------------ internals
    def _key(self, pk: str, sk: str) -> dict[str, Any]:
        return {"pk": {"S": pk}, "sk": {"S": sk}}

    def _put_holder(self, kind: Kind, job_id: str, at: str, *, task_token: str | None = None) -> dict[str, Any]:
        item = {"pk": holder_pk(kind), "sk": job_id, "granted_at": at}
        if task_token:
            item["task_token"] = task_token
        return {
            "Put": {
                "TableName": self._name,
                "Item": to_attributes(item),
                "ConditionExpression": "attribute_not_exists(sk)",
            }
        }

    def _query(self, pk: str) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {}
        while len(found) < _MAX_ITEMS:
            page = self._ddb.query(
                TableName=self._name,
                KeyConditionExpression="pk = :pk",
                ExpressionAttributeValues=to_attributes({":pk": pk}),
                ConsistentRead=True,
                **kwargs,
            )
            found += [from_attributes(item) for item in page.get("Items", [])]
            if "LastEvaluatedKey" not in page:
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return found

    def _transact(self, items: list[dict[str, Any]]) -> list[str] | None:
        """None if the transaction applied, else each item's cancellation reason ("ConditionalCheckFailed" or
        "None"). The pool item is hot: a conflict with a concurrent transaction is retried with jittered backoff."""
        for attempt in range(_CONFLICT_RETRIES):
            try:
                self._ddb.transact_write_items(TransactItems=items)
                return None
            except ClientError as exc:
                error = exc.response["Error"]
                if error["Code"] not in {"TransactionCanceledException", "TransactionConflictException"}:
                    raise
                reasons = [r.get("Code") or "None" for r in exc.response.get("CancellationReasons", [])]
                if error["Code"] == "TransactionConflictException" or "TransactionConflict" in reasons:
                    time.sleep(random.uniform(0, 0.02 * 2**attempt))
                    continue
                return reasons or ["None"] * len(items)
        raise RuntimeError(f"admission transaction still conflicting after {_CONFLICT_RETRIES} attempts")


def _pool(kind: Kind, item: dict[str, Any]) -> Pool:
    data = from_attributes(item)
    data["kind"] = kind
    return msgspec.convert({k: v for k, v in data.items() if k in Pool.__struct_fields__}, Pool)


def _entry(kind: Kind, data: dict[str, Any]) -> WaitingEntry:
    return WaitingEntry(
        kind=kind,
        sk=data["sk"],
        job_id=data["job_id"],
        caller_key=data["caller_key"],
        task_token=data["task_token"],
        enqueued_at=data["enqueued_at"],
        deadline=data.get("deadline"),
    )


class EndpointInstances:
    """How many instances an endpoint has in service (DescribeEndpoint, summed over its production variants)."""

    def __init__(self) -> None:
        self._sagemaker = client("sagemaker")

    def count(self, endpoint: str) -> int:
        try:
            description = self._sagemaker.describe_endpoint(EndpointName=endpoint)
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "ValidationException":  # no such endpoint (yet): nothing serves
                return 0
            raise
        if description.get("EndpointStatus") in ("Creating", "Failed", "Deleting", "OutOfService"):
            return 0
        return sum(int(v.get("CurrentInstanceCount") or 0) for v in description.get("ProductionVariants", []))


class AdmissionMetrics:
    """The queue's depth and the slots in use, per endpoint (``omnireel/Admission``; one PutMetricData per run)."""

    def __init__(self) -> None:
        self._cloudwatch = client("cloudwatch")

    def publish(self, pools: list[Pool], oldest_wait_s: dict[str, float] | None = None) -> None:
        """``oldest_wait_s``: kind -> how long the oldest waiting job of that pool has waited (0 when none)."""
        data = []
        for pool in pools:
            dimensions = [{"Name": DIMENSION, "Value": pool.endpoint or pool.kind}]
            data.append({"MetricName": WAITING_JOBS, "Dimensions": dimensions, "Value": pool.waiting, "Unit": "Count"})
            data.append({"MetricName": SLOTS_IN_USE, "Dimensions": dimensions, "Value": pool.in_use, "Unit": "Count"})
            age = (oldest_wait_s or {}).get(pool.kind, 0.0)
            data.append({"MetricName": OLDEST_WAIT_SECONDS, "Dimensions": dimensions, "Value": age, "Unit": "Seconds"})
        if data:
            self._cloudwatch.put_metric_data(Namespace=NAMESPACE, MetricData=data)
