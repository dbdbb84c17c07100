"""moto patch 23: DynamoDB item operations' results are written to JSON directly, exactly as moto's serializer would.

Every DynamoResult of the calls below is serialised both ways (the fast path and moto's model-driven serializer) and
the two answers must be equal: status, Content-Type and the decoded body. The corpus covers every AttributeValue
type (S, N, B, SS, NS, BS, M, L, NULL, BOOL, nested), every ReturnValues option, consumed capacity, paging, indexes,
empty results. Only DeleteItem is left to moto's serializer (its result carries a legacy key the serializer drops).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.core.utils import get_service_model
from moto.dynamodb.responses import DynamoHandler, DynamoResult

from omnireel_local.patches.speed import fast_dynamodb_response

REGION = "us-east-1"
ITEM = {
    "pk": {"S": "job-1"},
    "sk": {"S": "0001"},
    "gsi": {"S": "open"},
    "text": {"S": "a fox ✓"},
    "empty": {"S": ""},
    "count": {"N": "42"},
    "ratio": {"N": "-1.5e3"},
    "blob": {"B": b"\x00\xffbytes"},
    "names": {"SS": ["a", "b"]},
    "numbers": {"NS": ["1", "2.5"]},
    "blobs": {"BS": [b"\x01", b"\x02\x03"]},
    "flag": {"BOOL": False},
    "nothing": {"NULL": True},
    "stage_times": {"M": {"accepted": {"S": "2026-12-02T00:00:00.000Z"}, "deep": {"M": {"x": {"L": [{"N": "1"}]}}}}},
    "empty_map": {"M": {}},
    "list": {"L": [{"S": "x"}, {"N": "2"}, {"BOOL": True}, {"NULL": True}, {"M": {"k": {"B": b"z"}}}, {"L": []}]},
}


@pytest.fixture
def compared(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Operations whose result went the fast way (each checked against moto's serializer)."""
    fast_ops: list[str] = []
    original = DynamoHandler.serialized

    def both(self: Any, action_result: Any) -> Any:
        slow = original(self, action_result)
        if isinstance(action_result, DynamoResult):
            operation = get_service_model("dynamodb").operation_model(self._get_action())
            fast = fast_dynamodb_response(operation, action_result.result)
            if fast is not None:
                assert fast[0] == slow[0]
                assert fast[1]["Content-Type"] == slow[1]["Content-Type"]
                assert json.loads(fast[2]) == json.loads(slow[2]), operation.name
                fast_ops.append(operation.name)
        return slow

    with mock_aws():
        monkeypatch.setattr(DynamoHandler, "serialized", both)
        yield fast_ops


def test_the_fast_path_answers_exactly_as_moto_s_serializer(compared: list[str]) -> None:
    ddb = boto3.client("dynamodb", region_name=REGION)
    ddb.create_table(
        TableName="t",
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": a, "AttributeType": "S"} for a in ("pk", "sk", "gsi")],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        GlobalSecondaryIndexes=[{"IndexName": "by-gsi", "KeySchema": [{"AttributeName": "gsi", "KeyType": "HASH"}],
                                 "Projection": {"ProjectionType": "ALL"}}],
    )  # fmt: skip
    key = {"pk": ITEM["pk"], "sk": ITEM["sk"]}
    ddb.put_item(TableName="t", Item=ITEM, ReturnConsumedCapacity="TOTAL")
    ddb.put_item(TableName="t", Item=ITEM, ReturnValues="ALL_OLD")
    for sk in ("0002", "0003", "0004"):
        ddb.put_item(TableName="t", Item={**ITEM, "sk": {"S": sk}})
    ddb.get_item(TableName="t", Key=key, ConsistentRead=True)
    ddb.get_item(TableName="t", Key={"pk": {"S": "none"}, "sk": {"S": "x"}})
    ddb.get_item(TableName="t", Key=key, ProjectionExpression="stage_times.deep, blobs", ReturnConsumedCapacity="TOTAL")
    for returns in ("NONE", "ALL_OLD", "ALL_NEW", "UPDATED_OLD", "UPDATED_NEW"):
        ddb.update_item(
            TableName="t",
            Key=key,
            UpdateExpression="SET #c = #c + :one, stage_times.#s = if_not_exists(stage_times.#s, :now) REMOVE nothing",
            ExpressionAttributeNames={"#c": "count", "#s": "rendering"},
            ExpressionAttributeValues={":one": {"N": "1"}, ":now": {"S": "2026-12-02T00:00:01.000Z"}},
            ReturnValues=returns,
            ReturnConsumedCapacity="INDEXES",
        )
    ddb.query(TableName="t", KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": ITEM["pk"]}, Limit=2)
    ddb.query(TableName="t", IndexName="by-gsi", KeyConditionExpression="gsi = :g",
              ExpressionAttributeValues={":g": {"S": "open"}}, Select="COUNT")  # fmt: skip
    ddb.query(TableName="t", KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": {"S": "nobody"}})
    ddb.scan(TableName="t", FilterExpression="flag = :f", ExpressionAttributeValues={":f": {"BOOL": False}})
    ddb.delete_item(TableName="t", Key={"pk": ITEM["pk"], "sk": {"S": "0004"}}, ReturnValues="ALL_OLD")
    ddb.delete_item(TableName="t", Key={"pk": ITEM["pk"], "sk": {"S": "0009"}})
    assert sorted(set(compared)) == ["GetItem", "PutItem", "Query", "Scan", "UpdateItem"]
    assert len(compared) == 17  # every call but the two DeleteItems (moto's serializer answers those)


def test_a_result_with_anything_but_plain_values_goes_to_moto_s_serializer() -> None:
    from datetime import UTC, datetime

    operation = get_service_model("dynamodb").operation_model("GetItem")
    assert fast_dynamodb_response(operation, {"Item": {"a": {"S": "x"}}}) is not None
    assert fast_dynamodb_response(operation, {"item": {"a": {"S": "x"}}}) is None  # an alias moto would resolve
    assert fast_dynamodb_response(operation, {"Item": {"a": {"S": datetime.now(UTC)}}}) is None
    describe = get_service_model("dynamodb").operation_model("DescribeTable")
    assert fast_dynamodb_response(describe, {"Table": {}}) is None  # not an item operation
