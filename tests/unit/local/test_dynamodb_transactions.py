"""moto patch 16: DynamoDB transactions stay exact under concurrent writers (as on AWS).

moto 5.2.5 deep-copies the table for every TransactWriteItems and restores the copy when a condition fails: concurrent
writes are lost and the copy itself fails ("dictionary changed size during iteration"). Batch counts are such
transactions (a line's condition + the batch's counter), so a lost or failed one left a batch that never completed.
The check runs in a subprocess so the patch does not leak into this test process; ``unpatched`` shows the defect.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

SCRIPT = r"""
import sys, threading
import boto3
from moto import mock_aws

if sys.argv[1] == "patched":
    from omnireel_local.patches.dynamodb import _patch_dynamodb_transactions

    _patch_dynamodb_transactions()
S = lambda v: {"S": v}
with mock_aws():
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    ddb.create_table(
        TableName="t",
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": k, "AttributeType": "S"} for k in ("pk", "sk")],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
    )
    batch = {"pk": S("b"), "sk": S("batch")}
    ddb.put_item(TableName="t", Item={**batch, "n": {"N": "0"}})
    errors = []

    def count_lines(worker):
        for i in range(40):
            line = {"pk": S("b"), "sk": S(f"line#{worker}-{i}")}
            mark = {"TableName": "t", "Key": line, "UpdateExpression": "SET done = :t",
                    "ConditionExpression": "attribute_not_exists(done)",
                    "ExpressionAttributeValues": {":t": {"BOOL": True}}}
            add = {"TableName": "t", "Key": batch, "UpdateExpression": "ADD n :one",
                   "ExpressionAttributeValues": {":one": {"N": "1"}}}
            for _ in range(2):  # the second is a duplicate: its condition fails and nothing counts
                try:
                    ddb.transact_write_items(TransactItems=[{"Update": mark}, {"Update": add}])
                except ddb.exceptions.TransactionCanceledException:
                    pass
                except Exception as exc:
                    errors.append(repr(exc)[:120])

    def other_writes():
        for i in range(200):
            try:
                ddb.put_item(TableName="t", Item={"pk": S("other"), "sk": S(f"x{i}")})
            except Exception as exc:
                errors.append(repr(exc)[:120])

    threads = [threading.Thread(target=count_lines, args=(w,)) for w in range(4)]
    threads.append(threading.Thread(target=other_writes))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    n = int(ddb.get_item(TableName="t", Key=batch)["Item"]["n"]["N"])
    others = ddb.query(TableName="t", KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": S("other")},
                       Select="COUNT")["Count"]
    print("n", n, "others", others, "errors", len(errors), errors[:2])
    sys.exit(0 if (n == 160 and others == 200 and not errors) else 1)
"""


def run(mode: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, timeout=240, check=False
    )


def test_concurrent_transactions_count_exactly_once_and_lose_no_writes() -> None:
    result = run("patched")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("n 160 others 200 errors 0")


@pytest.mark.slow
def test_moto_without_the_patch_loses_counts() -> None:
    """The defect the patch fixes (this fails, and the patch can go, once moto fixes it upstream)."""
    result = run("unpatched")
    assert result.returncode == 1, result.stdout
