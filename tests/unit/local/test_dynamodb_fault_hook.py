"""moto patch 28, a fault hook (off by default): DynamoDB requests whose body matches answer a throttle, ``count``
times; other requests are untouched."""

from __future__ import annotations

import boto3
import pytest
from botocore.config import Config
from moto import mock_aws

from omnireel_local import fault_injection
from omnireel_local.patches.dynamodb import patch_dynamodb_fault_hook


def test_matching_requests_are_throttled_count_times(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fault_injection, "_home", None)
    monkeypatch.setattr(fault_injection, "_config", {"dynamodb_throttle": {"match": ["job-2", "hooks"], "count": 2}})
    fault_injection._seen.clear()
    with mock_aws():
        patch_dynamodb_fault_hook(monkeypatch.setattr)
        ddb = boto3.client("dynamodb", region_name="us-east-1", config=Config(retries={"total_max_attempts": 1}))
        ddb.create_table(
            TableName="jobs", BillingMode="PAY_PER_REQUEST",
            KeySchema=[{"AttributeName": "job_id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "job_id", "AttributeType": "S"}],
        )  # fmt: skip

        def update(job: str) -> None:
            ddb.update_item(
                TableName="jobs", Key={"job_id": {"S": job}}, UpdateExpression="SET hooks = :h",
                ExpressionAttributeValues={":h": {"N": "1"}},
            )  # fmt: skip

        update("job-1")  # does not match
        for _ in range(2):
            with pytest.raises(ddb.exceptions.ProvisionedThroughputExceededException):
                update("job-2")
        update("job-2")  # the count is used up
        assert ddb.get_item(TableName="jobs", Key={"job_id": {"S": "job-2"}})["Item"]["hooks"] == {"N": "1"}
