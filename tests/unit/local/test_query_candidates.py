"""moto patch 38: a Query starts from its partition (or the items whose index key matches), not from every item of the
table sorted.

The same queries run on moto as shipped and with the patch, on the same tables: a table with a partition and a sort
key and a table with a partition key only, each with an index whose keys many items share (ties) or lack (items not in
the index), numbers and strings, pages (Limit and ExclusiveStartKey, forward and backward), key conditions on the sort
key, filters and projections, and partitions that do not exist. Every answer (items, counts, LastEvaluatedKey) must be
the same; the patched Query must not sort the table (``all_items`` as shipped is not called)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.dynamodb.models.table import Table

from omnireel_local.patches.speed import patch_query_candidates


def _tables(ddb: Any) -> None:
    shards = [
        {"AttributeName": "open_shard", "AttributeType": "N"},
        {"AttributeName": "opened_at", "AttributeType": "S"},
    ]
    ddb.create_table(
        TableName="ranged", BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": name, "AttributeType": "S"} for name in ("pk", "sk", "owner")] + shards,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        GlobalSecondaryIndexes=[
            {"IndexName": "open", "Projection": {"ProjectionType": "ALL"},
             "KeySchema": [{"AttributeName": "open_shard", "KeyType": "HASH"},
                           {"AttributeName": "opened_at", "KeyType": "RANGE"}]},
            {"IndexName": "by-owner", "Projection": {"ProjectionType": "KEYS_ONLY"},
             "KeySchema": [{"AttributeName": "owner", "KeyType": "HASH"}]},
        ],
    )  # fmt: skip
    ddb.create_table(
        TableName="plain", BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": "job_id", "AttributeType": "S"}, *shards],
        KeySchema=[{"AttributeName": "job_id", "KeyType": "HASH"}],
        GlobalSecondaryIndexes=[
            {"IndexName": "open", "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["note"]},
             "KeySchema": [{"AttributeName": "open_shard", "KeyType": "HASH"},
                           {"AttributeName": "opened_at", "KeyType": "RANGE"}]},
        ],
    )  # fmt: skip
    rng = random.Random(38)
    for i in range(120):
        item: dict[str, Any] = {
            "pk": {"S": f"P{i % 7}"},
            "sk": {"S": f"s{rng.randrange(10**6):07d}-{i}"},
            "note": {"S": "x" * rng.randrange(0, 40)},
            "n": {"N": str(rng.randrange(100))},
        }
        if i % 5:  # every fifth item is in no index (sparse, as the product's open-items indexes are)
            item["open_shard"] = {"N": str(i % 4)}
            item["opened_at"] = {"S": f"2026-12-0{1 + i % 3}"}  # few values: many ties on the index's sort key
        if i % 3:
            item["owner"] = {"S": f"o{i % 2}"}
        ddb.put_item(TableName="ranged", Item=item)
        plain = {"job_id": {"S": f"job-{rng.randrange(10**6):07d}-{i}"}, "note": {"S": str(i)}}
        if i % 4:
            plain["open_shard"] = {"N": str(i % 3)}
            plain["opened_at"] = {"S": f"2026-12-0{1 + i % 2}"}
        ddb.put_item(TableName="plain", Item=plain)


def _queries() -> Iterator[dict[str, Any]]:
    for pk in ("P0", "P3", "P6", "nope"):
        key = {":p": {"S": pk}}
        yield {"TableName": "ranged", "KeyConditionExpression": "pk = :p", "ExpressionAttributeValues": key}
        yield {"TableName": "ranged", "KeyConditionExpression": "pk = :p AND begins_with(sk, :b)",
               "ExpressionAttributeValues": {**key, ":b": {"S": "s00"}}, "ScanIndexForward": False}  # fmt: skip
        yield {"TableName": "ranged", "KeyConditionExpression": "pk = :p AND sk BETWEEN :a AND :b",
               "FilterExpression": "n > :n", "ProjectionExpression": "sk, n",
               "ExpressionAttributeValues": {**key, ":a": {"S": "s02"}, ":b": {"S": "s07"},
                                             ":n": {"N": "40"}}}  # fmt: skip
    for table in ("ranged", "plain"):
        for shard in range(5):
            yield {"TableName": table, "IndexName": "open", "KeyConditionExpression": "open_shard = :s",
                   "ExpressionAttributeValues": {":s": {"N": str(shard)}}}  # fmt: skip
            yield {"TableName": table, "IndexName": "open",
                   "KeyConditionExpression": "open_shard = :s AND opened_at < :c",
                   "ExpressionAttributeValues": {":s": {"N": str(shard)}, ":c": {"S": "2026-12-03"}},
                   "ScanIndexForward": shard % 2 == 0}  # fmt: skip
    for owner in ("o0", "o1", "o2"):
        yield {
            "TableName": "ranged",
            "IndexName": "by-owner",
            "KeyConditionExpression": "#o = :o",
            "ExpressionAttributeNames": {"#o": "owner"},
            "ExpressionAttributeValues": {":o": {"S": owner}},
        }


def _pages(ddb: Any, query: dict[str, Any], limit: int | None) -> list[dict[str, Any]]:
    """Every page of a query (at most 100), with what each page answered."""
    pages, start = [], None
    for _ in range(100):
        kwargs = {**query, **({"Limit": limit} if limit else {}), **({"ExclusiveStartKey": start} if start else {})}
        page = ddb.query(**kwargs)
        page.pop("ResponseMetadata", None)
        pages.append(page)
        start = page.get("LastEvaluatedKey")
        if not start:
            break
    return pages


def _answers(ddb: Any) -> list[Any]:
    return [_pages(ddb, query, limit) for number, query in enumerate(_queries()) for limit in (None, 1 + number % 9)]


@pytest.fixture
def ddb() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        _tables(client)
        yield client


def test_every_query_answers_as_moto_does(ddb: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    shipped = _answers(ddb)
    assert any(len(pages) > 3 for pages in shipped) and any(pages[0]["Count"] == 0 for pages in shipped)
    sorted_tables = []
    original_all_items = Table.all_items
    monkeypatch.setattr(Table, "all_items", lambda self: sorted_tables.append(self.name) or original_all_items(self))
    patch_query_candidates(set_attribute=monkeypatch.setattr)
    assert _answers(ddb) == shipped
    assert sorted_tables == []  # no Query sorted a whole table


def test_a_scan_still_sees_the_whole_table(ddb: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    before = ddb.scan(TableName="ranged")["Items"]
    patch_query_candidates(set_attribute=monkeypatch.setattr)
    ddb.query(TableName="ranged", KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": {"S": "P1"}})
    assert ddb.scan(TableName="ranged")["Items"] == before
