"""DynamoDB tables for in-process tests on moto (inside ``mock_aws``)."""

from __future__ import annotations

from typing import Any

import boto3


def jobs_table(*items: dict[str, Any]) -> Any:
    """A DynamoDB client and, in moto, a pay-per-request table ``jobs`` keyed by ``job_id`` (a string) holding
    ``items`` (in DynamoDB's attribute-value form)."""
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    ddb.create_table(TableName="jobs", BillingMode="PAY_PER_REQUEST",
                     AttributeDefinitions=[{"AttributeName": "job_id", "AttributeType": "S"}],
                     KeySchema=[{"AttributeName": "job_id", "KeyType": "HASH"}])  # fmt: skip
    for item in items:
        ddb.put_item(TableName="jobs", Item=item)
    return ddb
