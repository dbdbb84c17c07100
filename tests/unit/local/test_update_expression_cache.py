"""moto patch 24: an UpdateExpression is parsed once per expression string; the shared tree is never changed, so
updates that use the same expression with other names, values and items stay independent."""

from __future__ import annotations

import copy
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.dynamodb.exceptions import InvalidTokenException
from moto.dynamodb.parsing.expressions import UpdateExpressionParser

from omnireel_local.patches.speed import patch_update_expression_cache

EXPRESSION = "SET #s = :s, updated_at = :now, stage_times.#s = if_not_exists(stage_times.#s, :now) REMOVE open_shard"


def shape(node: Any, seen: set[int] | None = None) -> Any:
    """A plain copy of a parsed tree (types and values), to see whether anything changed it."""
    seen = set() if seen is None else seen
    if isinstance(node, (list, tuple)):
        return [shape(item, seen) for item in node]
    if isinstance(node, dict):
        return {key: shape(value, seen) for key, value in node.items()}
    if hasattr(node, "__dict__") and type(node).__module__.startswith("moto.dynamodb"):
        if id(node) in seen:
            return "<cycle>"
        seen.add(id(node))
        return [type(node).__name__, {key: shape(value, seen) for key, value in vars(node).items()}]
    return copy.copy(node)


def test_one_parse_per_expression_and_independent_updates(monkeypatch: pytest.MonkeyPatch) -> None:
    with mock_aws():
        patch_update_expression_cache(monkeypatch.setattr)
        tree = UpdateExpressionParser.make(EXPRESSION)
        before = shape(tree)
        assert UpdateExpressionParser.make(EXPRESSION) is tree
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        ddb.create_table(TableName="jobs", BillingMode="PAY_PER_REQUEST",
                         AttributeDefinitions=[{"AttributeName": "job_id", "AttributeType": "S"}],
                         KeySchema=[{"AttributeName": "job_id", "KeyType": "HASH"}])  # fmt: skip
        for job in ("a", "b"):
            item = {"job_id": {"S": job}, "stage_times": {"M": {}}, "open_shard": {"S": "x"}}
            ddb.put_item(TableName="jobs", Item=item)
        for job, status in (("a", "generating_image"), ("b", "staging_video"), ("a", "rendering_video")):
            ddb.update_item(
                TableName="jobs",
                Key={"job_id": {"S": job}},
                UpdateExpression=EXPRESSION,
                ExpressionAttributeNames={"#s": status},
                ExpressionAttributeValues={":s": {"S": status}, ":now": {"S": f"t-{job}-{status}"}},
            )
        items = {i["job_id"]["S"]: i for i in ddb.scan(TableName="jobs")["Items"]}
        assert items["a"]["stage_times"]["M"] == {
            "generating_image": {"S": "t-a-generating_image"},
            "rendering_video": {"S": "t-a-rendering_video"},
        }
        assert items["b"]["stage_times"]["M"] == {"staging_video": {"S": "t-b-staging_video"}}
        assert items["a"]["rendering_video"] == {"S": "rendering_video"} and "open_shard" not in items["a"]
        assert shape(UpdateExpressionParser.make(EXPRESSION)) == before  # the shared tree is unchanged
        with pytest.raises(InvalidTokenException, match="Invalid UpdateExpression: Syntax error"):  # as before
            UpdateExpressionParser.make("SET = broken")
