"""moto patch 26: every DynamoDB request is handled, its answer serialised, under the lock the backend's writes take,
so a read never serialises an item that a concurrent write is changing (moto raised "dictionary changed size during
iteration" and answered 500; DynamoDB answers from a consistent item)."""

from __future__ import annotations

import threading
from typing import Any

import boto3
import pytest
from moto import mock_aws

from omnireel_local.patches import dynamodb as dynamodb_patches
from omnireel_local.patches.dynamodb import patch_dynamodb_atomic_requests


class RecordingLock:
    """An RLock that records which thread held it when the item was serialised."""

    def __init__(self) -> None:
        self.inner = threading.RLock()
        self.holder: int | None = None
        self.depth = 0

    def __enter__(self) -> RecordingLock:
        self.inner.acquire()
        self.holder, self.depth = threading.get_ident(), self.depth + 1
        return self

    def __exit__(self, *exc: object) -> None:
        self.depth -= 1
        if not self.depth:
            self.holder = None
        self.inner.release()


def _table() -> Any:
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    ddb.create_table(
        TableName="jobs",
        AttributeDefinitions=[{"AttributeName": "job_id", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "job_id", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
    )
    ddb.put_item(TableName="jobs", Item={"job_id": {"S": "j"}, "status": {"S": "rendering_video"}})
    return ddb


def test_reads_serialise_their_answer_under_the_write_lock(monkeypatch: pytest.MonkeyPatch) -> None:
    lock = RecordingLock()
    monkeypatch.setattr(dynamodb_patches, "_DYNAMODB_LOCK", lock)
    from moto.dynamodb.models import utilities

    seen: list[bool] = []
    to_dict = utilities.dynamo_to_dict

    def recording(obj: Any) -> Any:
        seen.append(lock.holder == threading.get_ident())
        return to_dict(obj)

    with mock_aws():
        patch_dynamodb_atomic_requests(monkeypatch.setattr)
        ddb = _table()
        monkeypatch.setattr("moto.dynamodb.responses.dynamo_to_dict", recording)
        assert ddb.get_item(TableName="jobs", Key={"job_id": {"S": "j"}})["Item"]["status"] == {"S": "rendering_video"}
        assert (
            ddb.query(
                TableName="jobs",
                KeyConditionExpression="job_id = :j",
                ExpressionAttributeValues={":j": {"S": "j"}},
            )["Count"]
            == 1
        )
    assert seen and all(seen)  # before the patch: serialised with no lock held
